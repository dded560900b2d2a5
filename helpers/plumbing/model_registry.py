"""The lab's registry of published architectures: each row is its model's config.json, as a ModelSpec.

Every row's parameter count is transformers' own on the meta device, and a unit test rebuilds each row's
config and checks both. The `mini-*` rows are small random models of each 2026 family that run here in
seconds (no published weights: `load_model` gives them random ones).
"""

from __future__ import annotations

from .model_specs import ModelSpec

S, F = "sliding", "full"

MODEL_SPECS: dict[str, ModelSpec] = {
    s.name: s
    for s in [
        # openai-community/gpt2*/config.json: n_layer, n_embd, n_head, vocab 50257, n_positions 1024, tied.
        ModelSpec("gpt2", "openai-community/gpt2", "gpt2", 12, 768, 12, 12, 64, 50257, 3072, 124_439_808, 1024, True),
        ModelSpec("gpt2-medium", "openai-community/gpt2-medium", "gpt2", 24, 1024, 16, 16, 64, 50257, 4096,
                  354_823_168, 1024, True),
        ModelSpec("gpt2-large", "openai-community/gpt2-large", "gpt2", 36, 1280, 20, 20, 64, 50257, 5120,
                  774_030_080, 1024, True),
        ModelSpec("gpt2-xl", "openai-community/gpt2-xl", "gpt2", 48, 1600, 25, 25, 64, 50257, 6400,
                  1_557_611_200, 1024, True),
        # meta-llama/Llama-2-7b-hf/config.json: 32 layers, 4096, 32 heads = 32 KV heads, 11008 MLP, 32000 vocab.
        ModelSpec("llama-2-7b", "meta-llama/Llama-2-7b-hf", "llama", 32, 4096, 32, 32, 128, 32000, 11008,
                  6_738_415_616, 4096, False),
        # meta-llama/Meta-Llama-3-8B/config.json: 8 KV heads (GQA), 14336 MLP, 128256 vocab.
        ModelSpec("llama-3-8b", "meta-llama/Meta-Llama-3-8B", "llama", 32, 4096, 32, 8, 128, 128256, 14336,
                  8_030_261_248, 8192, False),
        # meta-llama/Meta-Llama-3-70B/config.json: 80 layers, 8192, 64 heads, 8 KV heads, 28672 MLP.
        ModelSpec("llama-3-70b", "meta-llama/Meta-Llama-3-70B", "llama", 80, 8192, 64, 8, 128, 128256, 28672,
                  70_553_706_496, 8192, False),
        # mistralai/Mistral-7B-v0.1/config.json: 8 KV heads, 14336 MLP, 32000 vocab, 32768 positions.
        # "sliding_window": 4096 on every layer.
        ModelSpec("mistral-7b", "mistralai/Mistral-7B-v0.1", "mistral", 32, 4096, 32, 8, 128, 32000, 14336,
                  7_241_732_096, 32768, False, layer_types=(S,) * 32, sliding_window=4096),
        # Qwen/Qwen3-0.6B/config.json: head_dim 128 although d_model / n_heads = 64; tied embeddings.
        ModelSpec("qwen3-0.6b", "Qwen/Qwen3-0.6B", "qwen3", 28, 1024, 16, 8, 128, 151936, 3072,
                  596_049_920, 40960, True),
        # Qwen/Qwen3-30B-A3B/config.json: 128 experts of 768, 8 per token, every layer sparse; 3.3B active.
        ModelSpec("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", "qwen3_moe", 48, 2048, 32, 4, 128, 151936, 6144,
                  30_532_122_624, 40960, False, n_experts=128, experts_per_token=8, expert_d_ff=768,
                  config_extra=(("norm_topk_prob", True),)),
        # mistralai/Mixtral-8x7B-v0.1/config.json: 8 experts of 14336, 2 per token; no window.
        ModelSpec("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1", "mixtral", 32, 4096, 32, 8, 128, 32000, 14336,
                  46_702_792_704, 32768, False, n_experts=8, experts_per_token=2, expert_d_ff=14336),
        # openai/gpt-oss-20b/config.json: 32 experts of 2880, 4 per token; layers alternate a 128-token
        # window with full attention, starting with the window.
        ModelSpec("gpt-oss-20b", "openai/gpt-oss-20b", "gpt_oss", 24, 2880, 64, 8, 64, 201088, 2880,
                  20_914_757_184, 131072, False, layer_types=(S, F) * 12, sliding_window=128, n_experts=32,
                  experts_per_token=4, expert_d_ff=2880),
        # deepseek-ai/DeepSeek-V3/config.json: MLA (kv_lora_rank 512 + qk_rope_head_dim 64 cached per token and
        # layer; q_lora_rank 1536; qk_nope 128 + rope 64 = 192 per query head; v_head_dim 128); 3 dense layers,
        # then 256 routed experts of 2048 (8 per token, groups 8 / top 4) and 1 shared. The multi-token
        # prediction layer is not part of transformers' model.
        ModelSpec("deepseek-v3", "deepseek-ai/DeepSeek-V3", "deepseek_v3", 61, 7168, 128, 128, 192, 129280, 18432,
                  671_026_404_352, 163840, False, kv_lora_rank=512, qk_rope_head_dim=64, q_lora_rank=1536,
                  v_head_dim=128, n_experts=256, experts_per_token=8, n_shared_experts=1, expert_d_ff=2048,
                  n_dense_layers=3, config_extra=(("n_group", 8), ("topk_group", 4))),
        # google/gemma-3-27b-pt's text_config: five layers with a 1024-token window, then one global, and so on.
        ModelSpec("gemma-3-27b", "google/gemma-3-27b-pt", "gemma3_text", 62, 5376, 32, 16, 128, 262208, 21504,
                  27_009_346_304, 131072, True, layer_types=tuple(F if i % 6 == 5 else S for i in range(62)),
                  sliding_window=1024),
        # Small random models of the same families, for measuring here (4 to 6 layers, 512 wide, 4096 tokens).
        ModelSpec("mini-qwen3-moe", "", "qwen3_moe", 4, 512, 8, 2, 64, 4096, 1536, 82_383_872, 4096, False,
                  n_experts=32, experts_per_token=4, expert_d_ff=384, config_extra=(("norm_topk_prob", True),)),
        ModelSpec("mini-mixtral", "", "mixtral", 4, 512, 8, 2, 64, 4096, 1024, 57_168_384, 4096, False,
                  n_experts=8, experts_per_token=2, expert_d_ff=1024),
        ModelSpec("mini-gpt-oss", "", "gpt_oss", 4, 512, 8, 2, 64, 4096, 512, 32_056_896, 4096, False,
                  layer_types=(S, F) * 2, sliding_window=64, n_experts=8, experts_per_token=2, expert_d_ff=512),
        ModelSpec("mini-deepseek-v3", "", "deepseek_v3", 4, 512, 8, 8, 96, 4096, 1024, 28_735_232, 4096, False,
                  kv_lora_rank=128, qk_rope_head_dim=32, q_lora_rank=192, v_head_dim=64, n_experts=16,
                  experts_per_token=4, n_shared_experts=1, expert_d_ff=256, n_dense_layers=1,
                  config_extra=(("n_group", 4), ("topk_group", 2))),
        ModelSpec("mini-gemma3", "", "gemma3_text", 6, 512, 8, 4, 64, 4096, 1536, 20_985_088, 4096, True,
                  layer_types=(S,) * 5 + (F,), sliding_window=64),
    ]
}


def model_spec(name: str) -> ModelSpec:
    """The architecture record of a model in the registry, by short name (e.g. 'gpt2-large')."""
    if name not in MODEL_SPECS:
        raise ValueError(f"name must be one of {sorted(MODEL_SPECS)}, got {name!r}")
    return MODEL_SPECS[name]
