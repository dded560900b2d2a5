"""The lab's formulas, each closed form once: FLOPs, bytes, intensity, roofline time, attention, KV cache.

Every chapter computes its predictions from these; no notebook or module writes one of them again.
Units: FLOPs, bytes, FLOP/s, bytes/s, seconds, tokens.
"""

from __future__ import annotations

import math

from ..plumbing.model_specs import expected_experts_hit
from ..plumbing.models import ModelSpec, cache_bytes, kv_cache_bytes  # noqa: F401 (shown here, lives beside ModelSpec)
from ..plumbing.validate import in_range, non_negative, positive, positive_int

# ------------------------------------------------------------------ roofline (chapters 0 and 1)


def matmul_flops(m: int, k: int, n: int) -> int:
    """FLOPs of an (m x k) @ (k x n) product: one multiply and one add per term, 2 m k n."""
    return 2 * positive_int("m", m) * positive_int("k", k) * positive_int("n", n)


def matmul_bytes(m: int, k: int, n: int, bytes_per_elem: int = 2) -> int:
    """Bytes an (m x k) @ (k x n) product must move at least: read both inputs, write the output."""
    positive_int("bytes_per_elem", bytes_per_elem)
    return bytes_per_elem * (m * k + k * n + m * n)


def matmul_intensity(n_tokens: float, d_in: int, d_out: int, bytes_per_elem: int) -> float:
    """2 B D F / (b (B D + D F + B F)) = (2 / b) / (1/B + 1/D + 1/F): about 2 B / b when B << D, F."""
    return (2 / bytes_per_elem) / (1 / n_tokens + 1 / d_in + 1 / d_out)


def critical_tokens(d_in: int, d_out: int, ridge: float, bytes_per_elem: int) -> float:
    """Token count B at which a (B x d_in)(d_in x d_out) product reaches intensity `ridge` (inf if never)."""
    positive("ridge", ridge)
    slack = 2 / (bytes_per_elem * ridge) - 1 / d_in - 1 / d_out  # solve matmul_intensity(B) = ridge for B
    return math.inf if slack <= 0 else 1 / slack


def vector_add_bytes(n: int, bytes_per_elem: int) -> int:
    """c = a + b over n elements moves 3 n elements (read a and b, write c); it does n FLOPs."""
    return 3 * positive_int("n", n) * positive_int("bytes_per_elem", bytes_per_elem)


def arithmetic_intensity(flops: float, nbytes: float) -> float:
    """FLOPs per byte moved."""
    return flops / positive("nbytes", nbytes)


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """Arithmetic intensity (FLOP/byte) at which compute time equals memory time: peak / bandwidth."""
    return positive("peak_flops", peak_flops) / positive("bandwidth", bandwidth)


def roofline_time(flops: float, nbytes: float, peak_flops: float, bandwidth: float) -> float:
    """Lower bound on time: the slower of doing the math at peak and moving the bytes at full bandwidth."""
    return max(flops / positive("peak_flops", peak_flops), nbytes / positive("bandwidth", bandwidth))


# ------------------------------------------------------------------ a model's forward pass (chapter 2)


def matmul_params(spec: ModelSpec) -> int:
    """Parameters used in matrix products per token: all but the embedding lookups (the LM head counts)."""
    lookups = 0 if spec.tied_embeddings else spec.vocab_size * spec.d_model
    if spec.family == "gpt2":  # learned position embeddings are a lookup too
        lookups += spec.max_positions * spec.d_model
    return spec.n_params - lookups


def routed_expert_params(spec: ModelSpec) -> int:
    """Parameters of every routed expert of every MoE layer (0 for a dense model)."""
    return spec.n_moe_layers * spec.n_experts * spec.expert_params


def active_matmul_params(spec: ModelSpec) -> int:
    """Matrix parameters one token multiplies by: all but lookups, and only its `experts_per_token` experts."""
    return matmul_params(spec) - spec.n_moe_layers * (spec.n_experts - spec.experts_per_token) * spec.expert_params


def weight_bytes_read(spec: ModelSpec, bytes_per_elem: int = 2, n_tokens: int | None = None) -> int:
    """Weight bytes one forward pass streams: every matrix once; lookups touch one row per token, left out.

    A mixture of experts reads only the experts its `n_tokens` tokens route to: `expected_experts_hit` of them
    per MoE layer under uniform routing (None: all of them, an upper bound). The lab's one rule for the
    weights term of a step (chapters 2, 4, 5 and the exercises)."""
    params = matmul_params(spec)
    if spec.n_experts and n_tokens is not None:
        hit = expected_experts_hit(spec.n_experts, spec.experts_per_token, n_tokens)
        params -= round(spec.n_moe_layers * (spec.n_experts - hit) * spec.expert_params)
    return params * positive_int("bytes_per_elem", bytes_per_elem)


