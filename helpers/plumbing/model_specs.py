"""What a model is: its architecture as one record (`ModelSpec`), read from or turned into a transformers config.

Dense models (MHA, GQA, MQA) need layers, widths and heads. The 2026 families need three more things, each a
few fields of the spec:
- attention per layer: "full", "sliding" (a window of `sliding_window` tokens: Mistral, Gemma 3's five local
  layers per global one, GPT-OSS's alternate layers), or latent for every layer (DeepSeek's MLA caches one
  compressed vector of `kv_lora_rank` values plus a shared rotary key of `qk_rope_head_dim` values per token);
- experts: `n_experts` per MoE layer of width `expert_d_ff`, `experts_per_token` routed to per token, and
  `n_shared_experts` that every token uses (DeepSeek), after `n_dense_layers` leading dense layers;
- `cache_bytes`: what a real cache holds at a given length, layer kind by layer kind.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig

from .validate import positive_int

LAYER_KINDS = ("full", "sliding")


def kv_cache_bytes(n_layers: int, n_kv_heads: int, head_dim: int, seq_len: int, batch_size: int = 1,
                   bytes_per_elem: int = 2) -> int:
    """Bytes of a dense KV cache: 2 (K and V) x bytes/elem x layers x KV heads x head_dim x tokens x batch.

    For any architecture (sliding, latent) use `cache_bytes(spec, ...)`; `course.formulas` shows this one."""
    args = dict(n_layers=n_layers, n_kv_heads=n_kv_heads, head_dim=head_dim, seq_len=seq_len,
                batch_size=batch_size, bytes_per_elem=bytes_per_elem)
    for name, value in args.items():
        positive_int(name, value)
    return 2 * bytes_per_elem * n_layers * n_kv_heads * head_dim * seq_len * batch_size


def expected_experts_hit(n_experts: int, experts_per_token: int, n_tokens: int) -> float:
    """Experts of one MoE layer that `n_tokens` tokens use between them, in expectation, if each token picks
    `experts_per_token` of `n_experts` uniformly at random: E x (1 - (1 - k/E)^T).

    Random weights route about uniformly; trained routers do not (some experts are hot), so a real batch
    hits fewer experts than this."""
    e, k, t = (positive_int(n, v) for n, v in (("n_experts", n_experts), ("experts_per_token", experts_per_token),
                                                ("n_tokens", n_tokens)))
    if k > e:
        raise ValueError(f"experts_per_token must be <= n_experts ({e}), got {k}")
    return e * (1 - (1 - k / e) ** t)


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of one model, as in its published config.json."""

    name: str
    hub_id: str
    family: str  # the transformers model_type that builds it ("gpt2", "llama", "qwen3_moe", ...)
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int  # of a query and a key; latent attention: nope + rope dims
    vocab_size: int
    d_ff: int  # of a dense MLP (MoE models: of their dense layers, if any)
    n_params: int  # as counted by transformers, tied embeddings counted once
    max_positions: int
    tied_embeddings: bool
    layer_types: tuple[str, ...] = ()  # "full" or "sliding" per layer; () means every layer is full
    sliding_window: int = 0  # tokens a sliding layer attends to
    kv_lora_rank: int = 0  # latent attention: the compressed K/V width cached per token and layer
    qk_rope_head_dim: int = 0  # latent attention: the shared rotary key cached beside it
    q_lora_rank: int = 0  # latent attention: the compressed query width (0: a plain q_proj)
    v_head_dim: int = 0  # latent attention: a value head's width
    n_experts: int = 0  # routed experts per MoE layer (0: a dense model)
    experts_per_token: int = 0
    n_shared_experts: int = 0  # experts every token uses (DeepSeek)
    expert_d_ff: int = 0
    n_dense_layers: int = 0  # leading layers with a dense MLP (DeepSeek's first_k_dense_replace)
    config_extra: tuple[tuple[str, object], ...] = ()  # other config.json fields, passed on by build_config

    def __post_init__(self):
        if self.layer_types and len(self.layer_types) != self.n_layers:
            raise ValueError(f"layer_types must name one kind per layer ({self.n_layers}), got {len(self.layer_types)}")
        if set(self.layer_types) - set(LAYER_KINDS):
            raise ValueError(f"layer_types must hold only {LAYER_KINDS}, got {sorted(set(self.layer_types))}")
        if "sliding" in self.layer_types and not (isinstance(self.sliding_window, int) and self.sliding_window >= 1):
            raise ValueError(f"sliding_window must be an integer >= 1 for sliding layers, got {self.sliding_window!r}")
        if self.kv_lora_rank and self.qk_rope_head_dim < 1:
            raise ValueError(f"qk_rope_head_dim must be >= 1 with latent attention, got {self.qk_rope_head_dim!r}")
        if self.n_experts:
            positive_int("experts_per_token", self.experts_per_token)
            positive_int("expert_d_ff", self.expert_d_ff)
            if self.experts_per_token > self.n_experts:
                raise ValueError(f"experts_per_token must be <= n_experts ({self.n_experts}), "
                                 f"got {self.experts_per_token}")
            if not 0 <= self.n_dense_layers < self.n_layers:
                raise ValueError(f"n_dense_layers must be in [0, {self.n_layers - 1}], got {self.n_dense_layers}")

    @property
    def attention(self) -> str:
        """'latent' (MLA), 'hybrid' (sliding and full layers), 'sliding', or the dense kinds 'MHA', 'GQA', 'MQA'."""
        if self.kv_lora_rank:
            return "latent"
        if "sliding" in self.layer_types:
            return "hybrid" if "full" in self.layer_types else "sliding"
        return "MHA" if self.n_kv_heads == self.n_heads else "MQA" if self.n_kv_heads == 1 else "GQA"

    def layer_kinds(self) -> tuple[str, ...]:
        """Each layer's attention: 'full', 'sliding' or 'latent'."""
        if self.kv_lora_rank:
            return ("latent",) * self.n_layers
        return self.layer_types or ("full",) * self.n_layers

    def cached_tokens(self, kind: str, seq_len: int) -> int:
        """Tokens a layer of `kind` caches for one sequence of `seq_len` tokens. A sliding layer attends to
        `sliding_window` tokens: the new one and the window - 1 before it, so transformers keeps window - 1."""
        seq_len = positive_int("seq_len", seq_len)
        return min(seq_len, self.sliding_window - 1) if kind == "sliding" else seq_len

    def layer_bytes_per_token(self, kind: str, bytes_per_elem: int = 2) -> int:
        """Cache bytes one token takes in one layer of `kind`: K and V per KV head, or the latent vector."""
        if kind == "latent":
            return (self.kv_lora_rank + self.qk_rope_head_dim) * bytes_per_elem
        return 2 * self.n_kv_heads * self.head_dim * bytes_per_elem

    def kv_bytes_per_token(self, bytes_per_elem: int = 2) -> int:
        """Cache bytes one token adds while every layer still keeps it (before any window fills)."""
        return sum(self.layer_bytes_per_token(kind, bytes_per_elem) for kind in self.layer_kinds())

    def weight_bytes(self, bytes_per_elem: int = 2) -> int:
        """Bytes of all weights stored at `bytes_per_elem` (2 for bf16/fp16, 4 for fp32), lookups included."""
        return self.n_params * bytes_per_elem

    @property
    def n_moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return self.n_layers - self.n_dense_layers if self.n_experts else 0

    @property
    def expert_params(self) -> int:
        """Parameters of one expert: gate, up and down projections (GPT-OSS adds their biases)."""
        biases = 2 * self.expert_d_ff + self.d_model if self.family == "gpt_oss" else 0
        return 3 * self.d_model * self.expert_d_ff + biases

    @property
    def active_params(self) -> int:
        """Parameters one token uses: all but the routed experts it does not pick (embedding rows included)."""
        return self.n_params - self.n_moe_layers * (self.n_experts - self.experts_per_token) * self.expert_params


