"""Run notebooks in JupyterLab under a real Chromium, as a learner would, and check what they see.

Which notebooks: by default chapters 00, 05 and 06 (nbval runs every chapter; browser_harness.DEFAULT_CHAPTERS
says why these), every one with LAB_BROWSER_CHAPTERS=all. For each (a copy in a temporary folder: the
committed notebooks stay clean) the test opens the notebook, clicks Run > Run All Cells, waits for the kernel
to go idle, and checks that no cell shows an error, that every widget renders, that plots show as images and
that moving a control of each widget changes its output. It saves a screenshot of each notebook under
`screenshots/` (ignored by git) and warns about slow cells, stderr warnings, widgets shown twice and outputs
wider than the notebook.

It needs Debian's Chromium (`apt-get install chromium`, or `.ci/install-browser-deps`) and Playwright for
Python (in requirements.txt; no browser download: it drives /usr/bin/chromium). Without them it skips, or
fails where LAB_BROWSER_REQUIRED=1 (as in CI). Environment: LAB_BROWSER_TIMEOUT (seconds per notebook,
default 900), LAB_BROWSER_CONTROLS ("first", the default: move the first control of each widget; "all": every
control), LAB_BROWSER_CHAPTERS ("all"; "others", the chapters the default leaves out; or chapter numbers such as
"01,03"), LAB_BROWSER_NOTEBOOKS (another
folder of notebooks: all of them unless LAB_BROWSER_CHAPTERS says otherwise), LAB_CHROMIUM (another Chromium).
"""


from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import browser_harness as harness
import pytest
from browser_harness import (
    CHROMIUM_ARGS,
    NOTEBOOK_DIR,
    NOTEBOOKS,
    RUN_TIMEOUT_S,
    SCREENSHOT_DIR,
    VIEWPORT,
    BrowserTestWarning,
    LabServer,
    cell_times,
    check_page,
    free_port,
    lab_environment,
    open_notebook,
    require_browser,
    run_all,
    save_notebook,
    screenshot,
    stop_process,
    wait_for_server,
    wait_until_idle,
    write_lab_settings,
)


def test_missing_chromium_skips_with_how_to_enable_it(monkeypatch):
    monkeypatch.setattr(harness, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.delenv("LAB_BROWSER_REQUIRED", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium"):
        require_browser()


def test_chapters_are_chosen_by_number_and_an_unknown_one_is_refused(tmp_path):
    for name in ("00-a.ipynb", "05-b.ipynb", "06-c.ipynb", "07-d.ipynb"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in harness.chosen_notebooks(tmp_path, "00, 06")] == ["00-a.ipynb", "06-c.ipynb"]
    assert len(harness.chosen_notebooks(tmp_path, "all")) == 4
    assert [p.name for p in harness.chosen_notebooks(tmp_path, "others")] == ["07-d.ipynb"]  # not 00, 05, 06
    with pytest.raises(ValueError, match="LAB_BROWSER_CHAPTERS.*'09'"):
        harness.chosen_notebooks(tmp_path, "09")


def test_missing_chromium_fails_where_the_browser_test_is_required(monkeypatch):
    monkeypatch.setattr(harness, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("LAB_BROWSER_REQUIRED", "1")
    with pytest.raises(pytest.fail.Exception, match="LAB_BROWSER_REQUIRED=1"):
        require_browser()




@pytest.fixture(scope="module")
def lab_server(request, tmp_path_factory) -> LabServer:
    """JupyterLab on 127.0.0.1 (a free port, a random token) serving a temporary copy of the notebooks."""
    require_browser()
    tmp = tmp_path_factory.mktemp("jupyterlab")
    root = tmp / "lab"
    shutil.copytree(NOTEBOOK_DIR, root / "notebooks",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    write_lab_settings(tmp / "settings")
    port, token, log = free_port(), secrets.token_hex(16), tmp / "jupyterlab.log"
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={root}", f"--LabApp.user_settings_dir={tmp / 'settings'}",
               f"--LabApp.workspaces_dir={tmp / 'workspaces'}",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    with open(log, "w") as log_file:
        proc = subprocess.Popen(command, cwd=root, env=lab_environment(tmp), stdout=log_file,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    request.addfinalizer(lambda: stop_process(proc))
    url = f"http://127.0.0.1:{port}"
    wait_for_server(proc, url, token, log)
    return LabServer(url=url, token=token, root=root, log=log)


# ---- Chromium ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser(request):
    """Debian's headless Chromium, driven by Playwright (no browser download)."""
    require_browser()
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    request.addfinalizer(playwright.stop)
    chromium = playwright.chromium.launch(executable_path=harness.CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    request.addfinalizer(chromium.close)
    return chromium


@pytest.fixture
def page(request, browser, lab_server):
    """A fresh browser context and page; after the test it is closed and the notebook's kernel shut down."""
    context = browser.new_context(viewport=VIEWPORT)
    request.addfinalizer(lab_server.shutdown_kernels)
    request.addfinalizer(context.close)
    page = context.new_page()
    page.set_default_timeout(60_000)
    return page


# ---- Driving JupyterLab --------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_in_jupyterlab(notebook: Path, lab_server: LabServer, page) -> None:
    """Run All in JupyterLab: no errors, widgets render and respond, plots are images; screenshot saved."""
    name, copy = notebook.name, lab_server.root / "notebooks" / notebook.name
    cells = json.loads(copy.read_text())["cells"]  # the copy that runs, as it was when the server started
    started = time.monotonic()
    try:
        open_notebook(page, lab_server, name)
        opened = time.monotonic()
        run_all(page)
        wait_until_idle(page, RUN_TIMEOUT_S)
        ran = time.monotonic()
        page.wait_for_timeout(500)  # widget views and images finish rendering
        saved = save_notebook(page, copy)
        problems, notes = check_page(page, name, cells, saved)
    finally:
        try:
            shot_started = time.monotonic()
            screenshot(page, SCREENSHOT_DIR / f"{notebook.stem}.png")
            print(f"{name}: the screenshot took {time.monotonic() - shot_started:.1f} s")
        except Exception as exc:  # a failed screenshot must not hide the real failure
            warnings.warn(f"{name}: no screenshot: {exc}", BrowserTestWarning, stacklevel=1)
    for note in notes:
        warnings.warn(note, BrowserTestWarning, stacklevel=1)
    slowest = ", ".join(f"cell {i} {s:.1f} s" for i, s in cell_times(saved)[:3])
    print(f"{name}: opened in {opened - started:.1f} s, ran in {ran - opened:.1f} s, "
          f"checked in {time.monotonic() - ran:.1f} s (load average {os.getloadavg()[0]:.1f}); "
          f"slowest: {slowest}")
    assert not problems, f"{name} in JupyterLab:\n" + "\n".join(problems)
