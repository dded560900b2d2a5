"""The Hugging Face Hub: whether load_model may and can download weights (asked once, in seconds)."""

from __future__ import annotations

import functools
import os
import socket
import urllib.parse


def hub_offline_by_choice() -> bool:
    """True when $HF_HUB_OFFLINE tells the Hugging Face libraries not to contact the Hub."""
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def hub_unavailable() -> bool:
    """True when the Hub must not or cannot be contacted: $HF_HUB_OFFLINE is set, or it is unreachable."""
    return hub_offline_by_choice() or not hub_reachable(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))


@functools.cache
def hub_reachable(endpoint: str, timeout_s: float = 3.0) -> bool:
    """True if a TCP connection to the Hub's host opens within `timeout_s` (asked once per process).

    Without this, an offline machine waits about 25 s in download retries before each fallback."""
    url = urllib.parse.urlsplit(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=timeout_s).close()
        return True
    except OSError:
        return False