def cut_layers(spec: ModelSpec, n_layers: int) -> ModelSpec:
    """The architecture with `n_layers` layers: the layer pattern from its start (repeated if there are more
    layers than kinds) and at least one MoE layer kept; n_params as before (`architecture_spec` counts them)."""
    n, kinds = positive_int("n_layers", n_layers), spec.layer_types
    return replace(spec, n_layers=n, layer_types=tuple(kinds[i % len(kinds)] for i in range(n)) if kinds else (),
                   n_dense_layers=min(spec.n_dense_layers, n - 1))


def cache_bytes(spec: ModelSpec, seq_len: int, batch_size: int = 1, bytes_per_elem: int = 2) -> int:
    """Bytes a real cache holds after `seq_len` tokens of `batch_size` sequences, layer by layer: full layers
    2 x kv_heads x head_dim x L, sliding layers the same over min(L, window - 1), latent layers
    (kv_lora_rank + qk_rope_head_dim) x L."""
    positive_int("batch_size", batch_size)
    positive_int("bytes_per_elem", bytes_per_elem)
    per_sequence = sum(spec.layer_bytes_per_token(kind, bytes_per_elem) * spec.cached_tokens(kind, seq_len)
                       for kind in spec.layer_kinds())
    return per_sequence * batch_size


