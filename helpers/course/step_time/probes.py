"""The calibration's probes: each times one thing a forward pass runs into, on this device, in one dtype.

- matmul rate against token count, weights rotating through more memory than the last-level cache holds
  (at 1 token this is the read bandwidth weight-streaming matrix-vector products reach);
- elementwise bandwidth of ops that allocate their output (norms, activations, residual adds);
- the KV cache's step: DynamicCache's torch.cat (read + write the cache) then attention reading it;
- causal attention's FLOP/s at prefill;
- the rate a 1-token product streams a matrix at, against the matrix's size;
- the cost of one operator call, from toy-width forwards of each architecture family;
- what a grouped experts product costs per expert it walks past and per expert it multiplies (CPU);
- from what size a new tensor lands in freshly mapped pages every time, and what mapping them costs (CPU).
"""

from __future__ import annotations

import ctypes
import itertools
import math
import mmap
import os
import platform

import numpy as np
import torch
import torch.nn.functional as F

from ...plumbing.device import bytes_per_element, synchronize
from ...plumbing.fits import fit_line
from ...plumbing.memory import minor_page_faults
from ...plumbing.models import MODEL_SPECS
from ...plumbing.timing import benchmark
from ...plumbing.working_set import copies_past_cache, working_set
from ..formulas import score_flops
from ..phases import decode_step, prefill
from ..roofline import count_ops
from .operators import narrow_model, tiny_spec

MATMUL_TOKENS = (1, 2, 4, 8, 16, 64, 256, 1024, 2048)  # rows of the matmul-rate table: few rows closely
# (d_in, d_out) of the timed weights, a ~0.5B model's layer: GPT-2-style Conv1D (x @ W), nn.Linear (x @ W.T)
# with a wider attention (Llama, Qwen), and an LM head (x @ E.T over a 32k slice of the vocabulary)
LAYER_SHAPES = {"x@W": [(1024, 3072), (1024, 1024), (1024, 4096), (4096, 1024)],
                "linear": [(1024, 2048), (1024, 1024), (2048, 1024), (1024, 3072), (3072, 1024)],
                "lm_head": [(1024, 32768)]}
SMALL_LAYER = [(512, 1536), (512, 512), (1536, 512)]  # a 512-wide layer: small products run slower per FLOP
TABLE_ROWS = {"lm_head": 5}  # rows of MATMUL_TOKENS timed for these (default: all): an LM head runs at batch rows

def quick_median(fn, device: torch.device, min_run_time: float = 0.05) -> float:
    """Median seconds of fn(): a short benchmark, so the whole calibration stays within seconds."""
    return benchmark(fn, device=device, warmup=1, min_run_time=min_run_time, min_runs=3).median


def rotating_layer(shapes: list[tuple[int, int]], n_tokens: int, layout: str, total_bytes: int,
                   dtype: torch.dtype, device: torch.device):
    """x @ W over a layer's weight shapes (d_in, d_out), copies rotating through `total_bytes`; and its FLOPs.

    layout 'x@W': weights stored (d_in, d_out), GPT-2's Conv1D (addmm); 'linear': stored (d_out, d_in),
    nn.Linear's x @ W.T. Matrix-vector speed differs between the two by up to 1.5x on a CPU."""
    layer_bytes = sum(a * b for a, b in shapes) * bytes_per_element(dtype)
    copies = max(2, math.ceil(total_bytes / layer_bytes))
    inputs = {d_in: torch.randn(n_tokens, d_in, dtype=dtype, device=device) for d_in, _ in shapes}
    pairs = [(inputs[d_in], torch.empty((d_in, d_out) if layout == "x@W" else (d_out, d_in), dtype=dtype,
                                        device=device).fill_(0.01))  # values never change the time
             for _ in range(copies) for d_in, d_out in shapes]
    cycle = itertools.cycle(pairs)

    def step():
        x, w = next(cycle)
        return x @ w if layout == "x@W" else F.linear(x, w)

    return step, 2 * n_tokens * sum(a * b for a, b in shapes) / len(shapes)


