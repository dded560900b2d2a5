"""The browser test re-runs every notebook in JupyterLab, so it runs after everything else."""

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Register the `browser` marker (leave those tests out with `-m "not browser"`)."""
    config.addinivalue_line("markers", "browser: runs the notebooks in JupyterLab in Chromium (slow; last)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the browser tests to the end of the run, keeping every other test's order."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)
