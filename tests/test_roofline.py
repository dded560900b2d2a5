"""Unit tests for helpers.roofline: costs, intensities, tables, op and FLOP counts, GPT-2 blocks."""

import math

import pandas as pd
import pytest
import torch

import helpers
from helpers.course.formulas import critical_tokens, matmul_intensity
from helpers.course.roofline import (
    OpCost,
    beats_roof,
    bound_by,
    count_flops,
    count_ops,
    gpt2_blocks,
    gpu_ridge_table,
    matmul_cost,
    predicted_time,
    roofline_row,
    roofline_table,
    rotating_matmul,
    rotating_weights,
    vector_add_cost,
)
from helpers.plumbing.timing import Timing


def test_vector_add_cost_counts_one_flop_and_three_elements():
    cost = vector_add_cost(1000, 4)
    assert (cost.flops, cost.nbytes) == (1000, 12000)
    assert cost.intensity == pytest.approx(1 / 12)
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        vector_add_cost(0, 4)


def test_matmul_cost_matches_formulas_and_labels_matvec():
    cost = matmul_cost(1, 768, 3072, 2)
    assert cost.flops == 2 * 768 * 3072
    assert cost.nbytes == 2 * (768 + 768 * 3072 + 3072)
    assert cost.label.startswith("matrix-vector")
    assert matmul_cost(8, 768, 3072, 2).label.startswith("matmul")


@pytest.mark.parametrize("tokens", [1, 7, 64, 4096])
def test_matmul_intensity_equals_cost_intensity(tokens):
    assert matmul_intensity(tokens, 768, 3072, 4) == pytest.approx(matmul_cost(tokens, 768, 3072, 4).intensity)


def test_intensity_is_about_tokens_in_bf16_for_small_batches():
    assert matmul_intensity(8, 8192, 28672, 2) == pytest.approx(8, rel=0.01)
    assert matmul_intensity(8, 8192, 28672, 4) == pytest.approx(4, rel=0.01)


def test_critical_tokens_inverts_intensity_and_reports_unreachable():
    batch = critical_tokens(4096, 14336, 295, 2)
    assert matmul_intensity(batch, 4096, 14336, 2) == pytest.approx(295)
    assert 295 < batch < 330
    assert math.isinf(critical_tokens(64, 64, 1000, 2))  # a 64 x 64 weight never gets that intense
    with pytest.raises(ValueError, match="ridge"):
        critical_tokens(64, 64, 0, 2)


def test_predicted_time_and_bound():
    cost = OpCost("x", flops=1000, nbytes=100)
    assert predicted_time(cost, peak_flops=100, bandwidth=100) == 10  # compute: 10 s vs memory 1 s
    assert bound_by(cost, 100, 100) == "compute"
    assert bound_by(cost, 1e6, 1) == "memory"


def test_roofline_row_and_beats_roof():
    cost = OpCost("add", flops=100, nbytes=1000)
    slow = Timing(median=20.0, q25=19.0, q75=21.0, min=18.0, max=22.0, runs=5)
    fast = Timing(median=1.0, q25=0.9, q75=1.1, min=0.9, max=1.1, runs=5)
    row = roofline_row(cost, slow, peak_flops=1e9, bandwidth=100)  # memory-bound, predicted 10 s
    assert row["bound"] == "memory" and row["predicted_s"] == 10
    assert row["pct_of_ceiling"] == pytest.approx(50)
    assert (row["measured_s"], row["iqr_s"], row["min_s"]) == (20.0, 2.0, 18.0)
    table = roofline_table([(cost, slow), (cost, fast)], 1e9, 100)
    assert list(beats_roof(table).index) == [1]
    assert beats_roof(table.iloc[:1]).empty


def test_rotating_weights_cover_the_requested_bytes_and_cycle():
    weights = rotating_weights(16, 32, total_bytes=10_000, dtype=torch.float32, device="cpu")
    assert len(weights) == math.ceil(10_000 / (16 * 32 * 4))
    assert all(w.shape == (16, 32) for w in weights)
    x = torch.ones(2, 16)
    step = rotating_matmul(x, weights[:2])
    first, second, third = step(), step(), step()
    assert torch.allclose(first, x @ weights[0]) and torch.allclose(second, x @ weights[1])
    assert torch.allclose(third, first)


