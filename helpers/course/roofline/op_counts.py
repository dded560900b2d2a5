"""Chapter 1, op counts: every ATen operator a call dispatches, recorded once, and the counts made from that record.

`DispatchRecorder` is the lab's one way to watch dispatch: chapter 1 counts operators (`count_ops`), chapter 2
the bytes DynamicCache's torch.cat moves, the step model the operators and elementwise bytes of a forward,
chapter 7 what a compiled step leaves to library calls. Each reads its numbers off the same records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

# Operators that only allocate or relabel memory: like views, they launch no kernel.
_NO_KERNEL_OPS = frozenset({"aten::_unsafe_view", "aten::_reshape_alias", "aten::empty", "aten::empty_strided",
                            "aten::empty_like", "aten::new_empty", "aten::new_empty_strided"})


def launches_kernel(func) -> bool:
    """Whether an ATen operator can launch a kernel: not a view (its schema aliases the input) nor an allocation."""
    return not func.is_view and func._schema.name not in _NO_KERNEL_OPS


def bytes_touched(*trees: object) -> int:
    """Bytes of the distinct tensors in nested args/kwargs/outputs (an in-place op's output counted once)."""
    tensors = {id(t): t for t in tree_flatten(trees)[0] if isinstance(t, torch.Tensor)}
    return sum(t.numel() * t.element_size() for t in tensors.values())


@dataclass(frozen=True)
class DispatchedOp:
    """One ATen operator call: its name (e.g. 'aten.mm.default'), what it is, and the bytes it touches."""

    name: str
    is_view: bool
    launches_kernel: bool
    nbytes: int  # distinct tensors among its inputs and outputs
    inside: bool  # dispatched inside a function the recorder wrapped
    call: tuple | None = None  # (func, args, kwargs), kept only where the recorder's `keep` asked for it


class DispatchRecorder(TorchDispatchMode):
    """Inside `with recorder:`, records every ATen operator call once, in order, as a DispatchedOp.

    `keep(op)` selects the calls whose arguments are kept so they can be run again (chapter 7's replay)."""

    def __init__(self, keep: Callable[[DispatchedOp], bool] | None = None) -> None:
        super().__init__()
        self.ops: list[DispatchedOp] = []
        self.keep = keep
        self.inside = False

    def wrap(self, fn: Callable) -> Callable:
        """`fn`, marking the operators it dispatches as `inside` (e.g. a forward torch.compile would compile)."""
        def marked(*args, **kwargs):
            self.inside = True
            try:
                return fn(*args, **kwargs)
            finally:
                self.inside = False
        return marked

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        op = DispatchedOp(str(func), func.is_view, launches_kernel(func), bytes_touched(args, kwargs, out), self.inside)
        if self.keep is not None and self.keep(op):
            op = replace(op, call=(func, args, kwargs))
        self.ops.append(op)
        return out

    @property
    def kernel_count(self) -> int:
        """Operator calls that can launch a kernel."""
        return sum(op.launches_kernel for op in self.ops)


def record_dispatch(fn: Callable[[], object]) -> DispatchRecorder:
    """The operators one call of fn() dispatches, without autograd's bookkeeping."""
    with torch.no_grad(), DispatchRecorder() as recorder:
        fn()
    return recorder


def count_ops(fn: Callable[[], object], views: bool = False) -> int:
    """How many ATen operators one call of fn() runs that can launch a kernel (all of them with views=True).

    The lab's one way to count operator calls (chapters 1 and 2), each counted once at dispatch (composites
    decomposed). Views, reshapes and allocations change only metadata and launch nothing, so they are left
    out: each op counted is about one kernel launch on a GPU (a few launch two)."""
    recorder = record_dispatch(fn)
    return len(recorder.ops) if views else recorder.kernel_count


def count_flops(fn: Callable[[], object]) -> dict[str, int]:
    """FLOPs per operator of one call of fn(), as torch.utils.flop_counter.FlopCounterMode counts them."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return {str(op).removeprefix("aten."): int(n) for op, n in counter.get_flop_counts()["Global"].items()}
