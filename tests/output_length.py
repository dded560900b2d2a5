"""How long a cell's output is on screen, and a pytest hook that holds nbval's notebook cells to a limit.

A reader scrolls past every line a cell prints: a long table or log buries the line that matters. A cell whose
output runs past `MAX_OUTPUT_LINES` fails its nbval test unless it carries the tag `lesson-output` (the long
output is the lesson, such as a full table the prose walks through). Lines are counted as JupyterLab shows
them: a table's HTML rows (its header and body; rows collapsed under <details> stay out of view), other
results' plain text, printed text, an error's traceback; figures and widgets count as none.
"""

import re

import pytest

MAX_OUTPUT_LINES = 25
LESSON_TAG = "lesson-output"


def text(value: str | list[str]) -> str:
    """A notebook's text field: one string while running, a list of lines in a saved notebook."""
    return "".join(value) if isinstance(value, list) else value


def output_lines(outputs: list[dict]) -> int:
    """Lines of text the outputs put on screen (see the module's docstring)."""
    lines = 0
    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            lines += len(text(out.get("text", "")).splitlines())
        elif kind == "error":
            lines += sum(len(frame.splitlines()) for frame in out.get("traceback", []))
        elif kind in ("display_data", "execute_result"):
            data = out.get("data", {})
            html = re.sub(r"<details>.*?</details>", "", text(data.get("text/html", "")), flags=re.S)
            if "<table" in html:
                lines += len(re.findall(r"<tr[ >]", html))
            elif not any(k.startswith(("image/", "application/vnd.jupyter.widget")) for k in data):
                lines += len(text(data.get("text/plain", "")).splitlines())
    return lines


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """After an nbval cell ran without error: fail it if its output is longer than the limit and not tagged."""
    result = yield
    outputs, cell = getattr(item, "test_outputs", None), getattr(item, "cell", None)
    if outputs is None or cell is None:
        return result
    lines = output_lines(outputs)
    if lines > MAX_OUTPUT_LINES and LESSON_TAG not in cell.get("metadata", {}).get("tags", []):
        raise AssertionError(f"the cell's output is {lines} lines, over {MAX_OUTPUT_LINES}: show a summary and "
                             f"the rows that matter (save or collapse the rest), or tag the cell "
                             f"'{LESSON_TAG}' if the long output is the lesson")
    return result
