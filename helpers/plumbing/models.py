"""Models: architecture facts of well-known LLMs (and of any config), and loading one with or without its weights."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PretrainedConfig, PreTrainedModel

from .device import as_device, bytes_per_element, default_dtype
from .hub import hub_unavailable
from .tokenizer import offline_tokenizer
from .validate import positive_int


def kv_cache_bytes(n_layers: int, n_kv_heads: int, head_dim: int, seq_len: int, batch_size: int = 1,
                   bytes_per_elem: int = 2) -> int:
    """Bytes of a KV cache: 2 (K and V) x bytes/elem x layers x KV heads x head_dim x tokens x batch (chapter 4).

    It lives beside ModelSpec, whose `kv_bytes_per_token` uses it; `course.formulas` shows it with the others."""
    args = dict(n_layers=n_layers, n_kv_heads=n_kv_heads, head_dim=head_dim, seq_len=seq_len,
                batch_size=batch_size, bytes_per_elem=bytes_per_elem)
    for name, value in args.items():
        positive_int(name, value)
    return 2 * bytes_per_elem * n_layers * n_kv_heads * head_dim * seq_len * batch_size


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of one model, as in its published config.json."""

    name: str
    hub_id: str
    family: str  # "gpt2", "llama", "mistral" or "qwen3": which transformers config builds it
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    d_ff: int
    n_params: int  # as counted by transformers, tied embeddings counted once
    max_positions: int
    tied_embeddings: bool

    def weight_bytes(self, bytes_per_elem: int = 2) -> int:
        """Bytes of all weights stored at `bytes_per_elem` (2 for bf16/fp16, 4 for fp32), lookups included."""
        return self.n_params * bytes_per_elem

    def kv_bytes_per_token(self, bytes_per_elem: int = 2) -> int:
        """KV-cache bytes one token adds: K and V, every layer, every KV head."""
        return kv_cache_bytes(self.n_layers, self.n_kv_heads, self.head_dim, 1, 1, bytes_per_elem)


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
        ModelSpec("mistral-7b", "mistralai/Mistral-7B-v0.1", "mistral", 32, 4096, 32, 8, 128, 32000, 14336,
                  7_241_732_096, 32768, False),
        # Qwen/Qwen3-0.6B/config.json: head_dim 128 although d_model / n_heads = 64; tied embeddings.
        ModelSpec("qwen3-0.6b", "Qwen/Qwen3-0.6B", "qwen3", 28, 1024, 16, 8, 128, 151936, 3072,
                  596_049_920, 40960, True),
    ]
}


def model_spec(name: str) -> ModelSpec:
    """The architecture record of a model in the registry, by short name (e.g. 'gpt2-large')."""
    if name not in MODEL_SPECS:
        raise ValueError(f"name must be one of {sorted(MODEL_SPECS)}, got {name!r}")
    return MODEL_SPECS[name]


def build_config(spec: ModelSpec) -> PretrainedConfig:
    """A transformers config with the spec's architecture, made without the network."""
    if spec.family == "gpt2":
        return AutoConfig.for_model("gpt2", n_layer=spec.n_layers, n_embd=spec.d_model, n_head=spec.n_heads,
                                    n_inner=spec.d_ff, vocab_size=spec.vocab_size, n_positions=spec.max_positions)
    common = dict(num_hidden_layers=spec.n_layers, hidden_size=spec.d_model, num_attention_heads=spec.n_heads,
                  num_key_value_heads=spec.n_kv_heads, head_dim=spec.head_dim, intermediate_size=spec.d_ff,
                  vocab_size=spec.vocab_size, max_position_embeddings=spec.max_positions,
                  tie_word_embeddings=spec.tied_embeddings)
    return AutoConfig.for_model(spec.family, **common)


def config_spec(config: PretrainedConfig) -> ModelSpec:
    """The architecture a GPT-2 or Llama-family config states, as a ModelSpec (n_params 0: architecture_spec counts)."""
    name = config.name_or_path or f"{config.model_type}-style"
    if config.model_type == "gpt2":
        return ModelSpec(name, "", "gpt2", config.n_layer, config.n_embd, config.n_head, config.n_head,
                         config.n_embd // config.n_head, config.vocab_size, config.n_inner or 4 * config.n_embd, 0,
                         config.n_positions, config.tie_word_embeddings)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return ModelSpec(name, "", config.model_type, config.num_hidden_layers, config.hidden_size,
                     config.num_attention_heads, config.num_key_value_heads, head_dim, config.vocab_size,
                     config.intermediate_size, 0, config.max_position_embeddings, config.tie_word_embeddings)


def architecture_spec(source: ModelSpec | PretrainedConfig, **changes: object) -> ModelSpec:
    """The ModelSpec of a spec with `changes` (e.g. `n_layers=4`) or of a config (`changes`: name, hub_id), its
    parameters counted on the meta device (tied weights once): the one way to describe an unlisted architecture."""
    if isinstance(source, ModelSpec):
        spec = replace(source, **changes)
        config = build_config(spec)
    else:
        if set(changes) - {"name", "hub_id"}:
            raise ValueError(f"changes to a config may be name and hub_id only, got {sorted(changes)}: "
                             "change the config itself")
        spec, config = replace(config_spec(source), **changes), source
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return replace(spec, n_params=sum(p.numel() for p in model.parameters()))


