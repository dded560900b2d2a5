"""Chapter 10, a tensor-parallel decode step, predicted and timed.

transformers' Llama plan (`tp_plan="auto"`) splits each layer's Q, K, V, gate and up projections by columns and
its O and down projections by rows, and the LM head by vocabulary: a rank holds n_heads / tp query heads,
n_kv_heads / tp KV heads, d_ff / tp of the MLP and vocab / tp of the head. Each row-split projection ends in an
all-reduce of its partial sums, two per layer, and the head's logits are gathered once per step. So a rank's
step is the step of a narrower model (`rank_spec`), priced by the step model, plus
- 2 x n_layers all-reduces of tokens x d_model values,
- one all-gather of sequences x vocab logits,
each at its alpha-beta cost (`collectives`). Newer transformers also split the input embedding by vocabulary
(5.24 does, 5.17 does not): its partial lookups are summed by one more all-reduce. `TPPlan.from_plan(model.tp_plan)`
reads which collectives a model's own plan implies (`TPPlan.of(spec)` builds the model on the meta device first)."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import pandas as pd
import torch

from ...plumbing.device import DTYPES, bytes_per_element, default_dtype, dtype_name, synchronize
from ...plumbing.models import ModelSpec, architecture_spec, build_config
from ...plumbing.validate import positive_int
from ..hardware import GPUSpec
from ..hardware.links import AlphaBeta, Link
from ..step_time import Calibration, calibrate, step_roofline, work_terms
from ..step_time.calibrated import check_step
from ..step_time.calibration import calibration_from_dict
from .collectives import CollectiveClock
from .launch import threads_per_rank


def rank_spec(spec: ModelSpec, tp: int) -> ModelSpec:
    """The model one of `tp` ranks runs under the Llama-style plan: heads, KV heads, d_ff and vocab split by tp."""
    tp = positive_int("tp", tp)
    if spec.n_experts or spec.kv_lora_rank or spec.family == "gpt2":
        raise ValueError(f"spec must be a dense Llama-style model (GQA/MHA, gated MLP), got {spec.name!r} "
                         f"({spec.family}, {spec.attention})")
    split = dict(n_heads=spec.n_heads, n_kv_heads=spec.n_kv_heads, d_ff=spec.d_ff, vocab_size=spec.vocab_size)
    uneven = {name: value for name, value in split.items() if value % tp}
    if uneven:
        raise ValueError(f"tp must divide {', '.join(f'{k}={v}' for k, v in uneven.items())} of {spec.name}, got {tp}")
    if tp == 1:
        return spec
    return architecture_spec(spec, name=f"{spec.name}, 1 of {tp} ranks",
                             **{name: value // tp for name, value in split.items()})


@dataclass(frozen=True)
class TPPlan:
    """The collectives a tensor-parallel plan puts in every forward."""

    layer_allreduces: int = 2  # row-split projections per layer (o_proj, down_proj): each sums partial outputs
    embedding_allreduce: bool = False  # a vocabulary-split embedding: the partial lookups are summed
    head_gather: bool = True  # a vocabulary-split LM head whose logits are gathered

    @classmethod
    def from_plan(cls, plan: dict[str, str]) -> TPPlan:
        """Read a transformers `tp_plan` ({module pattern: style})."""
        layers = {re.sub(r"\.\d+\.", ".*.", k) for k, v in plan.items() if "layers." in k and v.startswith("rowwise")}
        return cls(len(layers), any("embed" in k and v == "embedding_rowwise" for k, v in plan.items()),
                   any(k.endswith("lm_head") and v == "colwise_gather_output" for k, v in plan.items()))

    @classmethod
    def of(cls, spec: ModelSpec) -> TPPlan:
        """The plan installed transformers gives `spec`'s architecture (built on the meta device)."""
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(build_config(spec))
        return cls.from_plan(model.tp_plan)

    def allreduces(self, n_layers: int) -> int:
        """All-reduces per forward of a model of `n_layers` layers."""
        return self.layer_allreduces * n_layers + self.embedding_allreduce


