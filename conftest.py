"""pytest setup shared by the unit tests and the nbval notebook runs."""

import os
import tempfile

# A notebook whose kernel dies (the out-of-memory killer, say) fails in seconds instead of at the cell timeout;
# a cell whose output runs past 25 lines fails unless tagged as the lesson (tests/output_length.py).
pytest_plugins = ["tests.nbval_dead_kernel", "tests.output_length"]

# Notebooks run by nbval inherit this environment: the smallest sizes, and a fresh folder for measurements
# so a run never depends on files an earlier run left behind.
os.environ.setdefault("LAB_PROFILE", "quick")
os.environ.setdefault("LAB_CACHE_DIR", tempfile.mkdtemp(prefix="lab-test-"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_terminal_summary(terminalreporter) -> None:
    """How the notebooks' self-checks in this run ended: passed, failed, could not decide (a busy machine). Unit
    tests that make checks log them in folders of their own."""
    from helpers.plumbing.checks import read_check_log

    outcomes = [entry["outcome"] for entry in read_check_log()]
    if outcomes:
        counts = ", ".join(f"{outcomes.count(o)} {word}" for o, word in
                           (("pass", "passed"), ("fail", "failed"), ("undecided", "could not decide")))
        terminalreporter.write_line(f"self-checks logged: {counts}")
