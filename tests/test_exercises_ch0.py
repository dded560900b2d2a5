"""Chapter 0's exercises: the right answer is accepted, a wrong one is reported wrong."""

import pytest

import helpers
from helpers.course.formulas import arithmetic_intensity, matmul_bytes, matmul_flops


def test_fp32_ridge_of_an_a100(capsys):
    # 19.5 TFLOP/s of plain fp32 over 2,039 GB/s: about 9.6 FLOP/byte, not the bf16 ridge of 153
    helpers.check_exercise("0.1", 9.6)
    assert capsys.readouterr().out.startswith("Correct")
    helpers.check_exercise("0.1", 153)
    assert capsys.readouterr().out.startswith("Not quite")


def test_reading_gpt2_large_uses_the_bandwidth_given(capsys):
    # 773 M matrix parameters (774 M less 1.3 M position embeddings) x 2 bytes at 20 GB/s: about 77.3 ms
    helpers.check_exercise("0.2", 77.3, bandwidth=20e9)
    assert capsys.readouterr().out.startswith("Correct")
    helpers.check_exercise("0.2", 77.3, bandwidth=40e9)
    assert capsys.readouterr().out.startswith("Not quite")


def test_square_matmul_on_h100_is_compute_bound(capsys):
    n = 4096
    intensity = arithmetic_intensity(matmul_flops(n, n, n), matmul_bytes(n, n, n, 2))
    assert intensity > helpers.gpu_spec("H100 SXM").ridge_point  # so "compute" is the right choice
    helpers.check_exercise("0.3", "compute")
    assert capsys.readouterr().out.startswith("Correct")
    helpers.check_exercise("0.3", "memory")
    assert capsys.readouterr().out.startswith("Not quite")
    with pytest.raises(ValueError):
        helpers.check_exercise("0.3", "cache")


def test_unanswered_says_so(capsys):
    helpers.check_exercise("0.2", None, bandwidth=20e9)
    assert capsys.readouterr().out.startswith("Not answered yet")


def test_copy_time_counts_read_and_written_bytes(capsys):
    # 96 MiB copied at 20 GB/s (counted read + write): 2 x 100.7e6 / 20e9 s, about 10.1 ms
    helpers.check_exercise("0.4", 10.07, nbytes=96 * 2**20, bandwidth=20e9)
    assert capsys.readouterr().out.startswith("Correct")
    helpers.check_exercise("0.4", 5.03, nbytes=96 * 2**20, bandwidth=20e9)  # the bytes counted once
    assert capsys.readouterr().out.startswith("Not quite")