def comm_terms(spec: ModelSpec, tp: int, tokens: int, sequences: int, bytes_per_elem: int, allreduce: AlphaBeta,
               allgather: AlphaBeta | None = None, plan: TPPlan = TPPlan()) -> list[dict]:
    """The collectives of one step of `tokens` new tokens from `sequences` sequences, as step-model rows: the
    plan's all-reduces of tokens x d_model values, and its gather of sequences x vocab logits (with `allgather`)."""
    if positive_int("tp", tp) == 1:
        return []
    n, message = plan.allreduces(spec.n_layers), tokens * spec.d_model * bytes_per_elem
    rows = [dict(group=f"all-reduce ({n} x {message:,} B)", flops=0, bytes=n * message, compute_s=0.0,
                 memory_s=0.0, overhead_s=0.0, time_s=n * allreduce(message))]
    if plan.head_gather and allgather is not None:
        logits = sequences * spec.vocab_size * bytes_per_elem
        rows.append(dict(group=f"all-gather of the logits ({logits:,} B)", flops=0, bytes=logits, compute_s=0.0,
                         memory_s=0.0, overhead_s=0.0, time_s=allgather(logits)))
    return rows


def tp_step_breakdown(spec: ModelSpec, tp: int, batch: int, context: int, calibration: Calibration,
                      allreduce: AlphaBeta | None = None, allgather: AlphaBeta | None = None,
                      plan: TPPlan = TPPlan()) -> pd.DataFrame:
    """One rank's decode step of `batch` sequences at `context`: the step model's rows for the rank's share of
    the model, then the collectives (tp > 1 needs `allreduce`). Column `part`: compute or communication."""
    check_step(spec, 1, context, batch)
    if tp > 1 and allreduce is None:
        raise ValueError("allreduce must be given (an AlphaBeta) when tp > 1")
    work = [(1, context)] * batch
    compute = pd.DataFrame(work_terms(rank_spec(spec, tp), work, calibration)).assign(part="compute")
    b = bytes_per_element(DTYPES[calibration.dtype])
    comm = pd.DataFrame(comm_terms(spec, tp, batch, batch, b, allreduce, allgather, plan)).assign(part="communication")
    return pd.concat([compute, comm], ignore_index=True) if len(comm) else compute


def spec_tp_step(spec: ModelSpec, tp: int, batch: int, context: int, gpu: GPUSpec, link: Link,
                 bytes_per_elem: int = 2, plan: TPPlan = TPPlan()) -> dict[str, float]:
    """A decode step on `tp` GPUs from spec sheets only: each rank's roofline (its share of the weights and KV at
    the GPU's peak rates) plus the collectives over `link`, in seconds."""
    work = [(1, context)] * batch
    rank = step_roofline(rank_spec(spec, tp), work, gpu.peak_flops, gpu.bandwidth, bytes_per_elem)
    comm = pd.DataFrame(comm_terms(spec, tp, batch, batch, bytes_per_elem, link.allreduce(tp), link.allgather(tp),
                                   plan))
    comm_s = float(comm.time_s.sum()) if len(comm) else 0.0
    return {"compute_s": rank.time_s, "comm_s": comm_s, "step_s": rank.time_s + comm_s}


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with torch on `n` threads, then restore the count."""
    before = torch.get_num_threads()
    torch.set_num_threads(positive_int("n", n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def shared_calibration(rank: Calibration, machine: Calibration, nproc: int) -> Calibration:
    """A guess at a rank's rates when `nproc` ranks run at once on one machine, from two calibrations alone: each
    rate of the rank's own, but at most 1 / nproc of the machine's (all its threads at once). Streaming weights,
    one thread can take most of a machine's memory bandwidth, and the ranks then share it; computing, each rank
    keeps its own cores. `together_calibration` measures what the guess assumes."""
    n = positive_int("nproc", nproc)
    table = {layout: tuple(min(r, m / n) for r, m in zip(rates, machine.matmul_flops[layout], strict=True))
             for layout, rates in rank.matmul_flops.items()}
    capped = {name: min(getattr(rank, name), getattr(machine, name) / n)
              for name in ("read_bandwidth", "elementwise_bandwidth", "cache_bandwidth", "attention_flops",
                          "fresh_bandwidth")}
    # the allocator's threshold is each process's own, not a rate to share
    return replace(rank, matmul_flops=table, fresh_threshold=min(rank.fresh_threshold, machine.fresh_threshold),
                   **capped)


def slowest_of(calibrations: list[Calibration]) -> Calibration:
    """Rate by rate, the slowest of several ranks' calibrations (each operator call the dearest): a collective
    waits for the last rank to arrive, so the step goes at the slowest rank's pace."""
    if not calibrations:
        raise ValueError("calibrations must hold at least one Calibration, got none")
    first = calibrations[0]
    table = {layout: tuple(map(min, *(c.matmul_flops[layout] for c in calibrations))) for layout in first.matmul_flops}
    rates = {name: min(getattr(c, name) for c in calibrations)
             for name in ("read_bandwidth", "elementwise_bandwidth", "cache_bandwidth", "attention_flops",
                          "fresh_bandwidth", "fresh_threshold")}  # a rank with no fresh pages: none
    overhead = {family: max(c.op_overhead_s[family] for c in calibrations) for family in first.op_overhead_s}
    stream = tuple(map(min, *(c.stream_bandwidth for c in calibrations))) if first.stream_bandwidth else ()
    measured = {label: max(c.measured.get(label, 0.0) for c in calibrations) for label in first.measured}
    return replace(first, matmul_flops=table, op_overhead_s=overhead, stream_bandwidth=stream, measured=measured,
                   expert_walk_s=max(c.expert_walk_s for c in calibrations),
                   expert_call_s=max(c.expert_call_s for c in calibrations), **rates)


