"""A rank of chapter 10's tensor-parallel decode: the saved model loaded with transformers' own tensor parallelism
(`from_pretrained(folder, tp_plan="auto")`), its shard shapes, greedy tokens, and decode steps timed with the
collectives inside them.

Arguments: folder, prompts (token ids, one row per sequence), new_tokens, batches, warmup, repeats, timeout_s,
device, dtype. Every rank runs the same calls in the same order. Rank 0 also returns the logits of the first
prompt's last position, to set beside the unsharded model's."""

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
    return {"rank": rank, "world": world, "threads": torch.get_num_threads(), "shapes": shard_shapes(model),
            "tokens": tokens, "logits": logits if rank == 0 else None, "steps": steps}


if __name__ == "__main__":
    rank_common.run(main)
