"""Models: loading one with or without its weights (its architecture: `model_specs`, the registry: `model_registry`)."""

from __future__ import annotations

from dataclasses import replace

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PretrainedConfig, PreTrainedModel

from .device import as_device, bytes_per_element, default_dtype
from .hub import hub_unavailable
from .model_registry import MODEL_SPECS, model_spec
from .model_specs import ModelSpec, build_config, cache_bytes, cut_layers, kv_cache_bytes, spec_from_config
from .tokenizer import offline_tokenizer
from .validate import positive_int

__all__ = ["MODEL_SPECS", "ModelSpec", "architecture_spec", "build_config", "cache_bytes", "config_spec", "cut_layers",
           "fill_random_", "for_inference", "gpt2_style_config", "kv_cache_bytes", "load_model", "model_spec",
           "random_model", "random_prompt", "spec_from_config", "weights_are_pretrained"]


def config_spec(config: PretrainedConfig) -> ModelSpec:
    """The architecture a config states, its parameters not counted (n_params 0): `spec_from_config` counts."""
    return spec_from_config(config, count_params=False)


def architecture_spec(source: ModelSpec | PretrainedConfig, **changes: object) -> ModelSpec:
    """The ModelSpec of a spec with `changes` (e.g. `n_layers=4`) or of a config (`changes`: name, hub_id), its
    parameters counted on the meta device (tied weights once): the one way to describe an unlisted architecture.

    Fewer layers keep the layer pattern's start (a hybrid's first sliding and full layers) and at least one
    MoE layer."""
    if not isinstance(source, ModelSpec):
        if set(changes) - {"name", "hub_id"}:
            raise ValueError(f"changes to a config may be name and hub_id only, got {sorted(changes)}: "
                             "change the config itself")
        return spec_from_config(source, **changes)
    if "n_layers" in changes:
        source = cut_layers(source, changes.pop("n_layers"))
    spec = replace(source, **changes)
    return replace(spec, n_params=spec_from_config(build_config(spec)).n_params)


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
