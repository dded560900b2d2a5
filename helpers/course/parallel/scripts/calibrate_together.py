"""A rank of chapter 10's calibration under sharing: every rank times the step model's probes at the same moment,
so each measures the rates it gets while the others stream weights from the same memory.

Arguments: dtype, passes, timeout_s. Returns the rank's Calibration as a dict."""

import rank_common


def main(args: dict) -> dict:
    rank_common.start(args["timeout_s"])
    from dataclasses import asdict

    import torch
    import torch.distributed as dist

    from helpers.course.step_time.calibration import measure_calibration

    dist.barrier()  # start together
    calibration = measure_calibration(torch.device("cpu"), getattr(torch, args["dtype"]), passes=args["passes"])
    dist.barrier()  # nobody leaves while another still measures
    return asdict(calibration)


if __name__ == "__main__":
    rank_common.run(main)
