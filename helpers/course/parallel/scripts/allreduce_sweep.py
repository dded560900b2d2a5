"""A rank of chapter 10's communication sweep: time all-reduce and all-gather at each message size.

Arguments: device ("cpu": gloo, "cuda": NCCL), sizes (bytes), ops ("all_reduce", "all_gather"), gaps (seconds of
busy work before each call: 0 times the calls back to back, more times them the way a step issues them, after
its own work), warmup and repeats, timeout_s. Both ranks run the same calls in the same order (a collective waits
for every rank), in rounds over every size; each call is timed on its own, the work before it left out. An
all-gather's message is its output. Besides the quartiles, each row counts the slow calls: those over twice the
lower quartile, which waited for something besides the link (on a CPU, mostly for the scheduler to run a
thread that was ready)."""

import statistics
import time

import rank_common

SLOW = 2.0  # a call over this many times its size's lower quartile counts as slow


def elements(nbytes: int, world: int) -> int:
    """float32 elements of a message of about `nbytes` bytes: a multiple of the world size, at least one each."""
    return max(world, nbytes // 4 // world * world)


def collective(op: str, nbytes: int, device: str):
    """A call that runs `op` once on a message of about `nbytes` bytes (and waits for it, on a GPU too)."""
    import torch
    import torch.distributed as dist

    world = dist.get_world_size()
    n = elements(nbytes, world)
    sync = torch.cuda.synchronize if device == "cuda" else lambda: None
    if op == "all_reduce":
        x = torch.ones(n, device=device)
        return lambda: (dist.all_reduce(x), sync())
    shard, out = torch.ones(n // world, device=device), torch.empty(n, device=device)
    return lambda: (dist.all_gather_into_tensor(out, shard), sync())


def busy(seconds: float) -> None:
    """Keep this core busy for `seconds`, as a layer's compute would."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def main(args: dict) -> dict:
    rank, world = rank_common.start(args["timeout_s"], args["device"])
    import torch.distributed as dist

    calls = {(op, n, gap): collective(op, int(n), args["device"])
             for gap in args["gaps"] for op in args["ops"] for n in args["sizes"]}
    for call in calls.values():
        for _ in range(args["warmup"]):
            call()
    dist.barrier()
    times = {key: [] for key in calls}
    for _ in range(args["repeats"]):  # rounds over every size: a disturbance falls on all sizes alike
        for (op, n, gap), call in calls.items():
            busy(gap)
            start = time.perf_counter()
            call()
            times[op, n, gap].append(time.perf_counter() - start)
    rows = []
    for (op, nbytes, gap), seconds in times.items():
        q = statistics.quantiles(seconds, n=4, method="inclusive") if len(seconds) > 1 else seconds * 3
        rows.append({"op": op, "gap_s": gap, "bytes": elements(int(nbytes), world) * 4, "rank": rank,
                     "median_s": statistics.median(seconds), "mean_s": statistics.fmean(seconds), "q25_s": q[0],
                     "q75_s": q[2], "slow_share": sum(t > SLOW * q[0] for t in seconds) / len(seconds),
                     "runs": len(seconds)})
    return {"rank": rank, "world": world, "rows": rows}


if __name__ == "__main__":
    rank_common.run(main)
