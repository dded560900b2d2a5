import pytest
import torch

import helpers


def test_pick_device_is_cpu_here_or_prefer():
    assert helpers.pick_device("cpu") == torch.device("cpu")
    assert helpers.pick_device().type in ("cpu", "cuda", "mps")


def test_pick_device_rejects_unknown_name():
    with pytest.raises(ValueError, match="prefer must be one of"):
        helpers.pick_device("tpu")


def test_default_dtype_is_fp32_on_cpu():
    assert helpers.default_dtype("cpu") == torch.float32


def test_bytes_per_element():
    assert helpers.bytes_per_element(torch.float32) == 4
    assert helpers.bytes_per_element(torch.bfloat16) == 2
    assert helpers.bytes_per_element(torch.float8_e4m3fn) == 1


def test_device_name_mentions_threads_on_cpu():
    assert f"{torch.get_num_threads()} threads" in helpers.device_name("cpu")


def test_synchronize_cpu_is_noop():
    helpers.synchronize("cpu")


def test_profile_from_environment(monkeypatch):
    monkeypatch.setenv("LAB_PROFILE", "quick")
    assert helpers.current_profile() == "quick"
    assert helpers.by_profile(quick=1, cpu=2, full=3) == 1
    monkeypatch.setenv("LAB_PROFILE", "full")
    assert helpers.by_profile(quick=1, cpu=2, full=3) == 3


def test_profile_default_follows_device(monkeypatch):
    monkeypatch.delenv("LAB_PROFILE", raising=False)
    expected = "full" if helpers.pick_device().type == "cuda" else "cpu"
    assert helpers.current_profile() == expected


def test_profile_rejects_unknown(monkeypatch):
    monkeypatch.setenv("LAB_PROFILE", "huge")
    with pytest.raises(ValueError, match="LAB_PROFILE must be one of .*'gpu-quick'.*got 'huge'"):
        helpers.current_profile()


def test_gpu_quick_takes_full_unless_given_its_own_value(monkeypatch):
    monkeypatch.setenv("LAB_PROFILE", "gpu-quick")
    assert helpers.current_profile() == "gpu-quick"
    assert helpers.by_profile(quick=1, cpu=2, full=3) == 3
    assert helpers.by_profile(quick=1, cpu=2, full=3, gpu_quick=4) == 4
    assert helpers.by_profile(quick=1, cpu=2, full=3, gpu_quick=None) is None  # None is a value, as chapter 6 uses
    monkeypatch.setenv("LAB_PROFILE", "full")
    assert helpers.by_profile(quick=1, cpu=2, full=3, gpu_quick=4) == 3


def test_setup_seeds_and_reports(capsys):
    lab = helpers.setup(seed=123)
    first = torch.rand(3)
    helpers.setup(seed=123, verbose=False)
    assert torch.equal(first, torch.rand(3))
    out = capsys.readouterr().out
    assert "torch" in out and "profile" in out and lab.dtype == helpers.default_dtype(lab.device)


def test_setup_says_whether_the_hub_can_be_used(monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    helpers.setup()
    assert "offline (HF_HUB_OFFLINE)" in capsys.readouterr().out
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(helpers.plumbing.setup, "hub_unavailable", lambda: True)
    helpers.setup()
    assert "unreachable" in capsys.readouterr().out


@pytest.mark.parametrize("capability, native, expected", [
    ((7, 5), True, torch.float16),  # T4: is_bf16_supported() says yes by emulation; no bf16 tensor cores
    ((7, 0), True, torch.float16),  # V100
    ((8, 0), True, torch.bfloat16),  # A100
    ((9, 0), True, torch.bfloat16),  # H100, H200
])
def test_default_dtype_on_cuda_picks_fp16_without_native_bf16(monkeypatch, capability, native, expected):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: native)
    assert helpers.default_dtype("cuda") == expected


def test_native_bf16_is_false_off_cuda():
    assert not helpers.native_bf16("cpu")


def test_cpu_bf16_units_reads_the_flags(tmp_path):
    from helpers.plumbing.device import cpu_bf16_units

    x86 = tmp_path / "x86"
    x86.write_text("model name\t: Some Xeon\nflags\t\t: fpu avx512f avx512_bf16 amx_tile amx_bf16\n\n"
                   "flags\t\t: fpu avx512f avx512_bf16 amx_tile amx_bf16\n")
    assert cpu_bf16_units(str(x86)) == {"amx_bf16", "avx512_bf16"}
    arm = tmp_path / "arm"
    arm.write_text("Features\t: fp asimd sve bf16 i8mm\n")
    assert cpu_bf16_units(str(arm)) == {"bf16"}
    plain = tmp_path / "plain"
    plain.write_text("flags\t\t: fpu sse2 avx2 fma\n")
    assert cpu_bf16_units(str(plain)) == frozenset()
    assert cpu_bf16_units(str(tmp_path / "missing")) == frozenset()
