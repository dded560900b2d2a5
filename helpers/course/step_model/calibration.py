"""Calibration: what a forward pass on this device really runs into, measured once per device and dtype.

- matmul rate against token count, weights rotating through more memory than the last-level cache holds
  (at 1 token this is the read bandwidth weight-streaming matrix-vector products reach);
- elementwise bandwidth of ops that allocate their output (norms, activations, residual adds);
- the KV cache's step: DynamicCache's torch.cat (read + write the cache) then attention reading it;
- causal attention's FLOP/s at prefill;
- the cost of one operator call, from toy-width forwards of each architecture family.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F

from ...plumbing.device import as_device, bytes_per_element, default_dtype, device_name, synchronize
from ...plumbing.models import MODEL_SPECS
from ...plumbing.results import lab_dir, slug
from ...plumbing.timing import benchmark
from ...plumbing.validate import positive_int
from ...plumbing.working_set import copies_past_cache, measure_cache_size, working_set
from ..formulas import score_flops
from ..hardware import GPUSpec
from ..phases import decode_step, prefill
from ..roofline import count_ops
from .operators import narrow_model, tiny_spec

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
MATMUL_TOKENS = (1, 4, 16, 64, 256, 1024, 2048)  # rows of the matmul-rate table
# (d_in, d_out) of the timed weights, a ~0.5B model's layer: GPT-2-style Conv1D (x @ W), nn.Linear (x @ W.T)
# with a wider attention (Llama, Qwen), and an LM head (x @ E.T over a 32k slice of the vocabulary)
LAYER_SHAPES = {"x@W": [(1024, 3072), (1024, 1024), (1024, 4096), (4096, 1024)],
                "linear": [(1024, 2048), (1024, 1024), (2048, 1024), (1024, 3072), (3072, 1024)],
                "lm_head": [(1024, 32768)]}
TABLE_ROWS = {"lm_head": 3}  # rows of MATMUL_TOKENS timed for these (default: all): an LM head runs at batch rows
CALIBRATION_VERSION = 8


@dataclass(frozen=True)
class Calibration:
    """Rates one device reaches in one dtype, and what was timed to get them."""

    device: str  # device_name() it was measured on (or the GPU's table name for a spec calibration)
    device_type: str
    dtype: str
    matmul_tokens: tuple[int, ...]
    matmul_flops: dict[str, tuple[float, ...]]  # layout -> effective FLOP/s at each row of matmul_tokens
    read_bandwidth: float  # bytes/s matrix-vector products stream weights at (1-token row, nn.Linear)
    elementwise_bandwidth: float  # bytes/s (read + written) of elementwise ops that allocate their output
    cache_bandwidth: float  # bytes/s of a decode layer's cache step: cat (read + write) and attention (read)
    attention_flops: float  # FLOP/s of causal attention at prefill (scores + mix)
    op_overhead_s: dict[str, float]  # architecture family -> seconds per operator call
    overlap: bool = False  # True where host overhead overlaps device work (an accelerator's async queue)
    source: str = "measured"  # "measured" here, or "spec" (from a spec sheet: not measured here)
    measured: dict[str, float] = field(default_factory=dict)  # label -> seconds of each timed probe
    seconds: float = 0.0  # how long calibrating took
    version: int = CALIBRATION_VERSION

    @property
    def peak_matmul_flops(self) -> float:
        """The best matmul rate in the tables."""
        return max(max(rates) for rates in self.matmul_flops.values())

    def matmul_rate(self, n_tokens: float, layout: str = "linear") -> float:
        """Effective matmul FLOP/s of `layout` at `n_tokens` rows, interpolated in log-log space (flat past it)."""
        rates = self.matmul_flops[layout]
        tokens = self.matmul_tokens[:len(rates)]
        x = np.log(np.clip(n_tokens, tokens[0], tokens[-1]))
        return float(np.exp(np.interp(x, np.log(tokens), np.log(rates))))

    def op_overhead(self, family: str) -> float:
        """Seconds per operator call for an architecture family (the mean over families if not measured)."""
        return self.op_overhead_s.get(family, float(np.mean(list(self.op_overhead_s.values()))))


def dtype_name(dtype: torch.dtype | str) -> str:
    """'float32', 'bfloat16' or 'float16' for a torch dtype or its name; ValueError otherwise."""
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {tuple(DTYPES)}, got {dtype!r}")
    return name


def _quick(fn, device: torch.device, min_run_time: float = 0.05) -> float:
    """Median seconds of fn(): a short benchmark, so the whole calibration stays within seconds."""
    return benchmark(fn, device=device, warmup=1, min_run_time=min_run_time, min_runs=3).median


def last_level_cache_bytes(device: torch.device) -> int:
    """This machine's effective last-level cache in bytes (measured: `helpers.measure_cache_size`)."""
    return measure_cache_size(device).cache_bytes


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
            seconds = _quick(step, device, 0.1)
            measured[f"matmul {layout}, {m} tokens, shapes {shapes}"] = seconds
            rates.append(flops / seconds)
        # more rows per weight read never make a matmul slower per FLOP: a dip is a disturbed probe, not the device
        tables[layout] = tuple(float(r) for r in np.maximum.accumulate(rates))
    return tables


