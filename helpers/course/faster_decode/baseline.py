"""Chapter 7's baseline: the small Llama-style models it runs, and a variant's time predicted from the baseline's."""

from __future__ import annotations

from ...plumbing.models import ModelSpec, architecture_spec, model_spec
from ...plumbing.validate import positive, positive_int


def small_llama_spec(n_layers: int, d_model: int = 768, n_heads: int = 12, d_ff: int = 2048,
                     vocab_size: int = 32000, max_positions: int = 2048) -> ModelSpec:
    """A Llama-style architecture (nn.Linear layers, untied head) of any size, its parameters counted on meta."""
    for name, value in dict(n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_ff=d_ff).items():
        positive_int(name, value)
    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
    return architecture_spec(model_spec("llama-2-7b"), name=f"llama-style {n_layers}x{d_model}", hub_id="",
                             n_layers=n_layers, d_model=d_model, n_heads=n_heads, n_kv_heads=n_heads,
                             head_dim=d_model // n_heads, vocab_size=vocab_size, d_ff=d_ff,
                             max_positions=max_positions)


def shifted_prediction(measured_base_s: float, predicted_base_s: float, predicted_variant_s: float) -> float:
    """The measured baseline plus the step model's predicted change: what the variant should take here."""
    return positive("measured_base_s", measured_base_s) + predicted_variant_s - predicted_base_s


def scaled_prediction(measured_base_s: float, predicted_base_s: float, predicted_variant_s: float) -> float:
    """The measured baseline times the step model's predicted ratio: for a variant that removes most of the work
    (a cached prefix), where adding the predicted change would carry the baseline's whole miss into a small time."""
    return positive("measured_base_s", measured_base_s) * predicted_variant_s / positive("predicted_base_s",
                                                                                          predicted_base_s)