def test_count_flops_agrees_with_matmul_flops():
    x, w = torch.randn(3, 5), torch.randn(5, 7)
    assert count_flops(lambda: x @ w) == {"mm": helpers.matmul_flops(3, 5, 7)}


def test_count_ops_counts_each_dispatched_operator():
    a = torch.randn(4)
    assert count_ops(lambda: (a + 1) * 2) == 2


def test_count_ops_leaves_out_views_and_allocations():
    a, w = torch.randn(2, 3, 4), torch.randn(4, 5)
    step = lambda: (a.view(6, 4).t().t() @ w).reshape(2, 3, 5).transpose(0, 1) + 1  # noqa: E731
    assert count_ops(step) == 2  # the matmul and the add: view, t, reshape, transpose launch nothing
    assert count_ops(step, views=True) > count_ops(step)
    assert count_ops(lambda: torch.empty(8)) == 0


def test_gpt2_blocks_shape_params_and_flops():
    spec = helpers.model_spec("gpt2")
    stack = gpt2_blocks(spec, 2, "cpu", torch.float32, attention="eager")
    n = sum(p.numel() for p in stack.parameters())
    assert n == 2 * 7_087_872  # 12 d^2 weights plus biases and layer norms per block
    x = torch.randn(1, 8, spec.d_model)
    with torch.no_grad():
        counted = count_flops(lambda: stack(x))
        assert stack(x).shape == x.shape
    linear = 2 * 8 * (4 * 768**2 + 2 * 768 * 3072)
    assert counted["addmm"] == 2 * linear
    assert counted["bmm"] == 2 * 4 * 8 * 8 * 768
    with pytest.raises(ValueError, match="GPT-2"):
        gpt2_blocks(helpers.model_spec("llama-3-8b"), 1)


def test_gpu_ridge_table_lists_every_gpu():
    table = gpu_ridge_table(helpers.GPU_SPECS, {"big": (8192, 28672), "tiny": (64, 64)})
    assert isinstance(table, pd.DataFrame) and len(table) == len(helpers.GPU_SPECS)
    h100 = table.set_index("GPU").loc["H100 SXM"]
    assert h100["ridge (FLOP/byte)"] == 295
    assert 295 <= h100["batch for big"] < 320
    assert h100["batch for tiny"] == "never"


def test_decode_of_a_large_weight_turns_compute_bound_near_the_ridge():
    # Moved from chapter 1's notebook (pure arithmetic on the spec table): within 15% of the ridge point.
    table = gpu_ridge_table(helpers.GPU_SPECS, {"llama": (4096, 14336)}).set_index("GPU")
    assert 1.0 <= table.loc["H100 SXM", "batch for llama"] / helpers.gpu_spec("H100 SXM").ridge_point < 1.15


def test_gpt2_weight_reaches_every_ridge_in_the_table():
    # A 768 x 3072 weight tops out at 1 / (1/768 + 1/3072) = 614 FLOP/byte in bf16, above every ridge listed.
    limit = matmul_intensity(math.inf, 768, 3072, 2)
    assert limit == pytest.approx(614.4)
    assert all(spec.ridge_point < limit for spec in helpers.GPU_SPECS.values())


def test_intensity_grows_with_tokens_and_is_about_2b_over_bytes_for_small_b():
    # Moved from chapter 1's notebook: identities of the formula, not measurements.
    values = [matmul_intensity(b, 768, 3072, 4) for b in (1, 2, 8, 32, 128, 512)]
    assert values == sorted(values)
    assert all(0.95 < matmul_intensity(b, 768, 3072, 4) / (2 * b / 4) <= 1 for b in (1, 2, 8, 24))


def test_plot_matmul_on_roofline_draws_without_measuring():
    from helpers.course.hardware import Ceilings
    from helpers.course.roofline import plot_matmul_on_roofline

    ceilings = Ceilings("cpu", 10e9, {"float32": 100e9}, "float32", 12e9)
    ax = plot_matmul_on_roofline(ceilings, "cpu", "test", n_tokens=4, measure=False)
    assert "intensity" in ax.get_title()
