"""Chapter 7's exercises: answers computed from the lab's formulas and chapter 7's closed forms, never typed in."""

from ..course.faster_decode import expected_tokens_per_verification, generation_time
from ..course.formulas import weight_bytes_read
from . import Choice, Numeric


def _speculative_speedup(acceptance_rate: float, k: int, prefill_s: float, step_s: float, verify_s: float,
                         new_tokens: int, **_: object) -> float:
    """Whole-generation speedup: prefill + (n - 1) steps over prefill + (n - 1) / E[tokens] verifications."""
    tokens = expected_tokens_per_verification(acceptance_rate, k)
    return generation_time(prefill_s, step_s, new_tokens) / generation_time(prefill_s, verify_s, new_tokens, tokens)

EXERCISES = {
    # 7.1: tokens one verification yields with acceptance rate a and k drafts, (1 - a^(k+1)) / (1 - a)
    "7.1": Numeric(expected=lambda acceptance_rate, k, **_: expected_tokens_per_verification(acceptance_rate, k),
                   rel_tol=0.02, unit="tokens"),
    # 7.2: weight bytes of one decode step with int8 weights: every matrix weight once, 1 byte each
    "7.2": Numeric(expected=lambda spec, **_: weight_bytes_read(spec, 1), rel_tol=0.02, unit="bytes"),
    # 7.3: TTFT speedup of prefix caching when prefill time is proportional to its tokens: full / suffix
    "7.3": Numeric(expected=lambda prompt_len, prefix_len, **_: prompt_len / (prompt_len - prefix_len),
                   rel_tol=0.02, unit="x"),
    # 7.4: compute-bound decode: speculative decoding's gain shrinks (b)
    "7.4": Choice("b", ("a", "b", "c")),
    # 7.5: predicted speedup of a whole generation at an acceptance rate the sweep did not run
    "7.5": Numeric(expected=_speculative_speedup, rel_tol=0.03, unit="x"),
}
