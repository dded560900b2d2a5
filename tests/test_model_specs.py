"""ModelSpec and the registry: published values, parameter counts, cache bytes against real caches, bad specs."""

from dataclasses import replace

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

import helpers

MINI = sorted(name for name in helpers.MODEL_SPECS if name.startswith("mini-"))
MOE = sorted(name for name, spec in helpers.MODEL_SPECS.items() if spec.n_experts)
WINDOW = 64  # every mini model with sliding layers has a 64-token window


# 1. Every row is its own config: spec -> config -> spec, parameters counted by transformers on the meta device.

@pytest.mark.parametrize("name", sorted(helpers.MODEL_SPECS))
def test_registry_row_round_trips_through_its_config(name):
    spec = helpers.model_spec(name)
    assert helpers.spec_from_config(helpers.build_config(spec), name=spec.name, hub_id=spec.hub_id) == spec


# 2. Published values, copied from each model's config.json (transformers' attribute names).

PUBLISHED_CONFIG = {
    "qwen3-30b-a3b": dict(num_hidden_layers=48, hidden_size=2048, num_attention_heads=32, num_key_value_heads=4,
                          head_dim=128, num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768,
                          vocab_size=151936),
    "mixtral-8x7b": dict(num_hidden_layers=32, hidden_size=4096, num_key_value_heads=8, num_local_experts=8,
                         num_experts_per_tok=2, intermediate_size=14336, vocab_size=32000),
    "gpt-oss-20b": dict(num_hidden_layers=24, hidden_size=2880, num_attention_heads=64, num_key_value_heads=8,
                        head_dim=64, num_local_experts=32, num_experts_per_tok=4, intermediate_size=2880,
                        sliding_window=128, vocab_size=201088),
    "deepseek-v3": dict(num_hidden_layers=61, hidden_size=7168, num_attention_heads=128, kv_lora_rank=512,
                        qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, q_lora_rank=1536,
                        n_routed_experts=256, n_shared_experts=1, num_experts_per_tok=8, moe_intermediate_size=2048,
                        first_k_dense_replace=3, intermediate_size=18432, vocab_size=129280),
    "gemma-3-27b": dict(num_hidden_layers=62, hidden_size=5376, num_attention_heads=32, num_key_value_heads=16,
                        head_dim=128, intermediate_size=21504, sliding_window=1024, vocab_size=262208),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_CONFIG))
def test_published_config_values(name):
    config = helpers.build_config(helpers.model_spec(name))
    assert {key: getattr(config, key) for key in PUBLISHED_CONFIG[name]} == PUBLISHED_CONFIG[name]


def test_published_layer_patterns():
    gpt_oss = helpers.model_spec("gpt-oss-20b")
    assert gpt_oss.layer_types == tuple("sliding" if i % 2 == 0 else "full" for i in range(24))  # starts sliding
    assert gpt_oss.attention == "hybrid"
    gemma = helpers.model_spec("gemma-3-27b")
    assert gemma.layer_types == tuple("full" if i % 6 == 5 else "sliding" for i in range(62))
    assert helpers.build_config(gemma).layer_types[:6] == ["sliding_attention"] * 5 + ["full_attention"]
    deepseek = helpers.model_spec("deepseek-v3")
    assert deepseek.attention == "latent" and deepseek.n_moe_layers == 61 - 3
    assert helpers.model_spec("qwen3-30b-a3b").attention == "GQA" and not helpers.model_spec("mixtral-8x7b").layer_types


# Totals and active parameters as the model cards give them (billions).
PUBLISHED_PARAMS = {"qwen3-30b-a3b": 30.5, "mixtral-8x7b": 46.7, "gpt-oss-20b": 20.9, "deepseek-v3": 671.0,
                    "gemma-3-27b": 27.0}


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_published_parameter_totals(name):
    assert helpers.model_spec(name).n_params == pytest.approx(PUBLISHED_PARAMS[name] * 1e9, rel=0.005)


def test_published_active_parameters():
    assert helpers.model_spec("qwen3-30b-a3b").active_params == pytest.approx(3.3e9, rel=0.02)  # "3.3B activated"
    assert helpers.model_spec("mixtral-8x7b").active_params == pytest.approx(12.9e9, rel=0.005)
    assert helpers.model_spec("deepseek-v3").active_params == pytest.approx(37.5e9, rel=0.005)  # published: 37B
    gpt_oss = helpers.model_spec("gpt-oss-20b")
    assert gpt_oss.active_params == pytest.approx(4.19e9, rel=0.005)  # both embedding matrices counted
    # OpenAI's 3.6B active leaves out the input embedding (a lookup, not a matmul).
    assert gpt_oss.active_params - gpt_oss.vocab_size * gpt_oss.d_model == pytest.approx(3.61e9, rel=0.005)
    gemma = helpers.model_spec("gemma-3-27b")
    assert gemma.active_params == gemma.n_params and gemma.n_moe_layers == 0  # dense: every weight is active


