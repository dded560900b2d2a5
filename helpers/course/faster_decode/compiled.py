"""Chapter 7, compilation: what a compiled decode step still runs, and what each part costs.

Inductor fuses the elementwise work of the model's forward into generated kernels and leaves matrix
products and attention to library calls. Each call of the compiled forward also runs Dynamo's guards
(checks that the inputs, the model's attributes and the cache still match what was compiled). The
step's own ops outside the forward (making the position tensor, argmax, cutting the cache back) stay eager.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ...plumbing.timing import benchmark
from ..step_time.operators import op_kind


class OpRecorder(TorchDispatchMode):
    """Inside `with recorder:`, counts every ATen call, inside a forward it wrapped or outside, and keeps the
    library calls with their arguments so they can be replayed alone."""

    def __init__(self) -> None:
        super().__init__()
        self.inside, self.inside_ops, self.outside_ops, self.library = False, 0, 0, []

    def wrap(self, forward: Callable) -> Callable:
        """`forward`, marking the ATen calls it makes as inside (what torch.compile would compile)."""
        def marked(*args, **kwargs):
            self.inside = True
            try:
                return forward(*args, **kwargs)
            finally:
                self.inside = False
        return marked

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.inside:
            self.inside_ops += 1
            if op_kind(str(func)) in ("matmul", "attention"):  # what inductor leaves to libraries
                self.library.append((func, args, kwargs))
        else:
            self.outside_ops += 1
        return func(*args, **kwargs)

    def replay(self) -> Callable[[], None]:
        """A call that runs the recorded library calls again, on their recorded arguments, and nothing else."""
        calls = list(self.library)

        def run():
            with torch.no_grad():
                for func, args, kwargs in calls:
                    func(*args, **kwargs)
        return run


def compiled_call_cost(device: torch.device | str = "cpu") -> float:
    """Seconds of one call of a compiled one-op function: Dynamo's frame hook, its few guards, the wrapper."""
    x = torch.zeros(8, device=device)
    add_one = torch.compile(lambda t: t + 1)
    add_one(x)
    return benchmark(lambda: add_one(x), device=device).median


def without_guards(step: Callable[[], object]) -> Callable[[], object] | None:
    """`step` with Dynamo's guard checks skipped (unsafe: for timing the guards only), or None where this
    torch has no such stance."""
    stance = getattr(torch.compiler, "set_stance", None)
    if stance is None or "skip_guard_eval_unsafe" not in inspect.signature(stance).parameters:
        return None

    def unguarded():
        with torch.compiler.set_stance("default", skip_guard_eval_unsafe=True):
            return step()
    return unguarded


def guard_count(fn: Callable) -> int | None:
    """How many guards Dynamo checks on a call of compiled `fn` (its first compiled entry; None where this
    torch hides them): the leaf guards of its guard tree."""
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        fn = getattr(fn, "_torchdynamo_orig_callable", fn)  # what torch.compile wrapped
        entries = _debug_get_cache_entry_list(getattr(fn, "__func__", fn).__code__)
        root = entries[0].guard_manager.root
    except (AttributeError, ImportError, IndexError, TypeError):
        return None

    def leaves(manager) -> int:
        return len(manager.get_leaf_guards()) + sum(leaves(child) for child in manager.get_child_managers())
    return leaves(root)
