"""A library logger quieted for one block: warnings the lab has read and answered, kept off a learner's screen."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_logger(name: str, level: int = logging.ERROR) -> Iterator[None]:
    """Raise logger `name` (and so the loggers below it) to `level` inside the block, then put its level back."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def quiet_transformers() -> Iterator[None]:
    """transformers' own warnings silenced inside the block (its library logger, 'transformers')."""
    return quiet_logger("transformers")