@pytest.mark.parametrize("name", MOE)
def test_active_parameters_leave_out_the_unpicked_experts_of_the_built_model(name):
    spec = helpers.model_spec(name)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(helpers.build_config(spec))
    expert_blocks = [layer.mlp.experts for layer in model.model.layers if hasattr(layer.mlp, "experts")]
    assert len(expert_blocks) == spec.n_moe_layers
    per_expert = {sum(p.numel() for p in block.parameters()) // spec.n_experts for block in expert_blocks}
    assert per_expert == {spec.expert_params}
    unpicked = sum(sum(p.numel() for p in block.parameters()) for block in expert_blocks) \
        * (spec.n_experts - spec.experts_per_token) // spec.n_experts
    assert spec.active_params == spec.n_params - unpicked


# 3. cache_bytes against the bytes a real transformers cache holds, below, at and past the 64-token window.

@pytest.fixture(scope="module", params=MINI)
def mini(request):
    """(spec, model) of a mini registry row, random fp32 weights on the CPU, built once per module."""
    spec = helpers.model_spec(request.param)
    return spec, helpers.random_model(helpers.build_config(spec), "cpu", torch.float32)


@pytest.mark.parametrize("seq_len", [8, WINDOW - 1, WINDOW, WINDOW + 1, 150])
def test_cache_bytes_match_a_real_cache_after_prefill(mini, seq_len):
    spec, model = mini
    _, cache = helpers.prefill(model, helpers.random_prompt(seq_len, spec.vocab_size, batch_size=2))
    assert helpers.cache_nbytes(cache) == helpers.cache_bytes(spec, seq_len, batch_size=2, bytes_per_elem=4)


def test_cache_bytes_match_a_real_cache_while_decoding_across_the_window(mini):
    spec, model = mini
    token, cache = helpers.prefill(model, helpers.random_prompt(WINDOW - 3, spec.vocab_size, batch_size=2))
    for seq_len in range(WINDOW - 2, WINDOW + 3):  # 62 ... 66 tokens: the window fills, then slides
        token, cache = helpers.decode_step(model, token, cache)
        assert helpers.cache_nbytes(cache) == helpers.cache_bytes(spec, seq_len, batch_size=2, bytes_per_elem=4)


# 4. The formula on cases worked by hand.

def test_latent_cache_is_576_values_per_token_and_layer():
    deepseek = helpers.model_spec("deepseek-v3")
    assert deepseek.layer_bytes_per_token("latent", bytes_per_elem=1) == 512 + 64 == 576
    assert helpers.cache_bytes(deepseek, 1000, bytes_per_elem=2) == 576 * 2 * 61 * 1000


def test_dense_cache_bytes_agree_with_the_kv_cache_formula():
    llama = helpers.model_spec("llama-3-8b")
    assert helpers.cache_bytes(llama, 4096, batch_size=3) == helpers.kv_cache_bytes(32, 8, 128, 4096, 3) \
        == 2 * 2 * 32 * 8 * 128 * 4096 * 3


def test_gemma_all_full_at_64k_tokens_is_31744_mib():
    all_full = replace(helpers.model_spec("gemma-3-27b"), layer_types=())
    assert helpers.cache_bytes(all_full, 65_536, bytes_per_elem=2) == 31_744 * 2**20  # 62 x 2 x 16 x 128 x 2 B/token


def test_sliding_layers_hold_window_minus_one_tokens():
    gemma = helpers.model_spec("gemma-3-27b")
    assert gemma.cached_tokens("sliding", 500) == 500
    assert gemma.cached_tokens("sliding", 1023) == gemma.cached_tokens("sliding", 100_000) == 1023
    assert gemma.cached_tokens("full", 100_000) == 100_000
    per_token_and_layer = 2 * 16 * 128 * 2  # K and V, 16 KV heads of 128, bf16: 8,192 B
    assert helpers.cache_bytes(gemma, 65_536) == (10 * 65_536 + 52 * 1023) * per_token_and_layer  # 10 full, 52 sliding
    gpt_oss = helpers.model_spec("gpt-oss-20b")
    assert helpers.cache_bytes(gpt_oss, 131_072) == (12 * 131_072 + 12 * 127) * 2 * 8 * 64 * 2


# 5. Experts a batch hits.

def test_expected_experts_hit_from_one_token_to_many():
    assert helpers.expected_experts_hit(128, 8, 1) == pytest.approx(8)
    assert helpers.expected_experts_hit(8, 2, 2) == pytest.approx(8 * (1 - 0.75**2)) == pytest.approx(3.5)
    assert helpers.expected_experts_hit(128, 8, 2000) == pytest.approx(128)
    hits = [helpers.expected_experts_hit(128, 8, t) for t in range(1, 300)]
    assert hits == sorted(hits) and len(set(hits[:100])) == 100  # rising, strictly while far from E
    assert max(hits) <= 128


def test_expected_experts_hit_matches_random_routing():
    g = torch.Generator().manual_seed(0)
    n_experts, k, n_tokens, trials = 32, 4, 10, 2000
    picks = torch.rand(trials, n_tokens, n_experts, generator=g).argsort(dim=-1)[..., :k]  # k distinct per token
    hit = torch.zeros(trials, n_experts, dtype=torch.bool).scatter_(1, picks.reshape(trials, -1), True)
    assert hit.sum(1).float().mean().item() == pytest.approx(helpers.expected_experts_hit(n_experts, k, n_tokens),
                                                            rel=0.01)


@pytest.mark.parametrize("args, field", [((8, 9, 1), "experts_per_token"), ((0, 1, 1), "n_experts"),
                                         ((8, 0, 1), "experts_per_token"), ((8, 2, 0), "n_tokens")])
def test_expected_experts_hit_rejects_bad_input(args, field):
    with pytest.raises(ValueError, match=field):
        helpers.expected_experts_hit(*args)


# 6. Bad specs and configs.

@pytest.mark.parametrize("base, changes, field", [
    ("mini-gemma3", dict(sliding_window=0), "sliding_window"),
    ("mini-mixtral", dict(experts_per_token=9), "experts_per_token"),
    ("mini-mixtral", dict(experts_per_token=0), "experts_per_token"),
    ("mini-gemma3", dict(layer_types=("sliding", "full")), "layer_types"),
    ("mini-gemma3", dict(layer_types=("sliding",) * 5 + ("global",)), "layer_types"),
    ("mini-deepseek-v3", dict(n_dense_layers=4), "n_dense_layers"),
    ("mini-deepseek-v3", dict(qk_rope_head_dim=0), "qk_rope_head_dim"),
])
def test_bad_spec_names_its_field(base, changes, field):
    with pytest.raises(ValueError, match=field):
        replace(helpers.model_spec(base), **changes)


def test_spec_from_config_rejects_an_unsupported_family():
    with pytest.raises(ValueError, match="model_type"):
        helpers.spec_from_config(AutoConfig.for_model("bert"))


TINY = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=128)


