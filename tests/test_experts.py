"""Counting the experts a step's tokens route to, on small random MoE models of each family."""

import pytest
import torch

import helpers
from helpers.course.experts import experts_hit, experts_modules

TINY = dict(n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16, vocab_size=256)


def tiny_model(name: str, **changes):
    """A random model of a registry MoE at toy width: built in well under a second."""
    spec = helpers.architecture_spec(helpers.model_spec(name), **{**TINY, **changes})
    return spec, helpers.random_model(helpers.build_config(spec), "cpu", torch.float32)


def forward(model, n_tokens: int, batch: int = 1):
    """A call that runs one forward of `batch` rows of `n_tokens` tokens."""
    ids = helpers.random_prompt(n_tokens, 256, batch, "cpu")
    return lambda: model(ids)


@pytest.mark.parametrize("name", ["mini-qwen3-moe", "mini-mixtral", "mini-gpt-oss"])
def test_one_token_hits_k_experts_per_layer(name):
    spec, model = tiny_model(name, expert_d_ff=32)
    hits = experts_hit(model, forward(model, 1), n_steps=2)
    assert hits.shape == (2, spec.n_moe_layers)
    assert (hits == spec.experts_per_token).all()


def test_many_tokens_hit_every_expert_and_implementations_agree():
    spec, model = tiny_model("mini-mixtral", expert_d_ff=32)  # 8 experts, 2 per token
    step = forward(model, 32, batch=2)  # 64 tokens: each expert missed with probability 0.75^64
    assert (experts_hit(model, step) == spec.n_experts).all()
    model.set_experts_implementation("eager")
    assert (experts_hit(model, step) == spec.n_experts).all()


def test_counts_lie_between_k_and_the_tokens_routed():
    spec, model = tiny_model("mini-qwen3-moe", expert_d_ff=32)  # 32 experts, 4 per token
    hits = experts_hit(model, forward(model, 1, batch=4))
    assert ((hits >= spec.experts_per_token) & (hits <= 4 * spec.experts_per_token)).all()


def test_hooks_are_removed_and_bad_calls_are_named():
    _, model = tiny_model("mini-mixtral", expert_d_ff=32)
    experts_hit(model, forward(model, 1))
    assert all(not m._forward_pre_hooks for m in experts_modules(model))
    with pytest.raises(ValueError, match="n_steps"):
        experts_hit(model, forward(model, 1), n_steps=0)
    twice = forward(model, 1)
    with pytest.raises(ValueError, match="one forward of the model per call"):
        experts_hit(model, lambda: (twice(), twice()))
    assert all(not m._forward_pre_hooks for m in experts_modules(model))


def test_a_dense_model_is_refused():
    dense = helpers.random_model(helpers.gpt2_style_config(32, 1, 2, 16, vocab_size=64), "cpu", torch.float32)
    assert experts_modules(dense) == []
    with pytest.raises(ValueError, match="model must be a mixture of experts"):
        experts_hit(dense, lambda: None)
