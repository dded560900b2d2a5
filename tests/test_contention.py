"""Contention and the three outcomes of a self-check, with a real neighbour process streaming memory.

The lesson these tests judge is their own, made true or false on purpose: "the larger read takes longer" is
true (four times the bytes), "the first of two identical reads is 1.5x faster" is false. On a quiet machine
the true one passes and the false one fails; beside a neighbour the false one fails or cannot be decided,
and never passes. These need a quiet machine to start from: run them with nothing else busy."""

import time

import pytest
import torch

import helpers
from helpers.plumbing import checks, contention, results
from helpers.plumbing.neighbour import neighbour
from tests.test_step_model import CAL


@pytest.fixture(autouse=True)
def fresh_log(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(contention, "_recent", contention.Contention())
    monkeypatch.setattr(contention, "_last", contention.Contention())
    monkeypatch.setattr(contention, "_baseline", contention.Contention())


def reads() -> dict:
    small = torch.ones(2**20)  # 4 MiB
    large = torch.ones(2**22)  # 16 MiB: four times the bytes
    return {"small": small.sum, "large": large.sum, "same": small.sum}


def judge(lesson_true: bool) -> None:
    """Time in turns, then check either the true claim or the false one, with a re-measurement."""
    fns = reads()

    def measure() -> tuple[bool, str]:
        t = helpers.time_alternating(fns, rounds=5, min_round_s=0.05)
        if lesson_true:
            ratio = helpers.round_ratio(t["large"], t["small"]).median
            return ratio > 1.5, f"large / small {ratio:.2f}x per round"
        ratio = helpers.round_ratio(t["same"], t["small"]).median
        return ratio < 1 / 1.5, f"same / small {ratio:.2f}x per round"

    condition, evidence = measure()
    helpers.check(condition, "the test's lesson", evidence, remeasure=measure)


def outcomes() -> list[str]:
    return [entry["outcome"] for entry in helpers.read_check_log()]


def test_a_quiet_machine_reads_quiet():
    found = contention.measure_now(1.0)
    assert not found.busy, f"is something else running? {found}"


def test_a_neighbour_is_measured_as_busy():
    with neighbour():
        found = contention.measure_now(1.0)
    assert found.busy and found.others_share > contention.OTHERS_BUSY, str(found)


def test_on_a_quiet_machine_a_true_lesson_passes_and_a_false_one_fails():
    judge(lesson_true=True)
    with pytest.raises(AssertionError, match="Self-check failed"):
        judge(lesson_true=False)
    assert outcomes() == ["pass", "fail"]  # a quiet run has no undecided check


def test_beside_a_neighbour_a_false_lesson_never_passes(monkeypatch):
    monkeypatch.setattr(checks, "REMEASURE_S", 10.0)
    with neighbour():
        try:
            judge(lesson_true=False)
        except AssertionError:
            pass
    assert outcomes() in (["fail"], ["undecided"])


def test_busy_timings_decide_nothing_even_when_the_claim_holds(capsys):
    """A neighbour can fake a pass as well as a failure: a busy window is undecided whatever the condition."""
    busy = contention.Contention(wall_s=1.0, others_cpu_s=2.0, machine_cpus=2)
    helpers.check(True, "a claim", "evidence", contention=busy)
    assert "Could not decide" in capsys.readouterr().out and outcomes() == ["undecided"]


def test_a_claim_no_timing_rests_on_is_judged_on_a_busy_machine_too(capsys):
    """The same tokens or a byte count read back: a neighbour cannot bend it, so busy or not it passes or fails."""
    busy = contention.Contention(wall_s=1.0, others_cpu_s=2.0, machine_cpus=2)
    helpers.check(True, "the same tokens", "evidence", contention=busy, timed=False)
    assert "Could not decide" not in capsys.readouterr().out
    with pytest.raises(AssertionError, match="Self-check failed"):
        helpers.check(False, "the same tokens", "evidence", contention=busy, timed=False)
    assert outcomes() == ["pass", "fail"]


def test_an_undecided_check_names_a_moved_speed_apart_from_a_busy_seat(capsys):
    helpers.check(True, "a claim", "evidence", contention=contention.Contention(speed_moved=0.5))
    printed = capsys.readouterr().out
    assert "this machine's own speed moved" in printed and "refresh=True" in printed


def test_beside_a_neighbour_a_true_lesson_never_fails(monkeypatch):
    monkeypatch.setattr(checks, "REMEASURE_S", 10.0)
    with neighbour():
        judge(lesson_true=True)
    assert outcomes() in (["pass"], ["undecided"])


def test_undecided_comes_only_from_measured_contention(capsys):
    """The same false claim with a busy contention handed in: undecided, printed as a warning, logged."""
    busy = contention.Contention(wall_s=1.0, others_cpu_s=2.0, machine_cpus=2)
    helpers.check(False, "a claim", "some evidence", contention=busy)
    printed = capsys.readouterr().out
    assert "Could not decide" in printed and "other processes used" in printed
    assert outcomes() == ["undecided"]
    with pytest.raises(AssertionError):  # the same claim with nothing busy measured: a failure
        helpers.check(False, "a claim", "some evidence", contention=contention.Contention(wall_s=1.0))


def test_several_checks_of_one_measurement_share_its_contention():
    with contention.watch():
        time.sleep(0.2)
    first, second = contention.recent(), contention.recent()
    assert first.wall_s == pytest.approx(second.wall_s) and first.wall_s >= 0.2


def test_a_calibration_measured_beside_a_neighbour_is_used_but_not_cached(monkeypatch, tmp_path):
    from helpers.course.step_time import calibration as calib

    def slow_measure(device, dtype):
        time.sleep(0.6)
        return CAL

    monkeypatch.setattr(calib, "measure_calibration", slow_measure)
    monkeypatch.setattr(results, "_NOT_CACHED", {})
    with neighbour():
        used = calib.calibrate("cpu")
    assert used.contention["others_share"] > contention.OTHERS_BUSY
    assert not calib.calibration_path(torch.device("cpu"), torch.float32).exists()
    assert contention.baseline().busy  # later checks in this process know what they rest on
    helpers.check(False, "a claim resting on it", "evidence")  # undecided: no AssertionError
    assert outcomes() == ["undecided"]


def test_contention_readings_add_up_and_report_shares():
    a = contention.Contention(wall_s=1.0, others_cpu_s=0.2, machine_cpus=2, throttled_s=0.5)
    b = contention.Contention(wall_s=1.0, others_cpu_s=1.8, machine_cpus=2)
    total = a + b
    assert total.wall_s == 2.0 and total.others_share == pytest.approx(0.5)
    assert total.throttled_share == pytest.approx(0.25) and total.busy
    assert set(total.as_dict()) >= {"others_share", "throttled_share", "steal_share", "wall_s"}
    assert not contention.Contention(wall_s=0.05, others_cpu_s=0.1).busy  # too short to show a share


def test_a_machine_whose_own_speed_moved_cannot_judge_a_prediction():
    from helpers.plumbing.contention import Contention, speed_change

    assert not speed_change([1.0, 1.2, 1.1]).busy
    moved = speed_change([1.0, 1.0, 1.4])
    assert moved.busy and "speed moved 40%" in moved.reasons[0]
    assert (Contention() + moved).busy  # kept when summed with a quiet window
    with pytest.raises(ValueError, match="reference_s"):
        speed_change([1.0])