def measure_elementwise_bandwidth(device: torch.device, dtype: torch.dtype, measured: dict) -> float:
    """Bytes/s of a @ b elementwise into a fresh tensor (2 reads, 1 write) at an activation's size (8 MiB)."""
    n = 8 * 2**20 // bytes_per_element(dtype)
    a, b = torch.randn(n, dtype=dtype, device=device), torch.randn(n, dtype=dtype, device=device)
    seconds = _quick(lambda: a * b, device)
    measured["elementwise multiply (8 MiB)"] = seconds
    return 3 * a.nbytes / seconds


def _slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys against xs (the per-unit cost once the fixed part is taken out)."""
    return float(np.polyfit(xs, ys, 1)[0])


def cache_step(context: int, heads: int, head_dim: int, n_layers: int, dtype: torch.dtype, device: torch.device):
    """One decode layer's cache work, layers rotating: cat the new K and V onto the cache, then attend."""
    caches = [tuple(torch.randn(1, heads, context, head_dim, dtype=dtype, device=device) for _ in "kv")
              for _ in range(n_layers)]
    new = torch.randn(1, heads, 1, head_dim, dtype=dtype, device=device)
    layers = itertools.cycle(range(n_layers))

    def step():
        layer = next(layers)
        k, v = (torch.cat([t, new], dim=-2) for t in caches[layer])  # DynamicCache.update
        # the new tensors replace the old ones, as in DynamicCache: the next cat reads memory written by
        # this one, not a copy that stays put (a view cut back to `context` keeps the size constant)
        caches[layer] = (k[..., :context, :], v[..., :context, :])
        return F.scaled_dot_product_attention(new, k, v)

    return step


def measure_cache_bandwidth(device: torch.device, dtype: torch.dtype, measured: dict) -> float:
    """Bytes/s of decode's per-layer cache step (cat K and V, then attention) over layers rotating past the cache."""
    heads, head_dim, nbytes, seconds = 16, 64, [], []
    for context in (256, 1024):
        layer_bytes = 2 * heads * head_dim * context * bytes_per_element(dtype)  # K and V of one layer
        n_layers = copies_past_cache(layer_bytes, 2, device)
        seconds.append(_quick(cache_step(context, heads, head_dim, n_layers, dtype, device), device))
        nbytes.append(3 * layer_bytes)  # the cat reads the old cache and writes a new one; attention reads it
        measured[f"decode cache step, context {context}"] = seconds[-1]
    return 1 / _slope(nbytes, seconds)


