"""Lower precision (chapter 7): int8 weights through two kernels (fbgemm's dynamic W8A8, torchao's weight-only),
and the KV cache's bits: how many tokens fit, and what transformers' fp8 cache runs per step."""

from __future__ import annotations

import copy
import itertools
import time
import warnings
from collections.abc import Callable

import pandas as pd
import torch
from transformers import QuantizedCache

from ...plumbing.device import DTYPES, bytes_per_element
from ...plumbing.models import ModelSpec
from ...plumbing.timing import benchmark, time_alternating
from ...plumbing.validate import positive, positive_int
from ...plumbing.working_set import copies_past_cache
from ..formulas import kv_cache_bytes
from ..kv_cache import memory_plan
from ..step_time import Calibration, step_time_breakdown


def linear_weights(model: torch.nn.Module) -> int:
    """Weights of every nn.Linear in `model` (the LM head included): what weight-only quantisation shrinks."""
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))


def quantize_fbgemm(model: torch.nn.Module) -> torch.nn.Module:
    """A copy with every nn.Linear replaced by PyTorch's dynamic int8 linear (fbgemm on x86 CPUs).

    Dynamic W8A8, not weight-only: each call quantises its activations to int8 and runs an int8 x int8 GEMM.
    `torch.ao.quantization` is deprecated in favour of torchao."""

    with warnings.catch_warnings():  # torch.ao.quantization says it is deprecated in favour of torchao
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)


def quantize_torchao(model: torch.nn.Module, bits: int = 8) -> torch.nn.Module:
    """A copy with torchao's int8 (or int4) weight-only quantisation of every nn.Linear (ImportError if absent)."""
    from torchao.quantization import Int4WeightOnlyConfig, Int8WeightOnlyConfig, quantize_  # here: torchao is optional

    copied = copy.deepcopy(model)
    quantize_(copied, Int8WeightOnlyConfig() if bits == 8 else Int4WeightOnlyConfig())
    return copied


def relative_error(reference: torch.Tensor, other: torch.Tensor) -> float:
    """||other - reference|| / ||reference||: how far a changed model's logits move on the same inputs."""
    return float((other.float() - reference.float()).norm() / reference.float().norm())


