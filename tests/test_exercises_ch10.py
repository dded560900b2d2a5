"""Chapter 10's exercises: each answer checked against hand arithmetic, and a wrong one refused."""

from helpers import check_exercise


def test_allreduce_time_from_the_printed_fit(capsys):
    context = dict(alpha_us=150.0, bandwidth_gbs=1.0, allreduces=9, batch=64, d_model=512, bytes_per_elem=4)
    check_exercise("10.1", 9 * (150e-6 + 64 * 512 * 4 / 1e9) * 1e3, **context)  # 2.53 ms
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise("10.1", 9 * 150e-6 * 1e3, **context)  # the latency alone: 131 KB a message forgotten
    assert capsys.readouterr().out.startswith("Not quite")
    check_exercise("10.1", (150e-6 + 64 * 512 * 4 / 1e9) * 1e3, **context)  # one all-reduce instead of nine
    assert capsys.readouterr().out.startswith("Not quite")


def test_spec_sheet_tp_step(capsys):
    context = dict(model="llama-3-70b", gpu="H100 SXM", link="NVLink 4 (H100 SXM)", tp=2)
    weights = (70_553_706_496 - 128256 * 8192) * 2  # bf16 matrices; the input embedding is a lookup
    comm = 160 * (10e-6 + 8192 * 2 / 450e9)  # 2 x 80 layers, 16 KiB each over NVLink
    check_exercise("10.2", (weights / 2 / 3.35e12 + comm) * 1e3, **context)  # about 22.4 ms
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise("10.2", weights / 2 / 3.35e12 * 1e3, **context)  # communication left out: 6% short
    assert capsys.readouterr().out.startswith("Not quite")


def test_spec_sheet_tp_step_on_four_gpus(capsys):
    context = dict(model="llama-3-70b", gpu="H100 SXM", link="NVLink 4 (H100 SXM)", tp=4)
    weights = (70_553_706_496 - 128256 * 8192) * 2
    comm = 160 * (10e-6 + 1.5 * 8192 * 2 / 450e9)  # a ring of four moves 2 x 3/4 of the message
    check_exercise("10.4", (weights / 4 / 3.35e12 + comm) * 1e3, **context)  # about 12.0 ms
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise("10.4", 22.35 / 2, **context)  # half of two GPUs' step: the collectives halved too
    assert capsys.readouterr().out.startswith("Not quite")


def test_pipeline_bubble(capsys):
    check_exercise("10.3", 3 / 11, stages=4, micro_batches=8)
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise("10.3", 3 / 8, stages=4, micro_batches=8)  # (p - 1) / m: the drain forgotten
    assert capsys.readouterr().out.startswith("Not quite")
