"""Chapter 6's exercises: expected answers computed from the lab's paged-KV arithmetic, never typed in."""

from __future__ import annotations

import numpy as np

from ..course.kv_cache import reserved_tokens
from ..course.step_time import LinearStepCost
from . import Choice, Numeric


def _blocks_held(prompt_len: int = 32, output_len: int = 16, block_size: int = 16, **_: object) -> float:
    """KV blocks one request holds when it finishes: ceil((prompt + output - 1) / block size), the last token
    never being fed back."""
    length = prompt_len + output_len - 1
    return float(reserved_tokens(np.array([length]), "paged", length, block_size)[0] // block_size)


def _saturated_rate(fixed_s: float = 0.01, per_token_s: float = 1e-4, per_sequence_s: float = 0.0, batch: int = 8,
                    output_len: int = 16, **_: object) -> float:
    """Requests/s when `batch` requests decode together for `output_len` steps of a linear step cost."""
    step = LinearStepCost(fixed_s, per_token_s, per_sequence_s=per_sequence_s)
    return batch / (output_len * step([(1, 0)] * batch))  # one new token per sequence


def _idle_ttft_ms(fixed_ms: float, per_token_us: float, per_sequence_us: float, prompt_len: int) -> float:
    """TTFT in ms of one request at an idle engine, from the engine-fitted step cost as printed: one step that
    prefills its prompt, for one sequence."""
    return fixed_ms + per_token_us * prompt_len / 1e3 + per_sequence_us / 1e3


EXERCISES = {
    "6.1": Numeric(expected=_blocks_held, rel_tol=0.0, unit="blocks"),
    "6.2": Choice("generate", ("generate", "generate_batch")),
    "6.3": Numeric(expected=_saturated_rate, rel_tol=0.05, unit="requests/s"),
    "6.4": Numeric(expected=_idle_ttft_ms, rel_tol=0.05, unit="ms"),
}
