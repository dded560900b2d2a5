"""The browser test's harness: a JupyterLab server on loopback, Chromium driven by Playwright, and the
checks of what a learner sees in a notebook run (errors, widgets, images, slow cells, overflow).

tests/test_browser.py holds the tests; this module holds everything they call.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = Path(os.environ.get("LAB_BROWSER_NOTEBOOKS") or ROOT / "notebooks")
# nbval runs every chapter; the browser pass runs, by default, the chapters whose parts differ most in
# JupyterLab: the setup cell in a Jupyter kernel (00), the widget-heaviest chapter (05: two simulators), and
# a real server started and stopped from the kernel (06). LAB_BROWSER_CHAPTERS=all (or "01,03") picks others.
DEFAULT_CHAPTERS = "00,05,06"


def chosen_notebooks(folder: Path, chapters: str) -> list[Path]:
    """The notebooks in `folder` whose names start with one of the comma-separated `chapters` ("all": every one;
    "others": every one but DEFAULT_CHAPTERS, the ones the README's test command opens)."""
    notebooks = sorted(folder.glob("*.ipynb"))
    if chapters.strip() == "all":
        return notebooks
    if chapters.strip() == "others":
        return [nb for nb in notebooks if not any(nb.name.startswith(c) for c in DEFAULT_CHAPTERS.split(","))]
    prefixes = [c.strip() for c in chapters.split(",") if c.strip()]
    chosen = [nb for nb in notebooks if any(nb.name.startswith(p) for p in prefixes)]
    unknown = [p for p in prefixes if not any(nb.name.startswith(p) for nb in notebooks)]
    if unknown or not chosen:
        raise ValueError(f"LAB_BROWSER_CHAPTERS must be 'all', 'others' or chapter numbers of notebooks in {folder} "
                         f"(e.g. '00,05'), got {chapters!r}")
    return chosen


NOTEBOOKS = chosen_notebooks(NOTEBOOK_DIR, os.environ.get(
    "LAB_BROWSER_CHAPTERS", "all" if os.environ.get("LAB_BROWSER_NOTEBOOKS") else DEFAULT_CHAPTERS))
SCREENSHOT_DIR = ROOT / "screenshots"
CHROMIUM = os.environ.get("LAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
RUN_TIMEOUT_S = float(os.environ.get("LAB_BROWSER_TIMEOUT", 900))  # one notebook, top to bottom
CONTROL_TIMEOUT_S = 60.0  # a widget callback redraws its output within this
SLOW_CONTROL_S = 10.0  # a widget callback slower than this is reported
# "first": move the first control of each widget (proves it responds; fast); "all": every control, and
# report the ones that change nothing (a few seconds more per control).
CONTROLS_MOVED = os.environ.get("LAB_BROWSER_CONTROLS", "first")
SLOW_CELL_S = 30.0  # quick profile: a cell slower than this is reported
VIEWPORT = {"width": 1280, "height": 900}
MAX_SCREENSHOT_HEIGHT = 16000  # about Chromium's limit for one capture

class BrowserTestWarning(UserWarning):
    """Something a learner would notice in JupyterLab that does not break the notebook."""


def require_browser() -> None:
    """Skip, saying how to enable the test, where Chromium or Playwright is missing (fail if it is required)."""
    missing = None
    if not os.access(CHROMIUM, os.X_OK):
        missing = (f"the browser test needs Chromium at {CHROMIUM}: enable it with `apt-get install chromium` "
                   "(or `bash .ci/install-browser-deps`)")
    elif importlib.util.find_spec("playwright") is None:
        missing = ("the browser test needs Playwright for Python: enable it with `pip install -r requirements.txt` "
                   "(no browser download: it drives Debian's Chromium)")
    if missing and os.environ.get("LAB_BROWSER_REQUIRED") == "1":  # CI: a skipped browser test is a failure
        pytest.fail(missing + " (LAB_BROWSER_REQUIRED=1)")
    if missing:
        pytest.skip(missing)


# ---- JupyterLab server ---------------------------------------------------------------------------

@dataclass
class LabServer:
    """A running JupyterLab: its base URL, token, and the folder it serves."""

    url: str
    token: str
    root: Path
    log: Path

    def api(self, method: str, path: str) -> object:
        """Call the Jupyter Server REST API; the decoded JSON answer, or None."""
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Shut down every session's kernel, so the next notebook has the CPU."""
        for session in self.api("GET", "/api/sessions") or []:
            try:
                self.api("DELETE", f"/api/sessions/{session['id']}")
            except OSError:
                pass


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_lab_settings(settings_dir: Path) -> None:
    """User settings for a quiet, testable JupyterLab: all cells in the DOM, timings recorded, no news."""
    overrides = {
        "notebook-extension/tracker": {"windowingMode": "none", "recordTiming": True, "scrollPastEnd": False},
        "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
        "docmanager-extension/plugin": {"autosave": False},
    }
    for name, values in overrides.items():
        path = settings_dir / "@jupyterlab" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def lab_environment(tmp: Path) -> dict[str, str]:
    """The kernels' environment: quick profile, offline, fresh measurement folder, no user Jupyter config."""
    dropped = ("MPLBACKEND", "JUPYTER_PATH", "JUPYTER_CONFIG_PATH")  # inline plots, this venv's Jupyter
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(LAB_PROFILE="quick", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               LAB_CACHE_DIR=str(tmp / "lab-cache"), JUPYTER_CONFIG_DIR=str(tmp / "jupyter-config"),
               JUPYTER_DATA_DIR=str(tmp / "jupyter-data"), JUPYTER_RUNTIME_DIR=str(tmp / "jupyter-runtime"),
               IPYTHONDIR=str(tmp / "ipython"))
    return env


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM (the server then shuts its kernels down), and SIGKILL its group if it lingers."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def wait_for_server(proc: subprocess.Popen, url: str, token: str, log: Path, timeout: float = 180) -> None:
    """Poll /api/status until the server answers; fail with its log if it exits or never answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"JupyterLab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5).close()
            return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"JupyterLab did not answer within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
CELLS = f"{PANEL} .jp-Notebook .jp-Cell"

KERNEL_STATE_JS = """([panel, cells]) => ({
    status: document.querySelector(panel + ' .jp-Notebook-ExecutionIndicator')?.getAttribute('data-status'),
    prompts: Array.from(document.querySelectorAll(cells)).map(cell => cell.classList.contains('jp-CodeCell')
        ? cell.querySelector('.jp-InputPrompt')?.textContent.trim() || '' : ''),
})"""

KERNEL_DIALOG = ".jp-Dialog .jp-mod-accept"
KERNEL_READY_JS = """() => /\\|\\s*Idle\\b/
    .test(document.querySelector('#jp-main-statusbar')?.innerText || '')"""  # "Python 3 (ipykernel) | Idle"

SCROLL_JS = """([panel, top]) => {
    const s = document.querySelector(panel + ' .jp-WindowedPanel-outer') || document.querySelector(panel);
    if (top !== null) s.scrollTop = top;
    return {hidden: s.scrollHeight - s.clientHeight, shown: s.clientHeight};
}"""


def open_notebook(page, server: LabServer, name: str) -> None:
    """Open notebooks/<name> in a reset workspace, wait for its kernel, and fold the file browser away."""
    page.goto(f"{server.url}/lab/tree/notebooks/{name}?reset&token={server.token}")
    page.wait_for_selector(CELLS, timeout=120_000)
    page.wait_for_function(f"() => document.querySelector('{KERNEL_DIALOG}') || ({KERNEL_READY_JS})()",
                           timeout=180_000)
    dialog = page.locator(KERNEL_DIALOG)
    if dialog.count():  # JupyterLab asks which kernel to start: take its default (Python 3)
        dialog.first.click()
    page.wait_for_selector(f'{PANEL} .jp-Notebook-ExecutionIndicator[data-status="idle"]', timeout=180_000)
    page.wait_for_function(KERNEL_READY_JS, timeout=180_000)  # connected, not only "idle" by default
    current_tab = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
    if current_tab.count():
        current_tab.first.click()  # clicking the open sidebar's tab folds it: the notebook gets the width


def click_menu(page, menu: str, item: str) -> None:
    """Click `menu` in the menu bar, then its entry `item` (exact labels)."""
    page.locator(".lm-MenuBar-itemLabel").get_by_text(menu, exact=True).click()
    page.locator(".lm-Menu-content .lm-Menu-itemLabel").get_by_text(item, exact=True).click()


def run_all(page, timeout: float = 60) -> None:
    """Run > Run All Cells, and make sure the first code cell was taken (click again if it was not)."""
    for _ in range(3):
        click_menu(page, "Run", "Run All Cells")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            prompts = [p for p in page.evaluate(KERNEL_STATE_JS, [PANEL, CELLS])["prompts"] if p]
            if not prompts or re.search(r"\[[\d*]+\]", prompts[0]):
                return
            time.sleep(0.2)
    pytest.fail(f"Run All Cells did not start the notebook within {timeout:.0f} s, three times")


def wait_until_idle(page, timeout: float, settle_s: float = 0.5) -> None:
    """Wait until no cell is queued or running and the kernel is idle, steadily for `settle_s`."""
    deadline, steady_since = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        state = page.evaluate(KERNEL_STATE_JS, [PANEL, CELLS])
        if state["status"] != "idle" or any("*" in p for p in state["prompts"]):
            steady_since = None
        elif steady_since is None:
            steady_since = time.monotonic()
        elif time.monotonic() - steady_since >= settle_s:
            return
        time.sleep(0.2)
    prompts = page.evaluate(KERNEL_STATE_JS, [PANEL, CELLS])["prompts"]
    running = [i for i, p in enumerate(prompts) if "*" in p]
    pytest.fail(f"still running after {timeout:.0f} s: cells {running} are queued or running")


def save_notebook(page, path: Path) -> dict:
    """File > Save Notebook, then read what JupyterLab wrote (outputs, per-cell timings)."""
    before = path.stat().st_mtime_ns
    click_menu(page, "File", "Save Notebook")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and path.stat().st_mtime_ns == before:
        time.sleep(0.2)
    for _ in range(20):  # the write may still be under way
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:
            time.sleep(0.2)
    return json.loads(path.read_text())


def screenshot(page, path: Path) -> list[Path]:
    """Save the whole notebook: grow the viewport to its height (in parts past Chromium's limit), restore."""
    path.parent.mkdir(parents=True, exist_ok=True)
    hidden = page.evaluate(SCROLL_JS, [PANEL, None])["hidden"]
    height = min(VIEWPORT["height"] + max(0, int(hidden)), MAX_SCREENSHOT_HEIGHT)
    page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
    page.wait_for_timeout(300)
    view = page.evaluate(SCROLL_JS, [PANEL, 0])
    parts = 1 + -(-max(0, int(view["hidden"])) // max(1, int(view["shown"])))  # 1 + ceil(hidden / shown)
    paths = [path] if parts == 1 else [path.with_name(f"{path.stem}-{k + 1}{path.suffix}") for k in range(parts)]
    for old in [path, *path.parent.glob(f"{path.stem}-[0-9]*{path.suffix}")]:  # left by an earlier run
        old.unlink(missing_ok=True)
    for k, part in enumerate(paths):
        page.evaluate(SCROLL_JS, [PANEL, k * view["shown"]])
        page.wait_for_timeout(300)
        page.screenshot(path=str(part))
    page.set_viewport_size(VIEWPORT)
    return paths


# ---- Reading what the learner sees ---------------------------------------------------------------

SNAPSHOT_JS = """(cells) => Array.from(document.querySelectorAll(cells)).map((cell, index) => {
    const area = cell.querySelector('.jp-Cell-outputArea');
    if (!area) return {index, outputs: [], images: [], text: '', renderedViews: 0, overflow: []};
    const right = area.getBoundingClientRect().right;
    const outputs = Array.from(area.querySelectorAll('.jp-OutputArea-output')).map(el => ({
        mime: el.getAttribute('data-mime-type') || '',
        text: el.innerText.slice(0, 4000),
        inWidget: !!el.closest('.widget-output'),
    }));
    // A widget view's output element carries no mime type; a rendered one holds a .jupyter-widgets element.
    const views = Array.from(area.querySelectorAll(':scope > .jp-OutputArea-child > .jp-OutputArea-output'))
        .filter(el => !el.getAttribute('data-mime-type'));
    const images = Array.from(area.querySelectorAll('img')).map(img => ({
        ok: img.complete && img.naturalWidth > 0, width: img.naturalWidth, height: img.naturalHeight}));
    const overflow = [];
    for (const el of area.querySelectorAll('.jupyter-widgets, img, .jp-OutputArea-output')) {
        const r = el.getBoundingClientRect();
        const kinds = Array.from(el.classList).filter(c => c.startsWith('widget-')).join(' ');
        const what = el.tagName === 'IMG' ? 'an image'
            : el.classList.contains('jupyter-widgets') ? 'widget ' + kinds : 'an output';
        const past = Math.round(r.right - right);
        if (r.width > 0 && past > 2) {
            overflow.push(`${what} reaches ${past} px past the output area`);
        } else if (el.classList.contains('jp-OutputArea-output') && !el.closest('.widget-output')
                   && el.scrollWidth > el.clientWidth + 2) {
            const mime = el.getAttribute('data-mime-type') || 'widget';
            overflow.push(`a ${mime} output scrolls sideways (${el.scrollWidth} px in ${el.clientWidth} px)`);
        }
    }
    return {index, outputs, images, text: area.innerText.slice(0, 20000),
            renderedViews: views.filter(v => v.querySelector('.jupyter-widgets')).length,
            overflow: Array.from(new Set(overflow))};
})"""

TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^-{20,}\n\S*(Error|Exception)", re.M)
WIDGET_REPR = re.compile(r"^(interactive|[HV]?Box|Output|\w*(Slider|Dropdown|Progress|Button|Text))\(")
FIGURE_REPR = re.compile(r"<Figure size \d+x\d+ with \d+ Axes>")
PLOT_CALL = re.compile(r"new_figure|plot_\w+\(|plt\.|\.plot\(|subplots\(|interact_with\(")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def first_line(cell: dict) -> str:
    """The first non-empty source line of a notebook cell, for messages."""
    source = "".join(cell.get("source", ""))
    return next((line.strip() for line in source.splitlines() if line.strip()), "")[:80]


def where(name: str, cells: list[dict], index: int) -> str:
    """'00-x.ipynb cell 5 (`fig, ax = ...`)': the notebook, cell index (from 0) and first line."""
    return f"{name} cell {index}" + (f" (`{first_line(cells[index])}`)" if index < len(cells) else "")


def error_problems(name: str, cells: list[dict], snapshot: list[dict], saved: dict) -> list[str]:
    """Errors: tracebacks shown in the page (in cells and widget outputs) and `error` outputs saved."""
    problems = []
    for cell in snapshot:
        for out in cell["outputs"]:
            if out["mime"] == "application/vnd.jupyter.stderr" and TRACEBACK.search(out["text"]):
                inside = " inside a widget's output" if out["inWidget"] else ""
                problems.append(f"{where(name, cells, cell['index'])}: error{inside}:\n{out['text'][-1500:]}")
    for index, cell in enumerate(saved["cells"]):
        at = where(name, cells, index)
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and not any(at in p for p in problems):
                problems.append(f"{at}: {out.get('ename')}: {out.get('evalue')}")
    return problems


def widget_views(saved: dict, index: int) -> list[str]:
    """The model ids of the widget views that a saved cell's outputs display."""
    cells = saved["cells"]
    outputs = cells[index].get("outputs", []) if index < len(cells) else []
    return [out["data"][WIDGET_VIEW].get("model_id", "")
            for out in outputs if WIDGET_VIEW in out.get("data", {})]


def widget_problems(name: str, cells: list[dict], snapshot: list[dict], saved: dict) -> list[str]:
    """Widgets that did not render: error or loading placeholders, empty views, a text repr instead."""
    problems = []
    for cell in snapshot:
        at = where(name, cells, cell["index"])
        if "Error displaying widget" in cell["text"]:
            problems.append(f"{at}: 'Error displaying widget'")
        if "Loading widget..." in cell["text"]:
            problems.append(f"{at}: a widget is stuck at 'Loading widget...'")
        expected = len(widget_views(saved, cell["index"]))
        if cell["renderedViews"] < expected:
            problems.append(f"{at}: {expected - cell['renderedViews']} of {expected} widgets did not render")
        for out in cell["outputs"]:
            if out["mime"] == "text/plain" and WIDGET_REPR.match(out["text"].strip()):
                problems.append(f"{at}: a widget shows as text: {out['text'][:120]!r}")
    return problems


def image_problems(name: str, cells: list[dict], snapshot: list[dict], saved: dict) -> list[str]:
    """Plots that are not images: saved PNGs missing or broken in the page, figure reprs, no plot at all."""
    problems = []
    shown = {cell["index"]: cell for cell in snapshot}
    for index, cell in enumerate(saved["cells"]):
        pngs = sum("image/png" in out.get("data", {}) for out in cell.get("outputs", []))
        page_cell = shown.get(index, {"images": [], "outputs": []})
        if pngs and sum(image["ok"] for image in page_cell["images"]) < pngs:
            problems.append(f"{where(name, cells, index)}: {pngs} plots saved but not all shown as images")
        texts = [out["text"] for out in page_cell["outputs"] if out["mime"] == "text/plain"]
        if any(FIGURE_REPR.search(text) for text in texts):
            problems.append(f"{where(name, cells, index)}: a figure shows as text ('<Figure size ...>')")
    draws = any(PLOT_CALL.search("".join(c["source"])) for c in cells if c["cell_type"] == "code")
    if draws and not any(image["ok"] for cell in snapshot for image in cell["images"]):
        problems.append(f"{name}: the notebook draws plots but no image shows in its outputs")
    return problems


def cell_times(saved: dict) -> list[tuple[int, float]]:
    """(cell index, seconds) for every code cell that JupyterLab timed, slowest first."""
    def parse(stamp: str) -> datetime.datetime:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))

    times = []
    for index, cell in enumerate(saved["cells"]):
        execution = cell.get("metadata", {}).get("execution", {})
        start, end = execution.get("iopub.execute_input"), execution.get("shell.execute_reply")
        if start and end:
            times.append((index, (parse(end) - parse(start)).total_seconds()))
    return sorted(times, key=lambda t: -t[1])


def repeated_widgets(name: str, cells: list[dict], saved: dict) -> list[str]:
    """Cells that show one widget twice (`interact_with(...)` displays it, then its value shows again)."""
    notes = []
    for index in range(len(saved["cells"])):
        views = widget_views(saved, index)
        if len(views) > len(set(views)):
            notes.append(f"{where(name, cells, index)}: shows the same widget twice "
                         "(end the line with `;` or assign the result)")
    return notes


def stderr_notes(name: str, cells: list[dict], snapshot: list[dict]) -> list[str]:
    """stderr outputs that are not errors (warnings, logging): worth a look, not a failure."""
    notes = []
    for cell in snapshot:
        for out in cell["outputs"]:
            text = out["text"].strip()
            if out["mime"] == "application/vnd.jupyter.stderr" and text and not TRACEBACK.search(text):
                if not re.search(r"\d+%\|", text):  # a text progress bar
                    notes.append(f"{where(name, cells, cell['index'])}: stderr: {text[:300]}")
    return notes


# ---- Moving widget controls ----------------------------------------------------------------------

CONTROLS = ", ".join([
    ".widget-slider .noUi-handle",  # IntSlider, FloatSlider, SelectionSlider, log and range sliders
    ".widget-dropdown select",
    ".widget-toggle-buttons .widget-toggle-button",
    ".widget-radio-box input",
    ".widget-checkbox input",
    ".widget-inline-hbox input[type=number]",  # IntText, FloatText and their bounded kinds
])

SIGNATURE_JS = """(cell) => {
    const own = cell.querySelectorAll('.widget-output');
    const outs = own.length ? own
        : document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .widget-output');
    // What the reader sees: the text and the images (attributes such as style change on every redraw).
    return Array.from(outs).map(o => o.innerText + Array.from(o.querySelectorAll('img'), i => i.src).join())
        .join('\\n');
}"""

DESCRIBE_JS = """(el) => {
    const box = el.closest('.widget-inline-hbox, .widget-toggle-buttons, .widget-radio, .widget-checkbox');
    const texts = Array.from(box?.querySelectorAll('.widget-label, .widget-label-basic') || [],
                             l => l.textContent.replace(/\u200b/g, '').trim());
    const label = texts.find(t => t) || '(no label)';
    const kind = el.classList.contains('noUi-handle') ? 'slider' : el.tagName === 'SELECT' ? 'dropdown'
        : el.type === 'number' ? 'number box' : el.type || el.tagName.toLowerCase();
    return `${kind} "${label}"`;
}"""

KIND_JS = """(el) => el.classList.contains('noUi-handle') ? 'slider' : el.tagName === 'SELECT' ? 'select'
    : el.type === 'number' ? 'number'
    : (el.classList.contains('mod-active') || (el.type === 'radio' && el.checked)) ? 'selected' : 'click'"""


def move(control) -> bool:
    """Move one control the way a learner would (the keyboard for sliders); False where it cannot move."""
    kind = control.evaluate(KIND_JS)
    if kind == "slider":
        before = control.get_attribute("aria-valuenow")
        control.focus()
        control.press("ArrowRight")
        if control.get_attribute("aria-valuenow") == before:  # at its maximum
            control.press("ArrowLeft")
        return control.get_attribute("aria-valuenow") != before
    if kind == "select":
        count = control.locator("option").count()
        if count < 2:
            return False
        control.select_option(index=(control.evaluate("el => el.selectedIndex") + 1) % count)
        return True
    if kind == "number":
        control.focus()
        control.press("ArrowUp")
        control.press("Enter")
        return True
    if kind == "selected":  # the chosen toggle button or radio: move another one of its group
        return False
    control.click()
    return True


def wait_for_change(page, cell, before: str, timeout: float) -> bool:
    """Wait until the cell's widget output differs from `before`; True if it still differs once idle."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cell.evaluate(SIGNATURE_JS) != before:  # cleared or redrawn: let the redraw finish
            wait_until_idle(page, max(5.0, deadline - time.monotonic()))
            page.wait_for_timeout(300)
            return cell.evaluate(SIGNATURE_JS) != before
        time.sleep(0.2)
    return False


def exercise_controls(page, name: str, cells: list[dict]) -> tuple[list[str], list[str]]:
    """Move the controls of every widget cell: (problems: cells where none changed anything, notes)."""
    problems, notes = [], []
    page_cells = page.locator(CELLS)
    for index in range(page_cells.count()):
        cell = page_cells.nth(index)
        controls = cell.locator(f".jp-Cell-outputArea :is({CONTROLS})")
        changed, idle, moved_groups = [], [], set()
        kinds = [controls.nth(k).get_attribute("type") for k in range(controls.count())]
        order = list(range(len(kinds)))
        if CONTROLS_MOVED == "all":  # switches first: what one does may depend on the others' first values
            order.sort(key=lambda k: kinds[k] != "checkbox")
        for k in order:
            control = controls.nth(k)
            label = control.evaluate(DESCRIBE_JS)
            if label in moved_groups:  # one button of a toggle-button or radio group is enough
                continue
            control.scroll_into_view_if_needed()
            before = cell.evaluate(SIGNATURE_JS)
            if not move(control):
                continue
            if kinds[k] in ("button", "radio"):
                moved_groups.add(label)
            started = time.monotonic()
            (changed if wait_for_change(page, cell, before, CONTROL_TIMEOUT_S) else idle).append(label)
            if label in changed and time.monotonic() - started > SLOW_CONTROL_S:
                notes.append(f"{where(name, cells, index)}: moving {label} took "
                             f"{time.monotonic() - started:.1f} s to redraw")
            if CONTROLS_MOVED != "all":
                break
        at = where(name, cells, index)
        if idle and not changed:
            problems.append(f"{at}: moving {', '.join(idle)} changed nothing in the output "
                            f"(waited {CONTROL_TIMEOUT_S:.0f} s)")
        elif idle:
            notes.append(f"{at}: moving {', '.join(idle)} changed nothing (while {', '.join(changed)} did)")
    return problems, notes


# ---- The test ------------------------------------------------------------------------------------

def check_page(page, name: str, cells: list[dict], saved: dict) -> tuple[list[str], list[str]]:
    """Everything the test asserts (problems) and reports (notes) about one notebook run in the page."""
    snapshot = page.evaluate(SNAPSHOT_JS, CELLS)
    problems = (error_problems(name, cells, snapshot, saved) + widget_problems(name, cells, snapshot, saved)
                + image_problems(name, cells, snapshot, saved))
    started = time.monotonic()
    control_problems, notes = exercise_controls(page, name, cells)
    print(f"{name}: moving the controls took {time.monotonic() - started:.1f} s")
    after = page.evaluate(SNAPSHOT_JS, CELLS)  # the widget callbacks' own errors
    problems += control_problems
    later = error_problems(name, cells, after, saved) + widget_problems(name, cells, after, saved)
    problems += [p for p in later if p not in problems]
    notes += repeated_widgets(name, cells, saved) + stderr_notes(name, cells, snapshot)
    notes += [f"{where(name, cells, c['index'])}: {o}" for c in snapshot for o in c["overflow"]]
    notes += [f"{where(name, cells, i)}: took {s:.1f} s (quick profile)"
              for i, s in cell_times(saved) if s > SLOW_CELL_S]
    return problems, notes