def torchao_int8_extra(model: torch.nn.Module, calibration: Calibration, cache_bytes: int,
                       dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
                       repeats: int = 7) -> dict[str, float]:
    """Seconds per decode step that torchao's eager int8 weight-only linears add to the model's step, by term.

    torchao's `Int8Tensor` linear runs `torch.mm(x, qdata.t().to(dtype))` in every nn.Linear: one conversion per
    layer, at that layer's shape, into a fresh tensor, then the same matmul as before. So:
    - "converting": int8 tensors of every nn.Linear's shape converted one after another, each into the block its
      size last used (as malloc hands a freed block back), timed (median of `repeats` passes after a warm-up);
    - "fresh pages": a converted weight at or past the calibration's fresh-page threshold (glibc maps such a block
      afresh each time, a large LM head) pays its bytes at the calibration's page-mapping rate, every step;
    - "calls": each linear's call through the tensor subclass, beyond a plain linear (`torchao_call_overhead_seconds`,
      ImportError without torchao);
    - "matmuls read from cache": a converted weight smaller than `cache_bytes` (the effective cache) is still in
      the cache when its matmul reads it, so the fp32 step's streaming of that weight (at the calibration's read
      bandwidth) is saved: a negative term."""

    positive_int("repeats", repeats)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    ints = [torch.randint(-127, 127, m.weight.shape, dtype=torch.int8, device=device) for m in linears]
    # each new fp32 copy is freed after its matmul, so the next one of its size reuses the same block
    reused = {w.numel(): torch.empty(w.numel(), dtype=dtype, device=device) for w in ints}
    pairs = [(w, reused[w.numel()].view(w.shape)) for w in ints]  # `.t().to()` keeps the int8 layout
    seconds = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        for w, out in pairs:
            out.copy_(w)
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    fp_bytes = [m.weight.numel() * bytes_per_element(dtype) for m in linears]
    afresh = [n for n in fp_bytes if calibration.fresh_threshold and n >= calibration.fresh_threshold]
    fresh = sum(afresh)
    cached = sum(n for n in fp_bytes if n not in afresh and n < cache_bytes)
    return {"converting": sorted(seconds[1:])[repeats // 2],
            "fresh pages": fresh / calibration.fresh_bandwidth if fresh else 0.0,
            "calls": len(linears) * torchao_call_overhead_seconds(device),
            "matmuls read from cache": -cached / calibration.read_bandwidth}


def torchao_call_overhead_seconds(device: torch.device | str = "cpu") -> float:
    """Extra seconds one torchao int8 linear call costs over a plain nn.Linear, its bytes aside.

    Timed on an 8 x 8 layer, where moving the weights costs nothing: the Python dispatch of the tensor subclass
    and its extra operators (transpose, conversion, the scale's multiply, reshape). ImportError without torchao."""

    plain = torch.nn.Sequential(torch.nn.Linear(8, 8, bias=False)).to(device)
    quantized = quantize_torchao(plain, 8)
    x = torch.randn(1, 8, device=device)
    with torch.no_grad():
        timings = time_alternating({"plain": lambda: plain(x), "torchao": lambda: quantized(x)},
                                   device=device, rounds=3)
    return max(0.0, timings["torchao"].median - timings["plain"].median)


def rotating_linears(d: int, n_copies: int, quantized: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    """x -> the next of `n_copies` (d x d) linears, fp32 or fbgemm int8: a working set of n_copies weights."""
    def one() -> torch.nn.Module:  # quantised one at a time, so the fp32 originals are never all held at once
        layer = torch.nn.Linear(d, d, bias=False)
        return quantize_fbgemm(torch.nn.Sequential(layer))[0] if quantized else layer

    layers = [one() for _ in range(n_copies)]
    cycle = itertools.cycle(layers)
    return lambda x: next(cycle)(x)


def fp8_cache(model: torch.nn.Module):
    """transformers' `QuantizedCache(backend="fp8")`: keys and values stored in float8_e4m3, one scale per tensor.

    Each step it appends the new token in fp8 (torch.cat) and dequantises the layer's whole cache back to the
    model's dtype for attention. A ValueError or ImportError where this transformers has no fp8 backend."""
    return QuantizedCache(backend="fp8", config=model.config)


def fp8_dequantize_rate(layer_elems: int, device: torch.device | str = "cpu",
                        dtype: torch.dtype = torch.float32) -> float:
    """Elements/s of the fp8 cache's per-step dequantise, `(q.float() * scale).to(dtype)`, on one layer's keys
    (`layer_elems` elements), the layers rotating through twice the effective cache as a model's would."""
    device = torch.device(device)
    n_copies = copies_past_cache(positive_int("layer_elems", layer_elems), 2, device)  # 1 byte per element
    layers = [torch.randn(layer_elems, device=device).to(torch.float8_e4m3fn) for _ in range(n_copies)]
    scale, cycle = torch.tensor(0.01, device=device), itertools.cycle(layers)
    return layer_elems / benchmark(lambda: (next(cycle).float() * scale).to(dtype), device=device).median


def fp8_cache_nbytes(cache) -> int:
    """Bytes the fp8 cache's stored keys and values hold (1 per element; the scales are one number each)."""
    return sum(layer._quantized_keys[0].nbytes + layer._quantized_values[0].nbytes for layer in cache.layers)


def fp8_cache_breakdown(spec: ModelSpec, context: int, calibration: Calibration, dequantize_rate: float,
                        extra_ops: int) -> pd.DataFrame:
    """The step model's decode step at `context` with the fp8 cache instead of a DynamicCache.

    Its torch.cat copies 1-byte elements; added are the dequantise of every layer's keys and values (at
    `dequantize_rate` elements/s) and the `extra_ops` operator calls (quantise, dequantise) it dispatches."""
    rows = step_time_breakdown(spec, 1, context, 1, calibration)
    b = bytes_per_element(DTYPES[calibration.dtype])
    copies = rows.group == "cache copies"
    rows.loc[copies, ["bytes", "memory_s", "time_s"]] /= b
    elems = kv_cache_bytes(spec.n_layers, spec.n_kv_heads, spec.head_dim, context, 1, 1)
    dequantize_s = elems / positive("dequantize_rate", dequantize_rate)
    overhead_s = extra_ops * calibration.op_overhead(spec.family)
    added = pd.DataFrame([
        dict(group="fp8 dequantise", flops=0, bytes=elems * (1 + b), compute_s=0.0, memory_s=dequantize_s,
             overhead_s=0.0, time_s=dequantize_s),
        dict(group=f"overhead ({extra_ops} more ops)", flops=0, bytes=0, compute_s=0.0, memory_s=0.0,
             overhead_s=overhead_s, time_s=overhead_s)])
    return pd.concat([rows, added], ignore_index=True)


def tokens_that_fit(spec: ModelSpec, memory_bytes: float, bits_per_elem: int) -> int:
    """Cache tokens that fit in `memory_bytes` with `bits_per_elem` per element (chapter 4's tokens_that_fit)."""
    one_byte_token = spec.kv_bytes_per_token(1)  # K and V of one token at 1 byte per element
    bits = positive_int("bits_per_elem", bits_per_elem)
    return memory_plan.tokens_that_fit(positive("memory_bytes", memory_bytes), one_byte_token * bits / 8)
