"""The calibration: the rates a forward pass on this device really reaches, measured once per device and dtype
by the probes of `probes.py`, cached, and re-checked before each use (a machine's speed drifts).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ...plumbing.contention import Contention, speed_change, watch
from ...plumbing.device import DTYPES, as_device, bytes_per_element, default_dtype, device_name, dtype_name
from ...plumbing.models import MODEL_SPECS
from ...plumbing.results import lab_dir, measured_once, slug
from ...plumbing.validate import positive_int
from ...plumbing.working_set import working_set
from ..hardware import GPUSpec
from .probes import (
    LAYER_SHAPES,
    MATMUL_TOKENS,
    SMALL_LAYER,
    cache_probe,
    measure_pass,
    quick_median,
    rotating_layer,
    toy_forward_cost,
    typical_of,
)

CALIBRATION_VERSION = 20


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
    stream_bytes: tuple[float, ...] = ()  # matrix sizes of the streaming probe (bytes)
    stream_bandwidth: tuple[float, ...] = ()  # bytes/s a 1-token product streams a matrix of each size at
    expert_walk_s: float = 0.0  # seconds per expert a grouped experts product walks past, hit or not (CPU)
    expert_call_s: float = 0.0  # seconds per expert it multiplies, beyond the arithmetic (CPU)
    fresh_threshold: int = 0  # bytes from which a new cache tensor lands in freshly mapped pages (0: never)
    fresh_bandwidth: float = 0.0  # bytes/s the OS maps and zeroes those pages at, beyond the copy itself
    overlap: bool = False  # True where host overhead overlaps device work (an accelerator's async queue)
    source: str = "measured"  # "measured" here, or "spec" (from a spec sheet: not measured here)
    measured: dict[str, float] = field(default_factory=dict)  # label -> seconds of each timed probe
    seconds: float = 0.0  # how long calibrating took
    contention: dict[str, float] = field(default_factory=dict)  # what else ran while it was measured
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

    def size_factor(self, matrix_bytes: float, n_tokens: float) -> float:
        """How fast a matrix of `matrix_bytes` streams against the matmul table's layers (below 1: slower), at
        `n_tokens` rows: the 1-token streaming curve's ratio, fading to 1 at 4 rows and more, where products
        wait on arithmetic as much as on bytes (1 where the curve was not measured)."""
        if not self.stream_bytes or matrix_bytes <= 0:
            return 1.0
        b = bytes_per_element(DTYPES[self.dtype])
        table_bytes, small_bytes = (sum(x * y for x, y in shapes) / len(shapes) * b
                                    for shapes in (LAYER_SHAPES["linear"], SMALL_LAYER))
        sizes, rates = np.log(self.stream_bytes), np.log(self.stream_bandwidth)
        streaming = np.exp(np.interp(np.log(matrix_bytes), sizes, rates) - np.interp(np.log(table_bytes), sizes, rates))
        # at many rows: the small layer's table against the main one, for matrices between the two sizes
        small = self.matmul_rate(n_tokens, "small") / self.matmul_rate(n_tokens) if "small" in self.matmul_flops else 1
        below = np.clip(np.log(table_bytes / matrix_bytes) / np.log(table_bytes / small_bytes), 0.0, 1.0)
        weight = float(np.clip(1 - np.log(max(n_tokens, 1.0)) / np.log(4), 0.0, 1.0))
        return float(streaming**weight * (small**below) ** (1 - weight))

    def op_overhead(self, family: str) -> float:
        """Seconds per operator call for an architecture family (the mean over families if not measured)."""
        return self.op_overhead_s.get(family, float(np.mean(list(self.op_overhead_s.values()))))


def measure_calibration(device: torch.device, dtype: torch.dtype, passes: int = 2) -> Calibration:
    """Time every probe `passes` times, one pass after the other, and keep the typical result of each (the
    geometric mean): the step it predicts is timed by its median, so its rates must not be the best seen.
    Seconds to tens of seconds."""
    start = time.perf_counter()
    runs = [dict() for _ in range(positive_int("passes", passes))]
    rates = typical_of([measure_pass(device, dtype, run) for run in runs])
    measured = {name: float(np.exp(np.mean([np.log(run[name]) for run in runs]))) for name in runs[0]}
    table = rates["table"]
    read_bw = table["linear"][0] / 2 * bytes_per_element(dtype)  # 2 FLOPs per weight element read at 1 token
    return Calibration(device_name(device), device.type, dtype_name(dtype), MATMUL_TOKENS, table, read_bw,
                       rates["elementwise"], rates["cache"], rates["attention"], rates["overhead"],
                       *rates["stream"], *rates["experts"], *rates["fresh"], overlap=device.type == "cuda",
                       measured=measured,
                       seconds=time.perf_counter() - start)


def calibration_path(device: torch.device, dtype: torch.dtype) -> object:
    """Where this device's calibration in `dtype` is cached (beside the ceilings, in lab_dir())."""
    return lab_dir() / f"step-model-{slug(device_name(device))}-{dtype_name(dtype)}.json"