# Which config.json field holds each spec field, per family (the dense fields are shared by all but gpt2).
DENSE_FIELDS = dict(n_layers="num_hidden_layers", d_model="hidden_size", n_heads="num_attention_heads",
                    n_kv_heads="num_key_value_heads", head_dim="head_dim", vocab_size="vocab_size",
                    d_ff="intermediate_size", max_positions="max_position_embeddings",
                    tied_embeddings="tie_word_embeddings")
GPT2_FIELDS = dict(n_layers="n_layer", d_model="n_embd", n_heads="n_head", vocab_size="vocab_size", d_ff="n_inner",
                   max_positions="n_positions", tied_embeddings="tie_word_embeddings")
MOE_FIELDS = {
    "qwen3_moe": dict(n_experts="num_experts", experts_per_token="num_experts_per_tok",
                      expert_d_ff="moe_intermediate_size"),
    "mixtral": dict(n_experts="num_local_experts", experts_per_token="num_experts_per_tok",
                    expert_d_ff="intermediate_size"),
    "gpt_oss": dict(n_experts="num_local_experts", experts_per_token="num_experts_per_tok",
                    expert_d_ff="intermediate_size"),
    "deepseek_v3": dict(n_experts="n_routed_experts", experts_per_token="num_experts_per_tok",
                        n_shared_experts="n_shared_experts", expert_d_ff="moe_intermediate_size",
                        n_dense_layers="first_k_dense_replace"),
}
LATENT_FIELDS = dict(kv_lora_rank="kv_lora_rank", qk_rope_head_dim="qk_rope_head_dim", q_lora_rank="q_lora_rank",
                     v_head_dim="v_head_dim")
FAMILIES = ("gpt2", "llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral", "gpt_oss", "deepseek_v3",
            "gemma3_text")
LAYER_TYPE_NAMES = {"full_attention": "full", "sliding_attention": "sliding"}