def tiny_config(family: str, **fields) -> AutoConfig:
    """A two-layer config of `family` with `fields`; skips the test if transformers itself refuses them."""
    try:
        return AutoConfig.for_model(family, **TINY, **fields)
    except (ValueError, TypeError) as err:
        pytest.skip(f"transformers refuses {fields} for {family}: {err}")


@pytest.mark.parametrize("family, fields, field", [
    ("gemma3_text", dict(sliding_window=0), "sliding_window"),
    ("gpt_oss", dict(sliding_window=0), "sliding_window"),
    ("qwen3", dict(use_sliding_window=True, sliding_window=0, max_window_layers=0), "sliding_window"),
    ("qwen3_moe", dict(num_experts=4, num_experts_per_tok=8), "experts_per_token"),
    ("mixtral", dict(num_local_experts=4, num_experts_per_tok=8), "experts_per_token"),
    ("gpt_oss", dict(num_local_experts=4, num_experts_per_tok=8), "experts_per_token"),
    ("deepseek_v3", dict(n_routed_experts=4, num_experts_per_tok=8, n_group=1, topk_group=1), "experts_per_token"),
    ("mistral", dict(sliding_window=0), "sliding_window"),
    ("mixtral", dict(sliding_window=0), "sliding_window"),
    ("gemma3_text", dict(sliding_window=None), "sliding_window"),
])
def test_spec_from_config_rejects_a_config_transformers_accepts(family, fields, field):
    config = tiny_config(family, **fields)
    with pytest.raises(ValueError, match=field):
        helpers.spec_from_config(config, count_params=False)


# 7. Cutting layers keeps the pattern's start.

def test_fewer_layers_keep_the_hybrid_pattern():
    gemma = helpers.model_spec("gemma-3-27b")
    cut = helpers.architecture_spec(gemma, n_layers=6)
    assert cut.layer_types == ("sliding",) * 5 + ("full",) and cut.attention == "hybrid"
    assert cut.n_params == helpers.spec_from_config(helpers.build_config(cut)).n_params < gemma.n_params
    assert helpers.architecture_spec(helpers.model_spec("gpt-oss-20b"), n_layers=1).layer_types == ("sliding",)


def test_fewer_layers_keep_one_moe_layer():
    deepseek = helpers.model_spec("deepseek-v3")
    one, two, three = (helpers.architecture_spec(deepseek, n_layers=n) for n in (1, 2, 3))
    assert (two.n_dense_layers, two.n_moe_layers) == (1, 1)
    assert (one.n_dense_layers, one.n_moe_layers) == (0, 1) and (three.n_dense_layers, three.n_moe_layers) == (2, 1)
    assert three.n_params - two.n_params == two.n_params - one.n_params  # each step adds one dense layer
    assert two.active_params < two.n_params