def together_calibration(nproc: int, dtype: torch.dtype | None = None, passes: int = 2,
                         timeout_s: float = 300.0) -> Calibration:
    """The step model's calibration of one of `nproc` ranks on this CPU, measured in all of them at once (a rank
    script under torchrun, `threads_per_rank` threads each, every rank starting its probes at the same moment):
    the rates a rank gets while the others run the same probes on the same memory. The ranks drift apart probe
    by probe, so this bounds the sharing from below. The slowest rank's (`slowest_of`); tens of seconds, not
    cached."""
    from .launch import run_ranks, script_path

    nproc = positive_int("nproc", nproc)
    name = dtype_name(dtype or default_dtype(torch.device("cpu")))
    ranks = run_ranks(script_path("calibrate_together"), {"dtype": name, "passes": passes, "timeout_s": timeout_s},
                      nproc=nproc, timeout_s=timeout_s)
    calibrations = [calibration_from_dict(r) for r in ranks]
    joined = slowest_of(calibrations)
    return replace(joined, device=f"{joined.device}, {nproc} ranks at once",
                   seconds=max(c.seconds for c in calibrations))


def rank_calibration(nproc: int, device: str = "cpu", dtype: torch.dtype | None = None,
                     shared: bool = True) -> Calibration:
    """The step model's calibration for one of `nproc` ranks. On a CPU, with `shared`: measured in all the ranks
    at once (`together_calibration`); without, calibrated at the threads each rank gets with the machine to itself
    (cached as a device of its own, e.g. '... (1 threads)'). On a GPU, one GPU's (each rank has its own)."""
    if torch.device(device).type != "cpu":
        return calibrate(device, dtype=dtype)
    if shared:
        return together_calibration(nproc, dtype)
    with torch_threads(threads_per_rank(nproc)):
        return calibrate(device, dtype=dtype)


# tensor subclasses' own work: DTensor's wrapping and redistribution (PythonSubclass is also the dispatch of the
# functional collectives' async results)
DTENSOR_OPS = ("Redistribute", "PythonSubclass", "_FromTorchTensor", "_ToTorchTensor")
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear")


def operator_kind(name: str) -> str:
    """Which part of a tensor-parallel step a profiled operator belongs to."""
    if name.startswith(("c10d::", "_c10d_functional::", "gloo:", "nccl:", "record_param_comms")):
        return "collectives"
    if name in DTENSOR_OPS:
        return "DTensor: wrapping, redistributing"
    return "matrix products" if name in MATMUL_OPS else "other operators"


