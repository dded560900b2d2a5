"""Device and dtype: the one place the lab decides where and in what precision it runs."""

from __future__ import annotations

import os
import platform

import torch


def pick_device(prefer: str | None = None) -> torch.device:
    """Return the best device here: cuda, then mps, then cpu (or `prefer`, or $LAB_DEVICE)."""
    prefer = prefer or os.environ.get("LAB_DEVICE")
    if prefer:
        allowed = ("cpu", "cuda", "mps")
        if prefer.split(":")[0] not in allowed:
            raise ValueError(f"prefer must be one of {allowed} (optionally 'cuda:N'), got {prefer!r}")
        return torch.device(prefer)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def as_device(device: torch.device | str | None) -> torch.device:
    """Turn None or a string into a torch.device (None means pick_device())."""
    return pick_device() if device is None else torch.device(device)


def native_bf16(device: torch.device | str | None = None) -> bool:
    """True if a CUDA device computes bf16 in hardware (compute capability 8.0+: Ampere, Ada, Hopper...).

    `torch.cuda.is_bf16_supported()` also says yes where bf16 is only emulated in software (a T4 or V100):
    no tensor cores, so every half-precision ceiling and prediction there would be off."""
    device = as_device(device)
    if device.type != "cuda":
        return False
    return torch.cuda.get_device_capability(device) >= (8, 0) and torch.cuda.is_bf16_supported(
        including_emulation=False)


def default_dtype(device: torch.device | str | None = None) -> torch.dtype:
    """fp32 on CPU (half-precision matmuls are slow there); on CUDA bf16 where native, else fp16 (T4, V100)."""
    device = as_device(device)
    if device.type == "cuda":
        return torch.bfloat16 if native_bf16(device) else torch.float16
    if device.type == "mps":
        return torch.float16
    return torch.float32


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}  # the lab's compute dtypes


def dtype_name(dtype: torch.dtype | str) -> str:
    """'float32', 'bfloat16' or 'float16' for a torch dtype or its name; ValueError otherwise."""
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {tuple(DTYPES)}, got {dtype!r}")
    return name


def bytes_per_element(dtype: torch.dtype) -> int:
    """Bytes one element of `dtype` takes (fp32 4, bf16 2, fp8 1)."""
    return torch.empty((), dtype=dtype).element_size()


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait until queued work on the device is finished (a no-op on CPU)."""
    device = as_device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def device_memory_bytes(device: torch.device | str | None = None) -> int | None:
    """Total memory of a CUDA device in bytes as the driver reports it (None on CPU and MPS)."""
    device = as_device(device)
    if device.type != "cuda":
        return None
    return torch.cuda.get_device_properties(device).total_memory


def device_name(device: torch.device | str | None = None) -> str:
    """A human name for the device: the GPU's model, or the CPU's model and thread count."""
    device = as_device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple GPU (mps)"
    return f"{_cpu_model()} ({torch.get_num_threads()} threads)"


BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")  # x86 AMX, x86 AVX-512 BF16, Arm's BF16 extension


def cpu_bf16_units(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The bf16 units the CPU reports in /proc/cpuinfo's flags (empty where there is no such file)."""
    try:
        with open(cpuinfo) as f:
            lines = [line for line in f if line.startswith(("flags", "Features"))]
    except OSError:
        return frozenset()
    reported = {flag for line in lines for flag in line.split(":", 1)[-1].split()}
    return frozenset(reported & set(BF16_CPU_FLAGS))


def _cpu_model() -> str:
    """The CPU's model string from /proc/cpuinfo, or what platform knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"