def measure_attention_flops(device: torch.device, dtype: torch.dtype, measured: dict) -> float:
    """FLOP/s of causal scaled-dot-product attention at prefill (16 heads of 64), from two prompt lengths."""
    heads, head_dim, flops, seconds = 16, 64, [], []
    for n in (256, 1024):
        q = torch.randn(1, heads, n, head_dim, dtype=dtype, device=device)
        seconds.append(_quick(lambda q=q: F.scaled_dot_product_attention(q, q, q, is_causal=True), device))
        flops.append(score_flops(n, n, heads, head_dim, causal=True))
        measured[f"causal attention, {n} tokens"] = seconds[-1]
    return 1 / _slope(flops, seconds)


def toy_forward_cost(spec, device: torch.device, dtype: torch.dtype) -> tuple[int, float]:
    """Operator calls and seconds of a toy-width prefill (8 tokens) plus one decode step of `spec`'s family."""
    model = narrow_model(tiny_spec(spec), device, dtype)
    ids = torch.zeros(1, 8, dtype=torch.long, device=device)
    with torch.no_grad():
        token, kv = prefill(model, ids)
        n_ops = count_ops(lambda: prefill(model, ids)) + count_ops(lambda: decode_step(model, token, kv))
        seconds = (_quick(lambda: prefill(model, ids), device, 0.2)
                   + _quick(lambda: decode_step(model, token, kv), device, 0.2))  # the cache grows: toy-sized
    return n_ops, seconds


def measure_op_overhead(device: torch.device, dtype: torch.dtype, measured: dict) -> dict[str, float]:
    """Seconds per operator call: a toy-width forward (prefill and decode) of each family, over its op count."""
    per_family = {}
    for spec in {s.family: s for s in MODEL_SPECS.values()}.values():
        n_ops, seconds = toy_forward_cost(spec, device, dtype)
        measured[f"toy {spec.family} prefill + decode ({n_ops} ops)"] = seconds
        per_family[spec.family] = seconds / n_ops
    return per_family


def measure_pass(device: torch.device, dtype: torch.dtype, measured: dict) -> dict:
    """Time every probe once: the rates (FLOP/s, bytes/s) and the per-operator seconds, by name."""
    with torch.no_grad():
        rates = dict(table=measure_matmul_table(device, dtype, measured),
                     elementwise=measure_elementwise_bandwidth(device, dtype, measured),
                     cache=measure_cache_bandwidth(device, dtype, measured),
                     attention=measure_attention_flops(device, dtype, measured))
    rates["overhead"] = measure_op_overhead(device, dtype, measured)
    synchronize(device)
    return rates


def best_of(a: dict, b: dict) -> dict:
    """Per probe, the faster of two passes: higher rates, lower per-operator seconds."""
    table = {layout: tuple(map(max, a["table"][layout], b["table"][layout])) for layout in a["table"]}
    overhead = {family: min(a["overhead"][family], b["overhead"][family]) for family in a["overhead"]}
    return dict(table=table, overhead=overhead, **{k: max(a[k], b[k]) for k in ("elementwise", "cache", "attention")})


def measure_calibration(device: torch.device, dtype: torch.dtype, passes: int = 2) -> Calibration:
    """Time every probe `passes` times, some seconds apart, and keep the faster of each: a burst of other
    work on the machine during one pass does not stay in the cached rates. Seconds to tens of seconds."""
    start = time.perf_counter()
    runs = [dict() for _ in range(positive_int("passes", passes))]
    rates = measure_pass(device, dtype, runs[0])
    for more in runs[1:]:
        rates = best_of(rates, measure_pass(device, dtype, more))
    measured = {name: min(run[name] for run in runs) for name in runs[0]}
    table = rates["table"]
    read_bw = table["linear"][0] / 2 * bytes_per_element(dtype)  # 2 FLOPs per weight element read at 1 token
    return Calibration(device_name(device), device.type, dtype_name(dtype), MATMUL_TOKENS, table, read_bw,
                       rates["elementwise"], rates["cache"], rates["attention"], rates["overhead"],
                       overlap=device.type == "cuda", measured=measured, seconds=time.perf_counter() - start)


