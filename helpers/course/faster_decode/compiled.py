"""Chapter 7, compilation: what a compiled decode step still runs, and what each part costs.

Inductor fuses the elementwise work of the model's forward into generated kernels and leaves matrix
products and attention to library calls. Each call of the compiled forward also runs Dynamo's guards
(checks that the inputs, the model's attributes and the cache still match what was compiled). The
step's own ops outside the forward (making the position tensor, argmax, cutting the cache back) stay eager.
A static cache keeps every step's shapes the same, so the compiled forward is compiled once (`static_greedy`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch

from ...plumbing.compat import cache_kwargs
from ...plumbing.timing import benchmark
from ...plumbing.validate import positive_int
from ..kv_cache import rewind_cache
from ..phases import prefill, static_cache
from ..roofline.op_counts import DispatchedOp, DispatchRecorder
from ..step_time.operators import op_kind


def _library_call(op: DispatchedOp) -> bool:
    """A matmul or attention call inside the wrapped forward: what inductor leaves to libraries."""
    return op.inside and op_kind(op.name) in ("matmul", "attention")


class OpRecorder(DispatchRecorder):
    """Inside `with recorder:`, records every ATen call, inside a forward it wrapped (`wrap`) or outside, and
    keeps the library calls with their arguments so they can be replayed alone."""

    def __init__(self) -> None:
        super().__init__(keep=_library_call)

    @property
    def inside_ops(self) -> int:
        """ATen calls inside the wrapped forward (what torch.compile would compile)."""
        return sum(op.inside for op in self.ops)

    @property
    def outside_ops(self) -> int:
        """ATen calls outside it: the step's own eager ops."""
        return len(self.ops) - self.inside_ops

    @property
    def library(self) -> list[tuple]:
        """(func, args, kwargs) of each library call, in order."""
        return [op.call for op in self.ops if op.call is not None]

    def replay(self) -> Callable[[], None]:
        """A call that runs the recorded library calls again, on their recorded arguments, and nothing else."""
        calls = self.library

        def run():
            with torch.no_grad():
                for func, args, kwargs in calls:
                    func(*args, **kwargs)
        return run


def static_greedy(forward: Callable, model, input_ids: torch.Tensor,
                  n_tokens: int) -> tuple[list[int], Callable]:
    """Greedy ids through a StaticCache of prompt + n_tokens slots, decode steps by `forward` (model.forward,
    or a compiled one).

    Also returns a call that re-runs the last decode step (the cache cut back first, so every call attends
    over the same cache). Each step attends over all the cache's slots, filled or not."""
    prompt_len = input_ids.shape[1]
    cache = static_cache(model, prompt_len + positive_int("n_tokens", n_tokens), input_ids.shape[0])
    token, cache = prefill(model, input_ids, cache=cache)
    ids = [token.item()]

    def step(token=token, position=prompt_len):
        with torch.no_grad():
            out = forward(token, use_cache=True, cache_position=torch.tensor([position], device=token.device),
                          **cache_kwargs(model, cache))
        return out.logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)

    for i in range(n_tokens - 1):
        token = step(token, prompt_len + i)
        ids.append(token.item())
    last = prompt_len + n_tokens - 2

    def again():
        rewind_cache(cache, last)
        return step(token, last)

    return ids, again


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
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list  # here: a private API some versions lack

        fn = getattr(fn, "_torchdynamo_orig_callable", fn)  # what torch.compile wrapped
        entries = _debug_get_cache_entry_list(getattr(fn, "__func__", fn).__code__)
        root = entries[0].guard_manager.root
    except (AttributeError, ImportError, IndexError, TypeError):
        return None

    def leaves(manager) -> int:
        return len(manager.get_leaf_guards()) + sum(leaves(child) for child in manager.get_child_managers())
    return leaves(root)