def calibration_from_dict(data: dict) -> Calibration:
    """A Calibration from its JSON form (dataclasses.asdict, as cached)."""
    data = dict(data, matmul_tokens=tuple(data["matmul_tokens"]),
                matmul_flops={layout: tuple(rates) for layout, rates in data["matmul_flops"].items()})
    data.update({key: tuple(data.get(key, ())) for key in ("stream_bytes", "stream_bandwidth")})
    return Calibration(**data)


def load_calibration(path, device: torch.device) -> Calibration:
    """Read a cached calibration; refuse one measured on another device."""
    calibration = calibration_from_dict(json.loads(open(path).read()))
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


def speed_now(calibration: Calibration, device: torch.device, tokens: int = 1) -> float:
    """The matmul rate at `tokens` rows re-timed now (best of two), over the calibration's: a machine's speed drifts.

    Under a second; at 1 token the probe that weight streaming, most of a decode step, leans on; at 256 one that
    computes (a VM's compute and its memory can drift apart)."""
    if tokens not in MATMUL_TOKENS:
        raise ValueError(f"tokens must be one of the calibration's rows {MATMUL_TOKENS}, got {tokens!r}")
    dtype = DTYPES[calibration.dtype]
    step, flops = rotating_layer(LAYER_SHAPES["linear"], tokens, "linear", working_set(4, device).nbytes, dtype,
                                 device)
    with torch.no_grad():
        seconds = min(quick_median(step, device) for _ in range(2))
    return flops / seconds / calibration.matmul_flops["linear"][MATMUL_TOKENS.index(tokens)]


def overhead_now(calibration: Calibration, device: torch.device, family: str = "gpt2") -> float:
    """The calibrated cost of one operator call over the cost re-timed now in a toy forward of `family` (below 1:
    calls cost more now). Under a second; the probe that overhead, most of a small model's step, leans on."""
    spec = next(s for s in MODEL_SPECS.values() if s.family == family)
    n_ops, seconds = toy_forward_cost(spec, device, DTYPES[calibration.dtype])
    return calibration.op_overhead(family) / (seconds / n_ops)


def cache_now(calibration: Calibration, device: torch.device, context: int = 1024) -> float:
    """The decode cache step's probe (a layer's cat and attention at `context`, rotating past the cache) re-timed
    now (best of two), its calibrated seconds over the seconds now (below 1: slower now); 1.0 where the
    calibration holds no such timing (a spec sheet's)."""
    calibrated_s = calibration.measured.get(f"decode cache step, context {context}")
    if not calibrated_s:
        return 1.0
    _, step = cache_probe(context, DTYPES[calibration.dtype], device)  # as measure_cache_bandwidth times it
    return calibrated_s / min(quick_median(step, device) for _ in range(2))


def probe_ratios(calibration: Calibration, device: torch.device, tokens: tuple[int, ...] = (1,),
                 overhead: bool = True, cache: bool = False) -> dict[str, float]:
    """The calibration's probes re-timed now over their calibrated values, by name: the matmul rate at each row
    count in `tokens`, with `overhead` the speed of an operator call, with `cache` the speed of a decode layer's
    cache step (below 1: slower now)."""
    ratios = {f"{t}-token matmul rate": speed_now(calibration, device, t) for t in tokens}
    if overhead:
        ratios["speed of an operator call"] = overhead_now(calibration, device)
    if cache:
        ratios["speed of the cache step"] = cache_now(calibration, device)
    return ratios