def forward_flops(spec: ModelSpec, n_tokens: int, n_context: int | None = None,
                  logits_positions: int | None = None, causal: bool = True) -> int:
    """FLOPs of a forward pass over `n_tokens` new tokens attending to `n_context` tokens (default n_tokens).

    `logits_positions`: how many positions the LM head runs on; default every new token (a training-style
    forward). `prefill()` keeps only the last position's logits (`logits_to_keep=1`): pass 1. `causal`: the
    attention pairs a causal decoder needs (the floor), or False for every pair (`attention_flops`)."""
    n_context = n_tokens if n_context is None else n_context
    logits_positions = n_tokens if logits_positions is None else positive_int("logits_positions", logits_positions)
    if logits_positions > n_tokens:
        raise ValueError(f"logits_positions must be in [1, n_tokens={n_tokens}], got {logits_positions}")
    head = spec.vocab_size * spec.d_model
    return (2 * (active_matmul_params(spec) - head) * n_tokens + 2 * head * logits_positions
            + attention_flops(spec, n_tokens, n_context, causal))


# ------------------------------------------------------------------ attention (chapter 3)


def attended_pairs(n_queries: int, n_context: int, causal: bool = False, window: int | None = None) -> int:
    """(query, key) pairs scored when the last `n_queries` of `n_context` tokens attend: all of them, or with a
    causal mask only keys at or before each query; `window` caps the keys one query sees (a sliding layer)."""
    positive_int("n_queries", n_queries)
    positive_int("n_context", n_context)
    window = n_context if window is None else min(positive_int("window", window), n_context)
    if not causal:
        return n_queries * window
    if n_queries > n_context:
        raise ValueError(f"n_queries ({n_queries}) cannot exceed n_context ({n_context}) under a causal mask")
    first = n_context - n_queries + 1  # keys the first new query sees: the old context and itself
    if first >= window:  # every query sees a full window
        return n_queries * window
    growing = window - first  # queries that see first, first + 1, ... window - 1 keys; the rest see a full window
    return growing * (first + window - 1) // 2 + (n_queries - growing) * window


def score_flops(n_queries: int, n_context: int, n_heads: int, head_dim: int, causal: bool = False,
                window: int | None = None, v_head_dim: int | None = None) -> int:
    """FLOPs of Q K^T and A V for one layer: 2 FLOPs x heads x (head_dim + v_head_dim) per scored pair, where
    `v_head_dim` (a value head's width) is head_dim unless given (latent attention: 128 against 192)."""
    positive_int("n_heads", n_heads)
    positive_int("head_dim", head_dim)
    v_head_dim = head_dim if v_head_dim is None else positive_int("v_head_dim", v_head_dim)
    return 2 * n_heads * (head_dim + v_head_dim) * attended_pairs(n_queries, n_context, causal, window)


def attention_flops(spec: ModelSpec, n_queries: int, n_context: int, causal: bool = True) -> int:
    """Score and mix FLOPs of a whole model, 2 x heads x (head_dim + v_head_dim) per (query, key) pair (4 x heads
    x head_dim where values are as wide as keys), layer by layer, a sliding layer's queries seeing at most its
    window.

    causal=True (the default) counts the pairs a causal decoder needs: the floor. A kernel that skips masked
    blocks (FlashAttention's causal path) runs about that; one that computes every score and then masks
    (eager attention, a math path) runs up to twice it at prefill: causal=False counts that. A decode step
    (one query) is the same either way."""
    return sum(score_flops(n_queries, n_context, spec.n_heads, spec.head_dim, causal,
                           spec.sliding_window if kind == "sliding" else None, spec.v_head_dim or None)
               for kind in spec.layer_kinds())


def score_matrix_bytes(n_queries: int, n_context: int, n_heads: int, bytes_per_elem: int, batch_size: int = 1) -> int:
    """Bytes of one materialised score matrix (batch x heads x queries x context)."""
    for name, value in dict(n_queries=n_queries, n_context=n_context, n_heads=n_heads,
                            bytes_per_elem=bytes_per_elem, batch_size=batch_size).items():
        positive_int(name, value)
    return batch_size * n_heads * n_queries * n_context * bytes_per_elem


