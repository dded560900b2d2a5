"""The `lab` every notebook's first cell makes: where and how it runs, and this device's measured ceilings."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..plumbing import setup as plumbing_setup
from .hardware import Ceilings, measure_ceilings


@dataclass(frozen=True)
class Lab(plumbing_setup.Runtime):
    """Device, dtype and profile (`plumbing.setup`), and the ceilings chapter 0 measures on that device."""

    @cached_property
    def ceilings(self) -> Ceilings:
        """This device's measured ceilings (chapter 0 measures them; later chapters read them from the cache)."""
        return measure_ceilings(self.device)


def setup(seed: int = 0, verbose: bool = True) -> Lab:
    """Seed torch, choose device, dtype and profile, and print them with the library versions."""
    runtime = plumbing_setup.setup(seed, verbose)
    return Lab(runtime.device, runtime.dtype, runtime.profile)
