"""Lower precision (chapter 7): int8 weights through two kernels (fbgemm, torchao), and the KV cache's bits."""

from __future__ import annotations

import copy
import importlib
import importlib.util
import itertools
import math
import time
import warnings
from collections.abc import Callable

import torch

from ...plumbing.models import ModelSpec
from ...plumbing.validate import positive, positive_int
from ..formulas import kv_cache_bytes


def linear_weights(model: torch.nn.Module) -> int:
    """Weights of every nn.Linear in `model` (the LM head included): what weight-only quantisation shrinks."""
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))


def quantize_fbgemm(model: torch.nn.Module) -> torch.nn.Module:
    """A copy with every nn.Linear replaced by PyTorch's dynamic int8 linear (fbgemm on x86 CPUs)."""

    with warnings.catch_warnings():  # torch.ao.quantization says it is deprecated in favour of torchao
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)


def quantize_torchao(model: torch.nn.Module, bits: int = 8) -> torch.nn.Module:
    """A copy with torchao's int8 (or int4) weight-only quantisation of every nn.Linear (ImportError if absent)."""
    from torchao.quantization import Int4WeightOnlyConfig, Int8WeightOnlyConfig, quantize_

    copied = copy.deepcopy(model)
    quantize_(copied, Int8WeightOnlyConfig() if bits == 8 else Int4WeightOnlyConfig())
    return copied


def relative_error(reference: torch.Tensor, other: torch.Tensor) -> float:
    """||other - reference|| / ||reference||: how far a changed model's logits move on the same inputs."""
    return float((other.float() - reference.float()).norm() / reference.float().norm())


def int8_conversion_rate(n_weights: int, device: torch.device | str = "cpu", repeats: int = 3) -> float:
    """Weights per second the int8 -> fp32 conversion (torchao's eager dequantize) runs at, on fresh tensors."""

    w = torch.randint(-127, 127, (n_weights,), dtype=torch.int8, device=device)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        w.to(torch.float32)
        seconds.append(time.perf_counter() - start)
    return n_weights / sorted(seconds)[len(seconds) // 2]


def rotating_linears(d: int, n_copies: int, quantized: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    """x -> the next of `n_copies` (d x d) linears, fp32 or fbgemm int8: a working set of n_copies weights."""
    layers = [torch.nn.Linear(d, d, bias=False) for _ in range(n_copies)]
    if quantized:
        layers = list(quantize_fbgemm(torch.nn.Sequential(*layers)))
    cycle = itertools.cycle(layers)
    return lambda x: next(cycle)(x)


def quantized_cache_status() -> str:
    """'' where transformers' quantised KV cache has a backend here, else why not (the missing package)."""

    backends = {"optimum-quanto": "optimum.quanto", "hqq": "hqq"}
    for module in backends.values():
        if importlib.util.find_spec(module.split(".")[0]) is not None:
            try:
                importlib.import_module(module)
                return ""
            except ImportError:
                continue
    return f"no quantised-cache backend installed ({' or '.join(backends)}): transformers' QuantizedCache needs one"


def tokens_that_fit(spec: ModelSpec, memory_bytes: float, bits_per_elem: int) -> int:
    """Cache tokens that fit in `memory_bytes` with `bits_per_elem` per element (chapter 4's kv_cache_bytes)."""
    one_byte_token = kv_cache_bytes(spec.n_layers, spec.n_kv_heads, spec.head_dim, 1, 1, 1)  # 1 byte/elem
    bits = positive_int("bits_per_elem", bits_per_elem)
    return math.floor(positive("memory_bytes", memory_bytes) * 8 / (one_byte_token * bits))
