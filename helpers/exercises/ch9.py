"""Chapter 9's exercises: expected answers computed from the lab's step-cost, scheduling and KV arithmetic."""

from __future__ import annotations

import math

from ..course.hardware.links import kv_transfer_s
from ..plumbing.model_specs import cache_bytes
from ..plumbing.models import model_spec
from . import Numeric


def _stall_ms(fixed_ms: float, per_token_us: float, per_sequence_us: float, per_score_ns: float, decoding: int,
              context: int, prompt_tokens: int) -> float:
    """ITL in ms the decoding requests see in the step that also carries a whole prompt, at the engine-fitted cost
    as printed: one step of decoding + prompt tokens from decoding + 1 sequences, whose keys are the decodes'
    `context` tokens each and the prompt's own."""
    tokens, keys = decoding + prompt_tokens, decoding * context + prompt_tokens
    return (fixed_ms + per_token_us * tokens / 1e3 + per_sequence_us * (decoding + 1) / 1e3
            + per_score_ns * tokens * keys / 1e6)


def _chunk_steps(budget: int, decoding: int, prompt_tokens: int) -> float:
    """Steps a prompt takes under fifo with a token budget: decodes first, the rest of each step to the prompt."""
    return float(math.ceil(prompt_tokens / (budget - decoding)))


def _transfer_ms(model: str, prompt_tokens: int, link_bytes_per_s: float) -> float:
    """ms to send one prompt's bf16 KV cache over a link (chapter 4's bytes per token x tokens / bandwidth)."""
    return kv_transfer_s(prompt_tokens, cache_bytes(model_spec(model), 1, 1, 2), link_bytes_per_s) * 1e3


EXERCISES = {
    "9.1": Numeric(expected=_stall_ms, rel_tol=0.05, unit="ms"),
    "9.2": Numeric(expected=_chunk_steps, rel_tol=0.0, unit="steps"),
    "9.3": Numeric(expected=_transfer_ms, rel_tol=0.05, unit="ms"),
}
