import json

import pytest
import torch

import helpers


def test_spec_table_rows_and_ridge_points():
    for name in ["T4", "A10G", "L4", "A100 40GB", "A100 80GB SXM", "A100 80GB PCIe", "H100 SXM", "H100 PCIe", "H200",
                 "RTX 4090", "V100 SXM2 16GB", "V100 SXM2 32GB"]:
        assert name in helpers.GPU_SPECS
    assert round(helpers.gpu_spec("H100 SXM").ridge_point) == 295
    assert round(helpers.gpu_spec("H200").ridge_point) == 206
    assert round(helpers.gpu_spec("A100 80GB SXM").ridge_point) == 153
    assert helpers.gpu_spec("H100 SXM").bf16_tflops == 989  # dense, not the 1,979 sparsity figure


@pytest.mark.parametrize("device_name, expected", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H200", "H200"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"), ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
    ("Tesla V100-SXM2-16GB", "V100 SXM2 16GB"), ("Tesla V100-SXM2-32GB", "V100 SXM2 32GB"),
    ("Tesla V100-PCIE-16GB", "V100 PCIe 16GB"), ("NVIDIA A100-PCIE-40GB", "A100 40GB"),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB"), ("Tesla T4", "T4"),
    ("NVIDIA A10G", "A10G"), ("NVIDIA A10", "A10"), ("NVIDIA L4", "L4"), ("NVIDIA L40S", "L40S"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"), ("NVIDIA B200", "B200"), ("NVIDIA B300 SXM6 AC", "B300"),
    ("AMD Instinct MI300X", "MI300X"), ("AMD Instinct MI300X VF", "MI300X"), ("AMD Instinct MI355X", "MI355X"),
])
def test_find_gpu_spec_matches_torch_names(device_name, expected):
    assert helpers.find_gpu_spec(device_name).name == expected


def test_find_gpu_spec_unknown_and_gpu_spec_error():
    assert helpers.find_gpu_spec("Intel(R) Xeon(R) CPU") is None
    with pytest.raises(ValueError, match="name must be one of"):
        helpers.gpu_spec("Z9000")


def test_ridge_point_and_errors():
    assert helpers.ridge_point(100.0, 4.0) == 25.0
    with pytest.raises(ValueError, match="peak_flops must be a number > 0"):
        helpers.ridge_point(0, 1)
    with pytest.raises(ValueError, match="bandwidth must be a number > 0"):
        helpers.ridge_point(1, 0)


def test_measure_bandwidth_plausible_and_validated():
    bw = helpers.measure_bandwidth("cpu", 32 * 2**20)
    assert 1e8 < bw < 1e13
    with pytest.raises(ValueError, match="nbytes"):
        helpers.measure_bandwidth("cpu", 1000)


def test_measure_matmul_flops_plausible_and_validated():
    flops = helpers.measure_matmul_flops(torch.float32, "cpu", 256)
    assert 1e8 < flops < 1e14
    with pytest.raises(ValueError, match="n must be"):
        helpers.measure_matmul_flops(torch.float32, "cpu", 4)


def test_measure_ceilings_caches_in_lab_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(helpers.course.hardware.ceilings, "measure_bandwidth", lambda device: 10e9)
    monkeypatch.setattr(helpers.course.hardware.ceilings, "measure_peak_flops", lambda dtype, device: 200e9)
    monkeypatch.setattr(helpers.course.hardware.ceilings, "measure_read_bandwidth", lambda device: 12e9)
    first = helpers.measure_ceilings("cpu")
    assert first.ridge_point == 20.0 and first.default_dtype == "float32"
    stored = list(tmp_path.glob("ceilings-*.json"))
    assert len(stored) == 1 and json.loads(stored[0].read_text())["bandwidth"] == 10e9
    monkeypatch.setattr(helpers.course.hardware.ceilings, "measure_bandwidth", lambda device: 99e9)
    assert helpers.measure_ceilings("cpu") == first  # read back, not re-measured
    assert helpers.measure_ceilings("cpu", refresh=True).bandwidth == 99e9


@pytest.mark.parametrize("device_name, expected", [
    ("NVIDIA L40", "L40"), ("NVIDIA H100 NVL", "H100 NVL"), ("NVIDIA L4", "L4"),
])
def test_find_gpu_spec_matches_names_strictly(device_name, expected):
    assert helpers.find_gpu_spec(device_name).name == expected


