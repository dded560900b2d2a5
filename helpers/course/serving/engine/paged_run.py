"""Chapter 6, the in-process engine: `model.generate_batch` (continuous batching over a paged KV cache), run
once per cache setting, with the cache the engine really allocated read back from it, and every forward pass
it ran recorded (tokens and sequences per step): the engine's scheduling, measured."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ....plumbing.compat import paged_cache_bytes, paged_config
from ....plumbing.logs import quiet_logger
from ....plumbing.validate import positive_int


@dataclass(frozen=True)
class PagedRun:
    """One generate_batch run: the blocks asked for, what the engine allocated, and how long the run took."""

    block_size: int  # tokens per block (the engine's page size)
    blocks_asked: int
    blocks: int  # whole-model blocks the engine's cache holds
    cache_bytes: int  # bytes of the engine's one cache tensor (its two unused "trash" sectors included)
    sector_bytes: int  # the engine's allocation unit
    seconds: float
    tokens: list[list[int]]  # generated tokens per request, in the order of the prompts
    step_tokens: list[int]  # tokens of each forward pass the engine ran (prefill chunks and decodes together)
    step_sequences: list[int]  # sequences in each forward pass
    step_seconds: list[float]  # wall time of each forward pass (the model runs on the CPU: no queue to drain)
    step_gaps: list[float]  # wall time between one forward's end and the next one's start: the engine's own work

    @property
    def steps(self) -> int:
        """Forward passes the engine ran."""
        return len(self.step_tokens)


class StepRecorder:
    """Records each forward pass of a continuous-batching model: its tokens, how many sequences they come from, and
    the keys its attention reads.

    The engine packs every sequence of a step into one row and passes their boundaries (`cu_seq_lens_q`, and
    `cu_seq_lens_k` per layer type for the keys: cache and new tokens)."""

    def __init__(self, model) -> None:
        self.starts: list[float] = []  # time.perf_counter() at each forward's start
        self.tokens: list[int] = []
        self.sequences: list[int] = []
        self.kv_tokens: list[int] = []  # keys of the step, all sequences together (the most of any layer type)
        self.seconds: list[float] = []
        self.gaps: list[float] = []
        self._start = self._end = 0.0
        self._handles = [model.register_forward_pre_hook(self._before, with_kwargs=True),
                         model.register_forward_hook(self._after)]

    def _before(self, _module, args, kwargs) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        bounds = kwargs.get("cu_seq_lens_q")
        self.tokens.append(int(ids.shape[-1]) if ids is not None else 0)
        self.sequences.append(len(bounds) - 1 if bounds is not None else 1)
        keys = kwargs.get("cu_seq_lens_k")
        keys = [] if keys is None else keys.values() if isinstance(keys, dict) else [keys]
        self.kv_tokens.append(max((int(k[-1]) for k in keys if len(k)), default=self.tokens[-1]))
        self._start = time.perf_counter()
        self.starts.append(self._start)
        if self._end:
            self.gaps.append(self._start - self._end)

    def _after(self, *_: object) -> None:
        self._end = time.perf_counter()
        self.seconds.append(self._end - self._start)

    def remove(self) -> None:
        """Stop recording."""
        for handle in self._handles:
            handle.remove()


def on_new_thread(fn: Callable[[], float]) -> float:
    """Run `fn` on a thread started for it, as `generate_batch` and the server run their engine, and return its
    result (its exception, if it raised one).

    torch runs the parallel part of a CPU kernel on an OpenMP pool of workers, one pool per thread that calls it:
    a thread started after this one ran torch gets a second pool, and timing it shows what that costs."""
    result: dict[str, object] = {}

    def target() -> None:
        try:
            result["value"] = fn()
        except BaseException as error:  # handed to the caller
            result["error"] = error

    thread = threading.Thread(target=target, name="lab-fresh-thread")
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


def run_paged(model, prompts: Sequence[Sequence[int]], generation_config, block_size: int, num_blocks: int,
              block_sharing: bool = True) -> PagedRun:
    """Generate with a paged cache of `num_blocks` blocks of `block_size` tokens and read the cache back.

    `block_sharing`: the engine's prefix caching (on by default): a request whose prompt starts with blocks
    another request already computed reuses them instead of running those tokens again."""
    positive_int("block_size", block_size)
    positive_int("num_blocks", num_blocks)
    config = paged_config(block_size, num_blocks, allow_block_sharing=block_sharing)
    recorder = StepRecorder(model)
    try:  # the engine warns that a persistent manager is sized for these requests: it is destroyed below
        with quiet_logger("ContinuousBatchingLogger"):
            start = time.perf_counter()
            outputs = model.generate_batch([list(p) for p in prompts], generation_config=generation_config,
                                           continuous_batching_config=config, persistent_manager=True)
            seconds = time.perf_counter() - start
    finally:
        recorder.remove()
    try:
        cache = model._cached_continuous_batching_manager.batch_processor.cache  # the engine's PagedAttentionCache
        cache_bytes, sector_bytes = paged_cache_bytes(cache)
        return PagedRun(block_size, num_blocks, int(cache.num_blocks), cache_bytes,
                        sector_bytes, seconds, [out.generated_tokens for out in outputs.values()],
                        recorder.tokens, recorder.sequences, recorder.seconds,
                        recorder.gaps)
    finally:
        model.destroy_cached_continuous_batching_manager()


def step_starts(run: PagedRun) -> np.ndarray:
    """When each forward pass of a run began (s, from the first one's start): forwards and the gaps between."""
    durations = np.add(run.step_seconds, [*run.step_gaps, 0.0])
    return np.concatenate([[0.0], np.cumsum(durations)[:-1]])


def plot_engine_steps(axes, run: PagedRun, simulated: pd.DataFrame, title: str) -> None:
    """The engine's forward passes against the simulator's steps on one clock: sequences (top) and tokens (bottom)."""
    for ax, column, values in ((axes[0], "sequences", run.step_sequences), (axes[1], "tokens", run.step_tokens)):
        ax.step(step_starts(run) * 1e3, values, where="post", label=f"engine: {run.steps} steps")
        ax.step(simulated["start_s"] * 1e3, simulated[column], where="post", ls="--",
                label=f"simulator: {len(simulated)} steps")
        ax.set_ylabel(f"{column} in the step")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylim(0, max(max(run.step_sequences), simulated["sequences"].max()) + 1)
    axes[1].set_yscale("log")
    axes[1].set_xlabel("time from the first step (ms)")
    axes[0].set_title(title, fontsize=9)
    axes[0].legend(fontsize=8)
