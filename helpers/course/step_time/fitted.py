"""Step costs fitted to steps timed on this device: a line in the work's size (chapter 5), and an engine's packed
step, which adds the scores of every new token against every key of the step (chapter 9)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...plumbing.validate import non_negative
from .work import Work


@dataclass(frozen=True)
class LinearStepCost:
    """Step seconds = fixed + per_token x new tokens + per_context_token x KV tokens read
    + per_sequence x sequences in the step (fitted here)."""

    fixed_s: float
    per_token_s: float
    per_context_token_s: float = 0.0
    per_sequence_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("fixed_s", "per_token_s", "per_context_token_s", "per_sequence_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")

    def __call__(self, work: Work) -> float:
        """Seconds for one step over `work`."""
        return (self.fixed_s + self.per_token_s * sum(new for new, _ in work)
                + self.per_context_token_s * sum(ctx for _, ctx in work) + self.per_sequence_s * len(work))

    def price(self, steps: pd.DataFrame) -> np.ndarray:
        """The cost of each recorded step (columns tokens and sequences, and kv_tokens where the cost reads the
        cache), s."""
        tokens, sequences = steps["tokens"].to_numpy(float), steps["sequences"].to_numpy(float)
        keys = steps["kv_tokens"].to_numpy(float) if self.per_context_token_s else 0.0
        return (self.fixed_s + self.per_token_s * tokens + self.per_context_token_s * keys
                + self.per_sequence_s * sequences)


@dataclass(frozen=True)
class PackedStepCost(LinearStepCost):
    """An engine step: fixed + per token + per sequence, plus per score x new tokens x keys of the whole step.

    transformers' engine packs a step's sequences into one row and, with SDPA or eager attention, scores every
    new token of the step against every key of the step (the cache read and the new tokens, of all its
    sequences), a block-diagonal mask keeping each sequence's own. A prompt of P tokens in a step of decodes
    costs about P x (P + the decodes' keys) scores: the term that makes a long prompt's step grow faster than
    its tokens. (A flash kernel computes only each sequence's own causal scores: the term then prices a
    different count, at an average rate.)"""

    per_score_s: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        non_negative("per_score_s", self.per_score_s)

    def __call__(self, work: Work) -> float:
        """Seconds for one step over `work` ((new tokens, tokens in the cache after the step) per sequence)."""
        return super().__call__(work) + self.per_score_s * sum(new for new, _ in work) * sum(ctx for _, ctx in work)

    def price(self, steps: pd.DataFrame) -> np.ndarray:
        """The cost of each recorded step (columns tokens, sequences, and kv_tokens where a term reads them), s."""
        scores = steps["tokens"].to_numpy(float) * steps["kv_tokens"].to_numpy(float) if self.per_score_s else 0.0
        return super().price(steps) + self.per_score_s * scores


def fit_linear_cost(tokens: Sequence[float], seconds: Sequence[float],
                    context_tokens: Sequence[float] | None = None,
                    sequences: Sequence[float] | None = None) -> LinearStepCost:
    """Least-squares fit of step seconds to tokens (and KV tokens read, and sequences), coefficients clipped at 0."""
    if len(tokens) != len(seconds) or len(tokens) < 2:
        raise ValueError(f"need >= 2 matching (tokens, seconds) points, got {len(tokens)} and {len(seconds)}")
    columns = {"fixed": np.ones(len(tokens)), "tokens": np.asarray(tokens, float)}
    for name, values in (("context_tokens", context_tokens), ("sequences", sequences)):
        if values is not None:
            if len(values) != len(tokens):
                raise ValueError(f"{name} must have one value per point")
            columns[name] = np.asarray(values, float)
    coef, *_ = np.linalg.lstsq(np.column_stack(list(columns.values())), np.asarray(seconds, float), rcond=None)
    fitted = dict(zip(columns, np.clip(coef, 0.0, None), strict=True))
    return LinearStepCost(float(fitted["fixed"]), float(fitted["tokens"]), float(fitted.get("context_tokens", 0.0)),
                          float(fitted.get("sequences", 0.0)))
