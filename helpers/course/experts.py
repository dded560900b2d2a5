"""Chapter 5, a mixture of experts under batching: the experts a step's tokens really route to, counted.

The expectation under uniform routing, E x (1 - (1 - k/E)^T), is `expected_experts_hit` (beside ModelSpec); the
weight bytes a step reads, `formulas.weight_bytes_read`. This module counts what a model does instead.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..plumbing.validate import positive_int

INDEX_ARGUMENTS = ("top_k_index", "router_indices")  # the expert ids' keyword in transformers' experts classes


def experts_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The experts module of every MoE layer, in order: the one holding all experts' weights as 3-D tensors (one
    matrix per expert). transformers calls it with (hidden_states, expert ids per token, routing weights)."""
    return [m for m in model.modules()
            if isinstance(getattr(m, "down_proj", None), torch.nn.Parameter) and m.down_proj.dim() == 3]


def experts_hit(model: torch.nn.Module, step: Callable[[], object], n_steps: int = 1) -> np.ndarray:
    """Distinct experts each MoE layer's tokens routed to in each of `n_steps` calls of `step()`: (steps, layers).

    A forward pre-hook on each experts module reads the expert ids it receives (tokens x k)."""
    n_steps = positive_int("n_steps", n_steps)
    modules = experts_modules(model)
    if not modules:
        raise ValueError(f"model must be a mixture of experts, got a {type(model).__name__} with no experts module")
    counts: list[int] = []

    def count(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        ids = args[1] if len(args) > 1 else next(kwargs[k] for k in INDEX_ARGUMENTS if k in kwargs)
        counts.append(int(ids[ids < module.num_experts].unique().numel()))  # ids past E: other ranks' (EP)

    handles = [m.register_forward_pre_hook(count, with_kwargs=True) for m in modules]
    try:
        for _ in range(n_steps):
            step()
    finally:
        for handle in handles:
            handle.remove()
    if len(counts) != n_steps * len(modules):
        raise ValueError(f"step must run one forward of the model per call: {len(counts)} experts calls in "
                         f"{n_steps} steps of a model with {len(modules)} MoE layers")
    return np.array(counts).reshape(n_steps, len(modules))