def measure_matmul_table(device: torch.device, dtype: torch.dtype, measured: dict) -> dict[str, tuple[float, ...]]:
    """Effective FLOP/s at each MATMUL_TOKENS row per weight layout, weights rotating through 4x the cache."""
    total = working_set(4, device).nbytes
    tables = {}
    for layout, shapes in LAYER_SHAPES.items():
        rates = []
        for m in MATMUL_TOKENS[:TABLE_ROWS.get(layout, len(MATMUL_TOKENS))]:
            step, flops = rotating_layer(shapes, m, "x@W" if layout == "x@W" else "linear", total, dtype, device)
            seconds = quick_median(step, device, 0.1)
            measured[f"matmul {layout}, {m} tokens, shapes {shapes}"] = seconds
            rates.append(flops / seconds)
        # more rows per weight read never make a matmul slower per FLOP: a dip is a disturbed probe, not the device
        tables[layout] = tuple(float(r) for r in np.maximum.accumulate(rates))
    rates = []
    for m in MATMUL_TOKENS:
        step, flops = rotating_layer(SMALL_LAYER, m, "linear", total, dtype, device)
        seconds = quick_median(step, device, 0.1)
        measured[f"matmul small linear, {m} tokens, shapes {SMALL_LAYER}"] = seconds
        rates.append(flops / seconds)
    tables["small"] = tuple(float(r) for r in np.maximum.accumulate(rates))
    return tables


STREAM_SIDES = (512, 1024, 2048, 4096)  # square weights of 1 to 64 MiB in fp32


def measure_stream_curve(device: torch.device, dtype: torch.dtype, measured: dict) -> tuple[tuple, tuple]:
    """Matrix sizes (bytes) and the bytes/s a 1-token product (nn.Linear) streams each at, copies rotating past
    the cache: a CPU streams a small matrix slower than a large one (16 against 25 GB/s from 1 to 64 MiB on
    one machine here), so a model's own matrix sizes set its decode speed."""
    sizes, rates = [], []
    for side in STREAM_SIDES:
        nbytes = side * side * bytes_per_element(dtype)
        step, _ = rotating_layer([(side, side)], 1, "linear", working_set(4, device, at_least=2 * nbytes).nbytes,
                                 dtype, device)
        seconds = quick_median(step, device, 0.1)
        measured[f"matrix-vector product, {side} x {side}"] = seconds
        sizes.append(float(nbytes))
        rates.append(nbytes / seconds)
    return tuple(sizes), tuple(rates)


def measure_elementwise_bandwidth(device: torch.device, dtype: torch.dtype, measured: dict) -> float:
    """Bytes/s of a @ b elementwise into a fresh tensor (2 reads, 1 write) at an activation's size (8 MiB)."""
    n = 8 * 2**20 // bytes_per_element(dtype)
    a, b = torch.randn(n, dtype=dtype, device=device), torch.randn(n, dtype=dtype, device=device)
    seconds = quick_median(lambda: a * b, device)
    measured["elementwise multiply (8 MiB)"] = seconds
    return 3 * a.nbytes / seconds


def cache_probe(context: int, dtype: torch.dtype, device: torch.device):
    """One decode layer's cache work at `context` (16 heads of 64), over layers rotating past the cache: cat the
    new K and V onto the cache, then attend. Returns the bytes of one layer's K and V, and the step to time."""
    heads, head_dim = 16, 64
    layer_bytes = 2 * heads * head_dim * context * bytes_per_element(dtype)
    caches = [tuple(torch.randn(1, heads, context, head_dim, dtype=dtype, device=device) for _ in "kv")
              for _ in range(copies_past_cache(layer_bytes, 2, device))]
    new = torch.randn(1, heads, 1, head_dim, dtype=dtype, device=device)
    layers = itertools.cycle(range(len(caches)))

    def step():
        layer = next(layers)
        k, v = (torch.cat([t, new], dim=-2) for t in caches[layer])  # DynamicCache.update
        # the new tensors replace the old ones, as in DynamicCache: the next cat reads memory written by
        # this one, not a copy that stays put (a view cut back to `context` keeps the size constant)
        caches[layer] = (k[..., :context, :], v[..., :context, :])
        return F.scaled_dot_product_attention(new, k, v)

    return layer_bytes, step


