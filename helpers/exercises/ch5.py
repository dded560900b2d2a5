"""Chapter 5's exercises: expected answers computed from the lab's formulas, plans and step costs, never typed in."""

from __future__ import annotations

from ..course.hardware import gpu_spec
from ..course.kv_cache import VLLM_GPU_MEMORY_UTILIZATION, kv_capacity_tokens, tensor_parallel_memory
from ..course.serving.simulator import SCHEDULERS
from ..course.serving.step_cost import RooflineStepCost
from ..plumbing.models import model_spec
from . import Choice, Numeric


def _llama3_8b_sequences(**_: object) -> float:
    """8,192-token sequences of Llama-3-8B whose bf16 KV fits beside the weights in vLLM's share of an H100 SXM."""
    return kv_capacity_tokens(model_spec("llama-3-8b"), gpu_spec("H100 SXM")) // 8192


def _llama3_8b_step_ms(batch: int = 64, context: int = 2048, **_: object) -> float:
    """Roofline decode step (no overhead) of Llama-3-8B on an H100 SXM, in ms: matrix weights + KV read once."""
    return RooflineStepCost(model_spec("llama-3-8b"), gpu_spec("H100 SXM"))([(1, context)] * batch) * 1e3


def _llama3_70b_tp(**_: object) -> float:
    """Smallest TP size whose bf16 weights + KV (batch 16 x 4,096 tokens) fit vLLM's share of each H100 SXM."""
    room = VLLM_GPU_MEMORY_UTILIZATION * gpu_spec("H100 SXM").memory_bytes
    m = model_spec("llama-3-70b")
    return next(tp for tp in (1, 2, 4, 8) if tensor_parallel_memory(m, tp, 4096, 16)["total_bytes"] <= room)


EXERCISES = {
    "5.1": Numeric(expected=_llama3_8b_sequences, rel_tol=0.001, unit="sequences"),
    "5.2": Numeric(expected=_llama3_8b_step_ms, rel_tol=0.05, unit="ms"),
    "5.3": Choice("static", SCHEDULERS),
    "5.4": Numeric(expected=_llama3_70b_tp, rel_tol=0.0, unit="GPUs"),
}