def calibration_path(device: torch.device, dtype: torch.dtype) -> object:
    """Where this device's calibration in `dtype` is cached (beside the ceilings, in lab_dir())."""
    return lab_dir() / f"step-model-{slug(device_name(device))}-{dtype_name(dtype)}.json"


def load_calibration(path, device: torch.device) -> Calibration:
    """Read a cached calibration; refuse one measured on another device."""
    data = json.loads(open(path).read())
    data["matmul_tokens"] = tuple(data["matmul_tokens"])
    data["matmul_flops"] = {layout: tuple(rates) for layout, rates in data["matmul_flops"].items()}
    calibration = Calibration(**data)
    check_same_device(calibration, device)
    return calibration


def check_same_device(calibration: Calibration, device: torch.device | None = None) -> None:
    """A ValueError unless `calibration` was measured on this device (spec calibrations pass: they say so)."""
    if calibration.source != "measured":
        return
    here = device_name(as_device(device) if device is not None else torch.device(calibration.device_type))
    if calibration.device != here:
        raise ValueError(f"calibration was measured on {calibration.device!r}, but this device is {here!r}: "
                         "run helpers.calibrate() here (or use spec_calibration() for a spec-sheet prediction)")


DRIFT = (0.75, 1.33)  # a cached calibration is used while a re-timed probe runs within this factor of it


def speed_now(calibration: Calibration, device: torch.device) -> float:
    """The 1-token matmul rate re-timed now (best of two), over the calibration's: a machine's speed drifts.

    Under a second; the probe that weight streaming, most of a decode step, leans on."""
    dtype = DTYPES[calibration.dtype]
    step, flops = rotating_layer(LAYER_SHAPES["linear"], 1, "linear", working_set(4, device).nbytes, dtype, device)
    with torch.no_grad():
        seconds = min(_quick(step, device) for _ in range(2))
    return flops / seconds / calibration.matmul_flops["linear"][0]


def calibrate(device: torch.device | str | None = None, refresh: bool = False,
              dtype: torch.dtype | str | None = None) -> Calibration:
    """This device's calibration in `dtype` (its default dtype if None), measured once and cached in lab_dir().

    A cached one is checked first: where a re-timed probe has drifted past DRIFT, it is measured again."""
    device = as_device(device)
    dtype = DTYPES[dtype_name(dtype or default_dtype(device))]
    path = calibration_path(device, dtype)
    if path.exists() and not refresh:
        try:
            calibration = load_calibration(path, device)
            if calibration.version == CALIBRATION_VERSION:
                drift = speed_now(calibration, device)
                if DRIFT[0] <= drift <= DRIFT[1]:
                    return calibration
                print(f"this machine's 1-token matmul rate is now {drift:.2f}x its calibrated value: calibrating again")
        except (TypeError, KeyError, json.JSONDecodeError):
            pass  # an older layout: measure again
    calibration = measure_calibration(device, dtype)
    path.write_text(json.dumps(asdict(calibration), indent=2))
    return calibration


def spec_calibration(gpu: GPUSpec, host: Calibration, dtype: str = "bfloat16") -> Calibration:
    """A GPU's calibration from its spec sheet (not measured here): peak rates, spec bandwidth, host overhead.

    What a spec-sheet calculator assumes, plus this host's per-operator cost: eager PyTorch dispatches each
    operator from the CPU, and the GPU queue hides it only when kernels run longer than their dispatch."""
    flops = gpu.fp32_tflops * 1e12 if dtype_name(dtype) == "float32" else gpu.peak_flops
    rates = tuple(min(flops, 2 * m * gpu.bandwidth / bytes_per_element(DTYPES[dtype])) for m in MATMUL_TOKENS)
    rates = {layout: rates for layout in LAYER_SHAPES}
    return replace(host, device=gpu.name, device_type="cuda", dtype=dtype_name(dtype), matmul_flops=rates,
                   read_bandwidth=gpu.bandwidth, elementwise_bandwidth=gpu.bandwidth, cache_bandwidth=gpu.bandwidth,
                   attention_flops=flops, overlap=True, source="spec", measured={}, seconds=0.0)
