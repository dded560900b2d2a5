"""The output-length limit that nbval holds notebook cells to (tests/output_length.py)."""

import pytest

import helpers
from tests.output_length import MAX_OUTPUT_LINES, output_lines


def test_output_lines_counts_what_the_reader_scrolls_past():
    printed = {"output_type": "stream", "text": "a\nb\nc\n"}
    table = {"output_type": "execute_result", "data": {
        "text/html": "<table><thead><tr><th>x</th></tr></thead><tbody>" + "<tr><td>1</td></tr>" * 30 + "</tbody>",
        "text/plain": "x\n" + "1\n" * 30}}
    figure = {"output_type": "display_data", "data": {"image/png": "...", "text/plain": "<Figure size 640x480>"}}
    error = {"output_type": "error", "traceback": ["Traceback\n  line", "Error: x"]}
    saved = {"output_type": "stream", "text": ["one\n", "two\n"]}  # a saved notebook keeps a list of lines
    assert output_lines([printed]) == 3
    assert output_lines([table]) == 31 > MAX_OUTPUT_LINES  # header row and 30 body rows
    assert output_lines([figure]) == 0
    assert output_lines([error]) == 3
    assert output_lines([saved, printed]) == 5


def test_show_table_keeps_the_rows_that_matter_in_view(monkeypatch):
    import pandas as pd
    from IPython.core.interactiveshell import InteractiveShell

    table = pd.DataFrame({"error": [0.1, -0.9, 0.3] * 20, "row": range(60)})
    shell = InteractiveShell.instance()
    shown = []
    monkeypatch.setattr(shell.display_pub, "publish",
                        lambda data, **kwargs: shown.append({"output_type": "display_data", "data": data}))
    helpers.show_table(table, 8, by="error")
    html = shown[0]["data"]["text/html"]
    assert "60 rows" in html and html.count("<tr") == 9 + 61  # in view: header and 8 rows; all 60 collapsed
    assert output_lines(shown) == 9
    assert html.split("<details>")[0].count("-0.9") == 8  # the largest |error| first
    with pytest.raises(ValueError, match="by must name a column"):
        helpers.show_table(table, by="missing")
    with pytest.raises(ValueError, match="rows must be >= 1"):
        helpers.show_table(table, 0)