@pytest.mark.parametrize("device_name", [
    "NVIDIA GH200 480GB", "NVIDIA H200 NVL", "Tesla V100S-PCIE-32GB", "NVIDIA A100-SXM4-80GB MIG 7g.80gb",
])
def test_unknown_variant_warns_and_gets_no_neighbours_numbers(device_name):
    with pytest.warns(UserWarning, match="no spec row"):
        assert helpers.find_gpu_spec(device_name) is None


def test_a_cpu_name_finds_no_row_without_a_warning(recwarn):
    assert helpers.find_gpu_spec("AMD EPYC 7763 64-Core Processor (2 threads)") is None
    assert not recwarn.list


def test_variants_keep_their_own_numbers():
    a100_pcie, a100_sxm = helpers.find_gpu_spec("NVIDIA A100 80GB PCIe"), helpers.find_gpu_spec("NVIDIA A100-SXM4-80GB")
    assert (a100_pcie.bandwidth_gbs, a100_sxm.bandwidth_gbs) == (1935, 2039)
    v100_16 = helpers.find_gpu_spec("Tesla V100-SXM2-16GB")
    assert (v100_16.memory_gb, v100_16.bandwidth_gbs, v100_16.bf16_tflops) == (16, 900, 125)
    assert helpers.find_gpu_spec("Tesla V100-PCIE-32GB").bf16_tflops == 112


@pytest.mark.parametrize("name, reported_mib", [
    ("H100 SXM", 81_559), ("T4", 15_360), ("L40S", 46_068), ("L4", 23_034), ("A10G", 23_028), ("RTX 4090", 24_564),
])
def test_gpu_memory_is_what_the_driver_reports(name, reported_mib):
    assert helpers.gpu_spec(name).memory_bytes == reported_mib * 2**20


def test_gpu_memory_rules_where_no_reading_is_stored():
    # HBM: the sold GB read as GiB. GDDR with ECC: 1/16 less (what the T4's and L40S's readings show).
    assert helpers.gpu_spec("H200").memory_bytes == 141 * 2**30
    assert helpers.gpu_spec("A10").memory_bytes == 24 * 2**30 * 15 / 16
    for spec in helpers.GPU_SPECS.values():
        if spec.memory_mib is not None and not spec.hbm and spec.name != "RTX 4090":  # the 4090 has no ECC
            rule = spec.memory_gb * 2**30 * 15 / 16
            assert abs(spec.memory_bytes / rule - 1) < 0.002, spec.name


def test_read_bandwidth_plausible():
    assert 1e8 < helpers.measure_read_bandwidth("cpu", 32 * 2**20) < 1e13


def test_ceilings_drift_makes_a_check_undecided_once_memory_speed_moved(monkeypatch):
    from helpers.course.hardware import ceilings as module
    ceilings = module.Ceilings("cpu", 10e9, {"float32": 1e11}, "float32", 12e9)
    monkeypatch.setattr(module, "measure_bandwidth", lambda device=None: 11e9)
    assert not helpers.ceilings_drift(ceilings, "cpu").busy  # 10% faster now: within 25%
    monkeypatch.setattr(module, "measure_bandwidth", lambda device=None: 5e9)  # half the ceiling now
    moved = helpers.ceilings_drift(ceilings, "cpu")
    assert moved.speed_moved == pytest.approx(1.0) and moved.busy


def test_measure_ceilings_measures_again_where_they_disagree_with_rates_given(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))
    copies = iter([30e9, 10e9, 10e9])  # a fast spell first, then the machine's own speed
    monkeypatch.setattr(helpers.course.hardware.ceilings, "measure_bandwidth", lambda device: next(copies))
    monkeypatch.setattr(helpers.course.hardware.ceilings, "measure_peak_flops", lambda dtype, device: 200e9)
    monkeypatch.setattr(helpers.course.hardware.ceilings, "measure_read_bandwidth", lambda device: 12e9)
    ceilings = helpers.measure_ceilings("cpu", agree_with={"copy": 11e9, "read": 12e9})
    assert ceilings.bandwidth == 10e9 and next(copies) == 10e9  # measured twice, the third left unused
    assert ceilings.against({"copy": 5e9}) == {"copy": 2.0}


def test_a_link_prices_one_message_and_a_prompts_kv_alike():
    from helpers.course.hardware import LINKS, kv_transfer_s

    ethernet = LINKS["Ethernet 100 Gb/s"]
    kv = kv_transfer_s(8192, 131072, ethernet.bandwidth, ethernet.latency_s)
    assert kv == pytest.approx(ethernet.send()(8192 * 131072)) and kv == pytest.approx(30e-6 + 2**30 / 12.5e9)
    with pytest.raises(ValueError, match="link_latency_s"):
        kv_transfer_s(1, 1.0, 1e9, -1.0)