def spec_from_config(config: PretrainedConfig, name: str | None = None, hub_id: str = "",
                     count_params: bool = True) -> ModelSpec:
    """The ModelSpec a transformers config describes (dense, sliding/hybrid, latent or MoE), its parameters
    counted on the meta device (tied weights once) unless `count_params=False` (then n_params is 0)."""
    kind = config.model_type
    if kind not in FAMILIES:
        raise ValueError(f"config.model_type must be one of {FAMILIES}, got {kind!r}")
    def get(key: str):
        return getattr(config, key, None)

    table = GPT2_FIELDS if kind == "gpt2" else DENSE_FIELDS
    values = {field: get(key) for field, key in table.items()}
    if kind == "gpt2":
        values.update(n_kv_heads=values["n_heads"], head_dim=values["d_model"] // values["n_heads"],
                      d_ff=values["d_ff"] or 4 * values["d_model"])
    values["head_dim"] = values.get("head_dim") or values["d_model"] // values["n_heads"]
    values["n_kv_heads"] = values["n_kv_heads"] or values["n_heads"]
    values.update({field: get(key) or 0 for field, key in MOE_FIELDS.get(kind, {}).items()})
    if kind == "deepseek_v3":
        values.update({field: get(key) or 0 for field, key in LATENT_FIELDS.items()})
        values.update(head_dim=get("qk_nope_head_dim") + get("qk_rope_head_dim"))
    layer_types = tuple(LAYER_TYPE_NAMES.get(t, t) for t in get("layer_types") or ())  # unknown kinds: refused
    if kind in ("mistral", "mixtral") and get("sliding_window") is not None:
        layer_types = ("sliding",) * values["n_layers"]  # a window applies to every layer
    if kind.startswith("qwen") and not get("use_sliding_window"):
        layer_types = ()  # Qwen configs carry a window that only use_sliding_window turns on
    if "sliding" in layer_types:
        values.update(layer_types=layer_types, sliding_window=get("sliding_window"))
    spec = ModelSpec(name=name or config.name_or_path or f"{kind}-style", hub_id=hub_id, family=kind, n_params=0,
                     config_extra=extra_fields(config), **values)
    if not count_params:
        return spec
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return replace(spec, n_params=sum(p.numel() for p in model.parameters()))


# Fields outside the spec that change a model's shapes, kept so that build_config rebuilds the same model.
EXTRA_FIELDS = {"deepseek_v3": ("n_group", "topk_group"), "qwen3_moe": ("norm_topk_prob",)}


def extra_fields(config: PretrainedConfig) -> tuple[tuple[str, object], ...]:
    """The config's values of the fields EXTRA_FIELDS names for its family."""
    return tuple((key, getattr(config, key)) for key in EXTRA_FIELDS.get(config.model_type, ()))


def build_config(spec: ModelSpec) -> PretrainedConfig:
    """A transformers config with the spec's architecture, made without the network."""
    table = GPT2_FIELDS if spec.family == "gpt2" else DENSE_FIELDS
    kwargs = {key: getattr(spec, field) for field, key in table.items()}
    kwargs.update({key: getattr(spec, field) for field, key in MOE_FIELDS.get(spec.family, {}).items()})
    if spec.family == "qwen3_moe":
        kwargs.update(decoder_sparse_step=1, mlp_only_layers=[])
    if spec.kv_lora_rank:
        kwargs.update({key: getattr(spec, field) or None for field, key in LATENT_FIELDS.items()})
        kwargs.update(qk_nope_head_dim=spec.head_dim - spec.qk_rope_head_dim, num_key_value_heads=spec.n_heads)
        kwargs.pop("head_dim")
    if spec.family in ("mistral", "mixtral", "gpt_oss", "gemma3_text", "qwen3_moe", "qwen2", "qwen3"):
        kwargs["sliding_window"] = spec.sliding_window or None
    if spec.family in ("gpt_oss", "gemma3_text") or spec.family.startswith("qwen"):
        kwargs["layer_types"] = [f"{kind}_attention" for kind in spec.layer_types or ("full",) * spec.n_layers]
        if spec.family.startswith("qwen"):
            kwargs["use_sliding_window"] = "sliding" in spec.layer_types
    if spec.family == "gpt2":
        kwargs.pop("tie_word_embeddings")
    kwargs.update(dict(spec.config_extra))
    return AutoConfig.for_model(spec.family, **kwargs)

