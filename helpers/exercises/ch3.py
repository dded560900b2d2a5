"""Chapter 3's exercises: expected answers computed from the lab's formulas, never typed in."""

from __future__ import annotations

from ..course.formulas import block_flops, matmul_flops, score_flops, score_matrix_bytes
from ..course.hardware import gpu_spec
from ..plumbing.models import model_spec
from . import Numeric


def _score_matrix_gib(**_: object) -> float:
    """3.1: one bf16 score matrix of Llama-3-8B (every query head has its own) at 32,768 tokens, in GiB."""
    return score_matrix_bytes(32768, 32768, model_spec("llama-3-8b").n_heads, 2) / 2**30


def _mlp_crossover_tokens(**_: object) -> float:
    """3.2: N at which a GPT-2 small block's attention FLOPs (4 d N^2) equal its MLP's (up + down per token)."""
    spec = model_spec("gpt2")
    mlp_per_token = 2 * matmul_flops(1, spec.d_model, spec.d_ff)  # up (d -> d_ff) and down (d_ff -> d)
    return mlp_per_token / score_flops(1, 1, 1, spec.d_model)  # score FLOPs per (query, key) pair: 4 d


def _ttft_factor(n: int, d_model: int = 768, **_: object) -> float:
    """3.3: growth of a block's FLOPs (all pairs) when the prompt goes from n to 4 n tokens."""
    return sum(block_flops(4 * n, d_model).values()) / sum(block_flops(n, d_model).values())


def _h100_prefill_ms(**_: object) -> float:
    """3.4: a 32-layer, 4096-wide GPT-2-style prefill of 8,192 tokens at the H100 SXM's dense bf16 peak, in ms."""
    return 32 * sum(block_flops(8192, 4096).values()) / gpu_spec("H100 SXM").peak_flops * 1e3


def _time_at_factor_ms(seconds: float, factor: float) -> float:
    """3.5: a kernel timed at N taking `seconds`, predicted at `factor` x N if its time grows as N^2, in ms."""
    return seconds * factor**2 * 1e3


EXERCISES = {
    "3.1": Numeric(expected=_score_matrix_gib, rel_tol=0.02, unit="GiB"),
    "3.2": Numeric(expected=_mlp_crossover_tokens, rel_tol=0.02, unit="tokens"),
    "3.3": Numeric(expected=_ttft_factor, rel_tol=0.03, unit="x"),
    "3.4": Numeric(expected=_h100_prefill_ms, rel_tol=0.05, unit="ms"),
    "3.5": Numeric(expected=_time_at_factor_ms, rel_tol=0.05, unit="ms"),
}