def per_unit_rate(amounts: list[float], seconds: list[float]) -> float:
    """Units (bytes, FLOPs) per second from timings at two or more sizes: 1 / the least-squares slope, so the
    fixed part of each call stays apart. Where noise leaves no positive slope, the largest size's own rate."""
    slope, _ = fit_line(amounts, seconds)
    return 1 / slope if slope > 0 else amounts[-1] / seconds[-1]


def measure_cache_bandwidth(device: torch.device, dtype: torch.dtype, measured: dict) -> float:
    """Bytes/s of decode's per-layer cache step (cat K and V, then attention) over layers rotating past the cache."""
    nbytes, seconds = [], []
    for context in (256, 1024):
        layer_bytes, step = cache_probe(context, dtype, device)
        seconds.append(quick_median(step, device))
        nbytes.append(3 * layer_bytes)  # the cat reads the old cache and writes a new one; attention reads it
        measured[f"decode cache step, context {context}"] = seconds[-1]
    return per_unit_rate(nbytes, seconds)


def measure_attention_flops(device: torch.device, dtype: torch.dtype, measured: dict) -> float:
    """FLOP/s of causal scaled-dot-product attention at prefill (16 heads of 64), from two prompt lengths."""
    heads, head_dim, flops, seconds = 16, 64, [], []
    for n in (256, 1024):
        q = torch.randn(1, heads, n, head_dim, dtype=dtype, device=device)
        seconds.append(quick_median(lambda q=q: F.scaled_dot_product_attention(q, q, q, is_causal=True), device))
        flops.append(score_flops(n, n, heads, head_dim, causal=True))
        measured[f"causal attention, {n} tokens"] = seconds[-1]
    return per_unit_rate(flops, seconds)


def toy_forward_cost(spec, device: torch.device, dtype: torch.dtype) -> tuple[int, float]:
    """Operator calls and seconds of a toy-width prefill (8 tokens) plus one decode step of `spec`'s family."""
    model = narrow_model(tiny_spec(spec), device, dtype)
    ids = torch.zeros(1, 8, dtype=torch.long, device=device)
    with torch.no_grad():
        token, kv = prefill(model, ids)
        n_ops = count_ops(lambda: prefill(model, ids)) + count_ops(lambda: decode_step(model, token, kv))
        seconds = (quick_median(lambda: prefill(model, ids), device, 0.2)
                   + quick_median(lambda: decode_step(model, token, kv), device, 0.2))  # the cache grows: toy-sized
    return n_ops, seconds


def measure_op_overhead(device: torch.device, dtype: torch.dtype, measured: dict) -> dict[str, float]:
    """Seconds per operator call: a toy-width forward (prefill and decode) of each family, over its op count."""
    per_family = {}
    for spec in {s.family: s for s in MODEL_SPECS.values()}.values():
        n_ops, seconds = toy_forward_cost(spec, device, dtype)
        measured[f"toy {spec.family} prefill + decode ({n_ops} ops)"] = seconds
        per_family[spec.family] = seconds / n_ops
    return per_family


def grouped_mm_call(n_experts: int, n_hit: int, device: torch.device, dtype: torch.dtype):
    """transformers' grouped experts product: 8 tokens sorted over `n_hit` of `n_experts` small experts."""
    weights = torch.randn(n_experts, 64, 64, dtype=dtype, device=device)
    tokens = torch.randn(8, 64, dtype=dtype, device=device)
    per_expert = torch.zeros(n_experts, dtype=torch.int32)
    per_expert[torch.linspace(0, n_experts - 1, n_hit).long()] = 8 // n_hit
    offsets = torch.cumsum(per_expert, 0, dtype=torch.int32).to(device)
    return lambda: F.grouped_mm(tokens, weights, offs=offsets)


