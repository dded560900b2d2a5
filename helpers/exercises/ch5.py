"""Chapter 5's exercises: expected answers computed from the lab's formulas, plans and step costs, never typed in."""

from __future__ import annotations

from ..course.formulas import weight_bytes_read
from ..course.hardware import gpu_spec
from ..course.kv_cache import VLLM_GPU_MEMORY_UTILIZATION, kv_budget_bytes, tensor_parallel_memory
from ..course.step_time import LinearStepCost, RooflineStepCost
from ..plumbing.models import model_spec
from . import Choice, Numeric
from .ch4 import GPU_80GB


def _llama3_8b_sequences(**_: object) -> float:
    """Upper bound on 16,384-token Llama-3-8B sequences whose bf16 KV fits in vLLM's 0.92 of an H100 after the weights.

    The card as its driver reports it (81,559 MiB); vLLM also takes activations and CUDA graphs out of that share."""
    s = model_spec("llama-3-8b")
    return kv_budget_bytes(GPU_80GB, s.weight_bytes(2)) // (s.kv_bytes_per_token(2) * 16384)


def _llama3_8b_step_ms(batch: int = 64, context: int = 2048, **_: object) -> float:
    """Roofline decode step (no overhead) of Llama-3-8B on an H100 SXM, in ms: matrix weights + KV read once."""
    return RooflineStepCost(model_spec("llama-3-8b"), gpu_spec("H100 SXM"))([(1, context)] * batch) * 1e3


def _llama3_70b_tp(**_: object) -> float:
    """Smallest TP size whose bf16 weights + KV (batch 16 x 4,096 tokens) fit vLLM's share of each 81,559 MiB H100."""
    room = VLLM_GPU_MEMORY_UTILIZATION * GPU_80GB
    m = model_spec("llama-3-70b")
    return next(tp for tp in (1, 2, 4, 8) if tensor_parallel_memory(m, tp, 4096, 16)["total_bytes"] <= room)


def _fitted_step_ms(fixed_ms: float, per_token_ms: float, per_kv_token_us: float, batch: int,
                    context: int) -> float:
    """The fitted line's decode step (ms) at `batch`, each sequence reading `context` KV tokens."""
    line = LinearStepCost(fixed_ms / 1e3, per_token_ms / 1e3, per_kv_token_us / 1e6)
    return line([(1, context)] * batch) * 1e3


def _mixtral_batch1_ms(**_: object) -> float:
    """Mixtral-8x7B's bf16 decode step at batch 1 on an H100 SXM, bandwidth-bound, in ms: the matrix weights one
    token reads (2 of 8 experts per layer), not all 46.7B parameters."""
    return weight_bytes_read(model_spec("mixtral-8x7b"), 2, n_tokens=1) / gpu_spec("H100 SXM").bandwidth * 1e3


EXERCISES = {
    "5.1": Numeric(expected=_llama3_8b_sequences, rel_tol=0.001, unit="sequences"),
    "5.2": Numeric(expected=_llama3_8b_step_ms, rel_tol=0.05, unit="ms"),
    "5.3": Choice("static", ("static", "continuous", "chunked")),  # the three 5.4.3 compares
    "5.4": Numeric(expected=_llama3_70b_tp, rel_tol=0.0, unit="GPUs"),
    "5.5": Numeric(expected=_fitted_step_ms, rel_tol=0.03, unit="ms"),
    "5.6": Numeric(expected=_mixtral_batch1_ms, rel_tol=0.05, unit="ms"),
}
