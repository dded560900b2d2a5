"""A rank of chapter 10's tensor-parallel decode: the saved model loaded with transformers' own tensor parallelism
(`from_pretrained(folder, tp_plan="auto")`), its shard shapes, greedy tokens, and decode steps timed with the
collectives inside them.

Arguments: folder, prompts (token ids, one row per sequence), new_tokens, batches, warmup, repeats, timeout_s,
device, dtype, profile_steps. Every rank runs the same calls in the same order. Rank 0 also returns the logits of
the first prompt's last position, to set beside the unsharded model's, and torch.profiler's operators over
`profile_steps` more steps at the first batch (host time per step; none if 0)."""

import logging

import rank_common

for name in ("torchao", "torch.utils._pytree", "transformers"):  # import-time notices, once per rank
    logging.getLogger(name).setLevel(logging.ERROR)


def main(args: dict) -> dict:
    rank, world = rank_common.start(args["timeout_s"], args["device"])
    import torch
    from transformers import AutoModelForCausalLM

    from helpers.course.parallel.collectives import CollectiveClock
    from helpers.course.parallel.tp_step import shard_shapes, time_steps
    from helpers.course.phases import fixed_context_step, greedy_generate

    model = AutoModelForCausalLM.from_pretrained(args["folder"], tp_plan="auto", dtype=getattr(torch, args["dtype"]))
    model = model.eval().requires_grad_(False)
    prompts = torch.tensor(args["prompts"], device=model.device)  # (max batch, context)
    tokens = greedy_generate(model, prompts[:1], args["new_tokens"])
    with torch.no_grad():
        logits = model(prompts[:1]).logits[0, -1].float().cpu().tolist()  # (vocab,): gathered, on every rank
    steps = []
    with CollectiveClock() as clock:
        for batch in args["batches"]:
            step = fixed_context_step(model, prompts[:batch])  # prefill once; each call a decode step
            steps.append({"batch": batch, "steps": time_steps(step, args["warmup"], args["repeats"], clock,
                                                             model.device)})
    profile = operator_profile(fixed_context_step(model, prompts[: args["batches"][0]]), args.get("profile_steps", 0))
    return {"rank": rank, "world": world, "threads": torch.get_num_threads(), "shapes": shard_shapes(model),
            "tokens": tokens, "logits": logits if rank == 0 else None, "steps": steps,
            "profile": profile if rank == 0 else None}


def operator_profile(step, n_steps: int) -> list[dict]:
    """Each operator's host time and calls per step over `n_steps` steps under torch.profiler (every rank runs
    the steps: their collectives need the others)."""
    from torch.profiler import ProfilerActivity, profile

    if n_steps <= 0:
        return []
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n_steps):
            step()
    return [{"operator": e.key, "self_ms": e.self_cpu_time_total / 1e3 / n_steps, "calls": e.count / n_steps}
            for e in prof.key_averages()]


if __name__ == "__main__":
    rank_common.run(main)
