"""Long tables on screen: the rows that matter in view, the whole table one click away."""

import pandas as pd
from IPython.display import HTML, display


def show_table(table: pd.DataFrame, rows: int = 10, *, by: str | None = None) -> None:
    """Display `rows` rows of `table` and, collapsed under them, the whole table.

    With `by` (a numeric column) the rows shown are those with the largest |by|, such as the largest errors;
    without it, the first ones. A table of `rows` rows or fewer is displayed as it is.
    """
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    if by is not None and by not in table.columns:
        raise ValueError(f"by must name a column of the table, one of {list(table.columns)}; got {by!r}")
    if len(table) <= rows:
        display(table)
        return
    if by is None:
        top, which = table.head(rows), f"the first {rows}"
    else:
        largest = table[by].abs().sort_values(ascending=False).index[:rows]
        top, which = table.loc[largest], f"the {rows} with the largest |{by}|"
    display(HTML(f"<p>{len(table)} rows; {which}:</p>{top.to_html()}"
                 f"<details><summary>all {len(table)} rows</summary>{table.to_html()}</details>"))