def calibration_drift(calibration: Calibration, device: torch.device | str | None = None,
                      tokens: tuple[int, ...] = (1,), overhead: bool = True, cache: bool = False) -> Contention:
    """How far this machine's speed has moved since `calibration` was measured, for a self-check that sets a
    calibrated prediction against a run: the matmul probe at each row count in `tokens` and, with `overhead`
    (what a step of many small calls leans on), the cost of an operator call, re-timed now over their
    calibrated values and printed (a few seconds at most). A VM's speed can swing for
    seconds with nothing visible running; past SPEED_MOVED the check cannot judge the prediction.

    >>> helpers.check(abs(error) < 0.35, "...", evidence, contention=calibration_drift(calibration, lab.device))
    """
    ratios = probe_ratios(calibration, as_device(device), tokens, overhead, cache)
    print("the calibration's probes re-timed now, against their calibrated values (above 1: faster now): "
          + ", ".join(f"{name} {ratio:.2f}x" for name, ratio in ratios.items()))
    return speed_change([1.0, *ratios.values()])


def calibrate(device: torch.device | str | None = None, refresh: bool = False,
              dtype: torch.dtype | str | None = None) -> Calibration:
    """This device's calibration in `dtype` (its default dtype if None), measured once and cached in lab_dir().

    A cached one is re-checked against fresh probes (weight streaming, the cost of an operator call) first, and
    measured again where either has drifted past DRIFT; the contention of the cached measurement and of the
    re-check is printed. A calibration measured while the machine was busy is used but never cached, and a busy
    re-check does not replace a cached calibration (it cannot tell drift from a neighbour)."""
    device = as_device(device)
    dtype = DTYPES[dtype_name(dtype or default_dtype(device))]
    path = calibration_path(device, dtype)

    def load(data: dict) -> Calibration | None:
        """The cached calibration, re-checked against fresh probes (None: measure again)."""
        calibration = calibration_from_dict(data)
        check_same_device(calibration, device)
        if calibration.version != CALIBRATION_VERSION:
            return None
        with watch() as now:
            drifts = probe_ratios(calibration, device, cache=True)
        print(f"cached calibration (others took {calibration.contention.get('others_share', 0):.0%} of "
              f"the CPU while it was measured) re-checked now ({now.contention}; above 1: faster now): "
              + ", ".join(f"{name} {ratio:.2f}x" for name, ratio in drifts.items()))
        off = {name: ratio for name, ratio in drifts.items() if not DRIFT[0] <= ratio <= DRIFT[1]}
        if not off:
            return calibration
        if now.contention.busy:
            print("the re-check ran while this seat was busy: keeping the cached calibration")
            return calibration
        print("this machine's " + ", ".join(f"{name} is now {ratio:.2f}x" for name, ratio in off.items())
              + " its calibrated value: calibrating again")
        return None

    return measured_once(path, lambda: measure_calibration(device, dtype), "the step model's calibration", load,
                         refresh, tag=lambda calibration, found: replace(calibration, contention=found.as_dict()))


def spec_calibration(gpu: GPUSpec, host: Calibration, dtype: str = "bfloat16") -> Calibration:
    """A GPU's calibration from its spec sheet (not measured here): peak rates, spec bandwidth, host overhead.

    What a spec-sheet calculator assumes, plus this host's per-operator cost: eager PyTorch dispatches each
    operator from the CPU, and the GPU queue hides it only when kernels run longer than their dispatch."""
    flops = gpu.fp32_tflops * 1e12 if dtype_name(dtype) == "float32" else gpu.peak_flops
    rates = tuple(min(flops, 2 * m * gpu.bandwidth / bytes_per_element(DTYPES[dtype])) for m in MATMUL_TOKENS)
    rates = {layout: rates for layout in LAYER_SHAPES}
    return replace(host, device=gpu.name, device_type="cuda", dtype=dtype_name(dtype), matmul_flops=rates,
                   read_bandwidth=gpu.bandwidth, elementwise_bandwidth=gpu.bandwidth, cache_bandwidth=gpu.bandwidth,
                   attention_flops=flops, stream_bytes=(), stream_bandwidth=(),  # one bandwidth at every size
                   expert_walk_s=0.0, expert_call_s=0.0,  # grouped_mm: one CUDA kernel
                   fresh_threshold=0, fresh_bandwidth=0.0,  # a caching allocator keeps its blocks
                   overlap=True, source="spec", measured={}, seconds=0.0, contention={})