def profile_by_kind(profile: pd.DataFrame) -> pd.DataFrame:
    """A rank's profiled operators (columns operator and self_ms, per step) added up by `operator_kind`: host time
    inside the operators themselves, not in what they call (a call counted once). Calls are not added up: an
    operator that calls another (aten::linear -> aten::matmul -> aten::mm) would count one product thrice."""
    if len(profile) == 0 or not {"operator", "self_ms"} <= set(profile.columns):
        raise ValueError(f"profile must be a non-empty table with columns operator and self_ms, got columns "
                         f"{list(profile.columns)} and {len(profile)} rows")
    kinds = profile.assign(kind=profile.operator.map(operator_kind)).groupby("kind")[["self_ms"]].sum()
    return kinds.sort_values("self_ms", ascending=False)


def time_steps(step: Callable[[], object], warmup: int, repeats: int, clock: CollectiveClock | None = None,
               device: torch.device | str = "cpu") -> list[dict]:
    """Run `repeats` steps after `warmup`, each stamped on the machine's shared clock with the collectives in it.

    A fixed count (no adaptive timer): every rank must call its collectives as often as the others. Each step is
    {"start", "end", "calls": [[op, entered, done, bytes], ...]}; `step_table` reads them."""
    for _ in range(warmup):
        step()
    synchronize(device)
    steps = []
    for _ in range(positive_int("repeats", repeats)):
        if clock is not None:
            clock.take()
        start = time.perf_counter()
        step()
        synchronize(device)
        steps.append({"start": start, "end": time.perf_counter(),
                      "calls": [list(call) for call in clock.take()] if clock is not None else []})
    return steps


def step_table(ranks: list[list[dict]]) -> pd.DataFrame:
    """One row per rank and step from `time_steps` of every rank (the same steps, in the same order).

    A collective finishes for all ranks together, after the last one has entered it. So each rank's time inside
    its collectives splits into waiting for the last rank to arrive (`wait_s`) and the transfer after that
    (`transfer_s`); what is left of its step is its own work (`compute_s`)."""
    if len({len(steps) for steps in ranks}) != 1:
        raise ValueError(f"ranks must hold the same number of steps each, got {[len(s) for s in ranks]}")
    rows = []
    for i, same_step in enumerate(zip(*ranks, strict=True)):
        if len({len(s["calls"]) for s in same_step}) != 1:
            raise ValueError(f"step {i}: the ranks recorded different numbers of collectives")
        last_in = [max(s["calls"][k][1] for s in same_step) for k in range(len(same_step[0]["calls"]))]
        for rank, s in enumerate(same_step):
            row = {"rank": rank, "step": i, "step_s": s["end"] - s["start"]}
            for op in ("all_reduce", "all_gather"):
                mine = [(c, t) for c, t in zip(s["calls"], last_in, strict=True) if c[0] == op]
                row[f"{op}_calls"] = len(mine)
                row[f"{op}_bytes"] = mine[0][0][3] if mine else 0
                row[f"{op}_wait_s"] = sum(t - c[1] for c, t in mine)
                row[f"{op}_transfer_s"] = sum(c[2] - t for c, t in mine)
            row["compute_s"] = row["step_s"] - sum(row[f"{op}_{part}_s"] for op in ("all_reduce", "all_gather")
                                                   for part in ("wait", "transfer"))
            rows.append(row)
    return pd.DataFrame(rows)


def shard_shapes(model: torch.nn.Module, layer: int = 0) -> list[dict]:
    """The shape each weight of one layer, the embedding and the LM head has in full and on this rank."""
    rows = []
    for name, param in model.named_parameters():
        if f"layers.{layer}." in name or "embed_tokens" in name or name.startswith("lm_head"):
            local = param.to_local() if hasattr(param, "to_local") else param  # a DTensor holds its shard
            rows.append({"weight": name, "full": list(param.shape), "this rank": list(local.shape)})
    return rows