def attention_bytes(n_queries: int, n_context: int, n_heads: int, head_dim: int, bytes_per_elem: int,
                    materialised: bool) -> int:
    """Bytes moved at least: read Q, K, V and write O; a naive kernel also writes and reads S and P."""
    qkvo = (2 * n_queries + 2 * n_context) * n_heads * head_dim * bytes_per_elem
    if not materialised:
        return qkvo
    return qkvo + 4 * score_matrix_bytes(n_queries, n_context, n_heads, bytes_per_elem)


def block_flops(n_tokens: int, d_model: int, d_ff: int | None = None, causal: bool = False) -> dict[str, int]:
    """Prefill FLOPs of one GPT-2-style block over n_tokens: 'linear' (QKV, out, MLP) and 'attention' (scores)."""
    positive_int("n_tokens", n_tokens)
    positive_int("d_model", d_model)
    d_ff = 4 * d_model if d_ff is None else d_ff
    linear = 2 * n_tokens * (4 * d_model * d_model + 2 * d_model * d_ff)  # QKV 3d^2 + out d^2, up + down d x d_ff
    return {"linear": linear, "attention": score_flops(n_tokens, n_tokens, 1, d_model, causal)}


def crossover_tokens(d_model: int, d_ff: int | None = None, causal: bool = False) -> float:
    """N at which attention FLOPs equal linear FLOPs in a block: 2 d + d_ff (6 d for d_ff = 4 d), x2 if causal."""
    positive_int("d_model", d_model)
    d_ff = 4 * d_model if d_ff is None else d_ff
    return (2 * d_model + d_ff) * (2 if causal else 1)


# ------------------------------------------------------------------ the KV cache (chapter 4)
# kv_cache_bytes(n_layers, n_kv_heads, head_dim, seq_len, batch_size, bytes_per_elem), imported above:
# 2 (K and V) x bytes/elem x layers x KV heads x head_dim x tokens x batch.


# ------------------------------------------------------------------ a decode step's bytes (chapters 2, 4, 5)

# transformers' DynamicCache appends each new token with torch.cat, which reads the whole old cache and
# writes a new one: 2 more passes over the KV bytes per step. A StaticCache writes the new token in place.
CACHE_COPY_PASSES = {"static": 0, "dynamic": 2}


def decode_step_bytes(spec: ModelSpec, context: int, batch_size: int = 1, bytes_per_elem: int = 2,
                      cache: str = "static") -> int:
    """Bytes one decode step moves: the matrix weights once (an MoE: the experts its batch routes to), the
    cache read by attention (`cache_bytes`: sliding and latent layers hold less), and its copies.

    `cache="static"` counts what a step *must* read (weights + KV: the bytes MBU is defined on);
    `cache="dynamic"` adds DynamicCache's torch.cat copy (read + write the cache again): weights + 3 x KV."""
    if cache not in CACHE_COPY_PASSES:
        raise ValueError(f"cache must be one of {tuple(CACHE_COPY_PASSES)}, got {cache!r}")
    kv = cache_bytes(spec, context, batch_size, bytes_per_elem)
    return weight_bytes_read(spec, bytes_per_elem, batch_size) + (1 + CACHE_COPY_PASSES[cache]) * kv


# ------------------------------------------------------------------ speculative decoding (chapter 7)


def check_speculation(k: int, acceptance_rate: float) -> None:
    """ValueErrors naming `k` (draft tokens per verification, >= 1) or `acceptance_rate` ([0, 1])."""
    positive_int("k", k)
    in_range("acceptance_rate", acceptance_rate, 0.0, 1.0)


def expected_tokens_per_verification(acceptance_rate: float, k: int) -> float:
    """Tokens one verification yields with k drafts each accepted with probability a: (1 - a^(k+1)) / (1 - a).

    Leviathan et al. 2023: the accepted run of drafts plus the target's own token after it (k + 1 if a = 1)."""
    check_speculation(k, acceptance_rate)
    a = float(acceptance_rate)
    return float(k + 1) if a == 1.0 else (1 - a ** (k + 1)) / (1 - a)


def speculative_speedup(tokens_per_verification: float, verify_over_step: float,
                        draft_over_step: float = 0.0, k: int = 1) -> float:
    """Tokens per round over the round's cost in plain decode steps: one verification plus k draft steps."""
    positive("tokens_per_verification", tokens_per_verification)
    positive("verify_over_step", verify_over_step)
    non_negative("draft_over_step", draft_over_step)
    return tokens_per_verification / (verify_over_step + positive_int("k", k) * draft_over_step)