def gpt2_style_config(d_model: int, n_layers: int, n_heads: int, n_positions: int,
                      vocab_size: int = 50257) -> PretrainedConfig:
    """A GPT-2 config of any width and depth, with enough positions for long prompts (d_ff = 4 d).

    Its end-of-text id (bos and eos) is the vocabulary's last, as in GPT-2 and the offline tokenizer."""
    for name, value in dict(d_model=d_model, n_layers=n_layers, n_heads=n_heads, n_positions=n_positions).items():
        positive_int(name, value)
    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
    return AutoConfig.for_model("gpt2", n_embd=d_model, n_layer=n_layers, n_head=n_heads,
                                n_positions=n_positions, vocab_size=positive_int("vocab_size", vocab_size),
                                bos_token_id=vocab_size - 1, eos_token_id=vocab_size - 1)


@torch.no_grad()
def fill_random_(module: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """Give every parameter of `module` N(0, 0.02)-like values (norms 1, biases 0) and recompute rotary buffers.

    Drawing every weight afresh takes seconds per 100M parameters on a CPU; tiling one block of such noise
    is as good for timing and memory, which never depend on the values."""
    noise = torch.randn(2**20 + 7919, device=device, generator=torch.Generator(device).manual_seed(0)) * 0.02
    for name, param in module.named_parameters():
        if param.dim() == 1:
            param.fill_(0.0 if name.endswith("bias") else 1.0)
            continue
        flat = param.view(-1)
        for start in range(0, flat.numel(), noise.numel()):
            chunk = flat[start:start + noise.numel()]
            chunk.copy_(noise[:chunk.numel()])
        noise = noise.roll(7919)
    for sub in module.modules():  # buffers such as rotary frequencies are computed, not learned
        if hasattr(sub, "inv_freq"):
            fresh = type(sub)(sub.config).to(device)
            for key, value in vars(fresh).items():
                if isinstance(value, torch.Tensor):
                    setattr(sub, key, value)
            sub.inv_freq = fresh.inv_freq
    return module


def for_inference(model: torch.nn.Module) -> torch.nn.Module:
    """The model in eval mode with its weights frozen: no call records an autograd graph.

    Without this, a cache kept across decode steps would hold every step's graph, and through it every
    step's keys and values: gigabytes at batch 16 within 20 steps, and each step slowed by the recording."""
    return model.eval().requires_grad_(False)


def random_model(config: PretrainedConfig, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> PreTrainedModel:
    """A model of `config`'s architecture with random weights, built on the meta device, then filled.

    The lab's one way to build a model without its weights (load_model falls back to it)."""
    device = as_device(device)
    dtype = dtype or default_dtype(device)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.to_empty(device=device)
    fill_random_(model, device)
    model.tie_weights()
    return for_inference(model)


def load_model(name: str, device: torch.device | str | None = None, dtype: torch.dtype | None = None,
               pretrained: bool = True, verbose: bool = True):
    """Return (model, tokenizer): pretrained weights where they can be had, else random weights, said plainly."""
    spec = model_spec(name)
    device = as_device(device)
    dtype = dtype or default_dtype(device)
    model = tokenizer = None
    reason = "pretrained=False"
    if pretrained:
        try:
            model = AutoModelForCausalLM.from_pretrained(spec.hub_id, dtype=dtype, local_files_only=hub_unavailable())
            tokenizer = AutoTokenizer.from_pretrained(spec.hub_id, local_files_only=hub_unavailable())
            model = for_inference(model.to(device))
        except Exception as err:  # offline, gated or missing: fall back to the architecture alone
            model = tokenizer = None
            reason = "no Hub access" if hub_unavailable() else f"{type(err).__name__}: {str(err).splitlines()[0][:80]}"
    if model is None:
        model = random_model(build_config(spec), device, dtype)
        tokenizer = offline_tokenizer(spec.vocab_size)
        model.lab_weights = "random"
        weights = f"RANDOM weights, {spec.hub_id}'s architecture ({reason})"
        after = "timing and memory are real; text is gibberish (ids the offline tokenizer never learned print as <id>)"
    else:
        model.lab_weights = "pretrained"
        weights, after = f"pretrained weights from {spec.hub_id}", ""
    if verbose:
        n = sum(p.numel() for p in model.parameters())
        print(f"{name}: {weights}: {n / 1e6:.0f}M parameters, {n * bytes_per_element(dtype) / 2**30:.2f} GiB in "
              f"{str(dtype).removeprefix('torch.')} on {device}" + (f"; {after}." if after else "."))
    return model, tokenizer


def weights_are_pretrained(model: PreTrainedModel) -> bool:
    """True if load_model gave this model its pretrained weights."""
    return getattr(model, "lab_weights", "pretrained") == "pretrained"


def random_prompt(n_tokens: int, vocab_size: int, batch_size: int = 1, device: torch.device | str | None = None,
                  seed: int = 0) -> torch.Tensor:
    """Token ids (batch_size, n_tokens) drawn at random: timing and memory do not depend on which tokens."""
    positive_int("n_tokens", n_tokens)
    positive_int("batch_size", batch_size)
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size - 1, (batch_size, n_tokens), generator=g).to(as_device(device))