def measure_expert_costs(device: torch.device, dtype: torch.dtype, measured: dict) -> tuple[float, float]:
    """Seconds per expert the grouped kernel walks past, and per expert it multiplies (beyond its arithmetic).

    On a CPU, torch's grouped_mm takes a slice of every expert's weights, hit or not, then one product per
    expert hit: both cost per expert, and grow with the expert count. On CUDA it is one kernel: (0, 0)."""
    if device.type != "cpu" or not hasattr(F, "grouped_mm"):
        return 0.0, 0.0
    seconds = {}
    for n_experts, n_hit in ((16, 1), (128, 1), (16, 8)):
        seconds[n_experts, n_hit] = quick_median(grouped_mm_call(n_experts, n_hit, device, dtype), device)
        measured[f"grouped_mm, {n_hit} of {n_experts} experts"] = seconds[n_experts, n_hit]
    walk = max(0.0, (seconds[128, 1] - seconds[16, 1]) / 112)
    return walk, max(0.0, (seconds[16, 8] - seconds[16, 1]) / 7)


FRESH_PROBE_MIB = 48  # one layer's keys past glibc's largest mmap threshold
FRESH_LAYERS = 4  # layers the probe rotates through: a free block in the heap may serve one, not all
PAGE_BYTES = mmap.PAGESIZE


