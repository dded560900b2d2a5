"""Widgets: controls that re-call a plain plotting function, so the figure also exists without widgets."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets
from IPython.display import display


def interact_with(fn: Callable[..., object], **controls: object) -> ipywidgets.interactive:
    """Show `controls` (ipywidgets or interact abbreviations) that re-run `fn(**values)` when moved."""
    widget = ipywidgets.interactive(fn, **controls)
    widget.layout = ipywidgets.Layout(max_width="100%")
    display(widget)
    return widget