def mmap_threshold() -> int:
    """Bytes from which glibc's malloc maps every block afresh from the OS and unmaps it when freed (0: not glibc,
    or a malloc setting that changes its policy).

    Its threshold starts at 128 KiB and rises to the size of each mapped block freed, up to
    DEFAULT_MMAP_THRESHOLD_MAX: 4 MiB x sizeof(long), 32 MiB on a 64-bit machine. Past that a block is always
    mapped afresh. Below it, a block the same size as one just freed comes from the heap; one a little larger
    each time (a cache that grows by a token every step) can still be mapped afresh, which this leaves out."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return 0
    if any(name.startswith("MALLOC_") for name in os.environ) or "malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return 0  # a fixed threshold, trim or top pad: another policy, not modelled
    return 4 * 2**20 * ctypes.sizeof(ctypes.c_long)


def rotating_cache_copies(nbytes: int, dtype: torch.dtype, device: torch.device, keep: bool):
    """DynamicCache's step over layers' keys of `nbytes` each: each cat's new tensor replaces the layer's old one
    (cut back to the same size), FRESH_LAYERS layers; or, with `keep`, is written into a tensor kept for it, over
    two layers (the copy alone, its pages mapped once)."""
    tokens = max(1, nbytes // (16 * 64 * bytes_per_element(dtype)))  # 16 heads of 64
    n_layers = 2 if keep else FRESH_LAYERS
    caches = [torch.ones(1, 16, tokens + 1, 64, dtype=dtype, device=device) for _ in range(n_layers)]
    kept = [torch.ones_like(cache) for cache in caches] if keep else []
    new = torch.ones(1, 16, 1, 64, dtype=dtype, device=device)
    layers = itertools.cycle(range(n_layers))

    def step():
        layer = next(layers)
        old = caches[layer][..., :tokens, :]
        if keep:
            return torch.cat([old, new], dim=-2, out=kept[layer])
        caches[layer] = torch.cat([old, new], dim=-2)

    return step


def measure_fresh_pages(device: torch.device, dtype: torch.dtype, measured: dict) -> tuple[int, float]:
    """(bytes from which DynamicCache's torch.cat lands in freshly mapped pages each call, bytes/s of mapping them).

    The threshold is glibc's (`mmap_threshold`); the cost, FRESH_PROBE_MIB copies rotating over layers as
    DynamicCache replaces them, against the same copies into tensors kept. (0, 0.0) on a GPU (its caching
    allocator keeps its blocks), with another allocator or malloc setting, where faults cannot be counted, or
    where most copies map no fresh pages (a heap with room to spare)."""
    threshold = mmap_threshold() if device.type == "cpu" else 0
    if not threshold or minor_page_faults() is None:
        return 0, 0.0
    nbytes = max(threshold, FRESH_PROBE_MIB * 2**20)
    fresh = rotating_cache_copies(nbytes, dtype, device, keep=False)
    for _ in range(2 * FRESH_LAYERS):  # every layer replaced twice: the allocator settled
        fresh()
    before = minor_page_faults()
    for _ in range(FRESH_LAYERS):
        fresh()
    share = (minor_page_faults() - before) / FRESH_LAYERS / (nbytes / PAGE_BYTES)
    # now and then the OS maps pages 5x slower for a second or more (a VM's host at work): the quickest of four
    # short medians is the machine undisturbed, as a step's fastest runs are; both copies are timed alike
    fresh_s = min(quick_median(fresh, device, 0.1) for _ in range(4))
    del fresh  # its layers freed before the kept ones are made: at most 5 copies of nbytes held at once
    kept = rotating_cache_copies(nbytes, dtype, device, keep=True)
    kept_s = min(quick_median(kept, device, 0.1) for _ in range(4))
    measured[f"cache copies into fresh pages, {nbytes / 2**20:.0f} MiB"] = fresh_s
    measured[f"cache copies into kept tensors, {nbytes / 2**20:.0f} MiB"] = kept_s
    if share < 0.5 or fresh_s <= kept_s:  # the median copy mapped no fresh pages: no cost to measure
        return 0, 0.0
    return threshold, nbytes / (fresh_s - kept_s)


def measure_pass(device: torch.device, dtype: torch.dtype, measured: dict) -> dict:
    """Time every probe once: the rates (FLOP/s, bytes/s) and the per-operator seconds, by name."""
    with torch.no_grad():
        rates = dict(table=measure_matmul_table(device, dtype, measured),
                     stream=measure_stream_curve(device, dtype, measured),
                     elementwise=measure_elementwise_bandwidth(device, dtype, measured),
                     cache=measure_cache_bandwidth(device, dtype, measured),
                     attention=measure_attention_flops(device, dtype, measured))
    rates["overhead"] = measure_op_overhead(device, dtype, measured)
    rates["experts"] = measure_expert_costs(device, dtype, measured)
    rates["fresh"] = measure_fresh_pages(device, dtype, measured)
    synchronize(device)
    return rates


def typical_of(passes: list[dict]) -> dict:
    """Per probe, the typical result of several passes: the geometric mean of each rate and each per-operator
    time. Not the fastest: a model's step is timed by its median, so the rates it is predicted from must be
    typical too (the faster of two passes ran 2-4% ahead of them, and the predictions low by as much)."""
    def mean(values) -> float:
        return float(np.exp(np.mean(np.log(values))))

    first = passes[0]
    table = {layout: tuple(map(lambda *r: mean(r), *(p["table"][layout] for p in passes))) for layout in first["table"]}
    overhead = {family: mean([p["overhead"][family] for p in passes]) for family in first["overhead"]}
    experts = tuple(mean([max(p["experts"][i], 1e-12) for p in passes]) if first["experts"][i] else 0.0
                    for i in range(len(first["experts"])))
    stream = (first["stream"][0], tuple(map(lambda *r: mean(r), *(p["stream"][1] for p in passes))))
    thresholds = [p["fresh"][0] for p in passes]  # a pass that saw no cliff keeps the term out
    fresh = (min(thresholds), mean([p["fresh"][1] for p in passes])) if all(thresholds) else (0, 0.0)
    return dict(table=table, overhead=overhead, experts=experts, stream=stream, fresh=fresh,
                **{k: mean([p[k] for p in passes]) for k in ("elementwise", "cache", "attention")})
