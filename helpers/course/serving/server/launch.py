"""Chapter 6, a real server on this machine: `transformers serve` started on loopback, and always stopped.

`serve_model(folder)` starts an OpenAI-compatible HTTP server (continuous batching with a paged KV cache by
default), waits until it answers, warms it up with one request, yields a `Server`, and stops the whole
process group on the way out: normal exit, an error, or a kernel interrupt."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from ....plumbing.compat import MAX_BATCH_TOKENS
from ....plumbing.processes import family, stop, track
from ....plumbing.seat import seat_env
from ....plumbing.validate import positive_int
from .client import list_models, stream_completion

HOST = "127.0.0.1"  # loopback only: the lab never opens a port to the network


@dataclass(frozen=True)
class Server:
    """A running server: its base URL, the model id to send, and how long it took to start and warm up."""

    url: str
    model: str
    start_s: float  # process start until /v1/models answered (the model is loaded by then)
    warmup_s: float  # the first request, which pays one-time costs (cache allocation, first kernels)
    log_path: Path  # what the server wrote (it logs to a file, so a notebook cell stays quiet)
    command: tuple[str, ...]
    pid: int | None = None  # the server's process (its main thread answers HTTP and streams)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def serve_command(model_dir: str | Path, port: int, continuous_batching: bool = True, block_size: int | None = None,
                  num_blocks: int | None = None, max_batch_tokens: int | None = None, device: str = "cpu",
                  dtype: str = "auto", extra_args: Sequence[str] = ()) -> list[str]:
    """The `transformers serve` command line for one model folder on 127.0.0.1:port (None: the engine picks)."""
    cmd = [sys.executable, "-m", "transformers.cli.transformers", "serve", str(model_dir), "--host", HOST,
           "--port", str(port), "--device", device, "--dtype", dtype, "--log-level", "warning",
           "--continuous-batching" if continuous_batching else "--no-continuous-batching"]
    if continuous_batching and num_blocks is not None and max_batch_tokens is None:
        max_batch_tokens = MAX_BATCH_TOKENS  # as 5.24 would pick; 5.17 would size it to fill the memory
    cb_flags = {"--cb-block-size": block_size, "--cb-num-blocks": num_blocks, "--cb-max-batch-tokens": max_batch_tokens}
    for flag, value in cb_flags.items():
        if value is not None:
            if not continuous_batching:
                raise ValueError(f"{flag} needs continuous_batching=True")
            positive_int(flag.lstrip("-").replace("-", "_"), value)
            cmd += [flag, str(value)]
    return cmd + list(extra_args)


def _tail(path: Path, n_lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n_lines:])
    except OSError:
        return ""


def wait_until_ready(url: str, proc: subprocess.Popen, log_path: Path, timeout: float) -> list[str]:
    """Poll /v1/models until the server answers; raise with its log if it exits or takes over `timeout` s."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode} before answering at {url}; "
                               f"its log ({log_path}) ends with:\n{_tail(log_path, 30)}")
        try:
            return list_models(url, timeout=2.0)  # empty from transformers 5.17 (it lists the Hub cache only)
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            time.sleep(0.25)  # not answering yet
    raise TimeoutError(f"no answer at {url}/v1/models after {timeout:.0f} s; the server's log ends with:\n"
                       f"{_tail(log_path, 30)}")


@contextlib.contextmanager
def serve_model(model_dir: str | Path, port: int | None = None, continuous_batching: bool = True,
                block_size: int | None = None, num_blocks: int | None = None, max_batch_tokens: int | None = None,
                device: str = "cpu", dtype: str = "auto", startup_timeout: float = 180.0, warmup_tokens: int = 4,
                extra_args: Sequence[str] = ()) -> Iterator[Server]:
    """Run `transformers serve` on 127.0.0.1 for the model folder `model_dir`; yield a `Server`; always stop it.

    block_size, num_blocks, max_batch_tokens: the continuous-batching engine's paged KV cache (tokens per block,
    blocks) and its token budget per step; None lets the engine size them."""
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"{model_dir} has no config.json: save a model there first (save_model_folder)")
    port = port or free_port()
    cmd = serve_command(model_dir, port, continuous_batching, block_size, num_blocks, max_batch_tokens, device,
                        dtype, extra_args)
    url = f"http://{HOST}:{port}"
    hub_cache = tempfile.mkdtemp(prefix="lab-serve-hub-")  # empty: 5.17's /v1/models lists it, or fails without one
    env = {**seat_env(), "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1", "PYTHONUNBUFFERED": "1",
           "HF_HUB_CACHE": hub_cache}
    log_file = tempfile.NamedTemporaryFile("w", prefix="lab-serve-", suffix=".log", delete=False)  # noqa: SIM115
    log_path = Path(log_file.name)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    log_file.close()
    server = psutil.Process(proc.pid)
    track({server})
    try:
        models = wait_until_ready(url, proc, log_path, startup_timeout)
        start_s = time.perf_counter() - t0
        model = str(model_dir) if str(model_dir) in models or not models else models[0]
        t1 = time.perf_counter()
        stream_completion(url, model, "warm up", warmup_tokens, timeout=startup_timeout)
        warmup_s = time.perf_counter() - t1
        yield Server(url, model, start_s, warmup_s, log_path, tuple(cmd), proc.pid)
    finally:
        stop(family(server))
        proc.poll()  # reaped by psutil already: Popen records it
        shutil.rmtree(hub_cache, ignore_errors=True)


def held_back_tokens(tokenizer) -> list[int]:
    """Ids whose text a streaming server never sends on their own: special tokens (left out of the text) and
    byte-level pieces of a character (held back until the character is complete)."""
    special = set(tokenizer.all_special_ids)
    return [i for i in range(len(tokenizer)) if i in special or "\ufffd" in tokenizer.decode([i])]


def save_model_folder(path: str | Path, model, tokenizer, stop_at_eos: bool = False) -> Path:
    """Save a model and its tokenizer where `transformers serve` can load them (config, weights, tokenizer).

    stop_at_eos=False removes the end-of-sequence id from the saved configs, so every request generates
    exactly max_tokens tokens: what vLLM's benchmark gets with ignore_eos, here without a non-standard field.
    It also keeps the model from generating tokens whose text a server holds back (`held_back_tokens`): a
    random-weights model may repeat one for a whole request, which then streams nothing to time.
    """
    from transformers import GenerationConfig  # deferred: transformers loads only when a model is saved
    from transformers.utils import logging as transformers_logging

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    shown = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()  # its "Writing model shards" bar says nothing here
    try:
        model.save_pretrained(path)
    finally:
        if shown:
            transformers_logging.enable_progress_bar()
    tokenizer.save_pretrained(path)
    if not stop_at_eos:
        config = json.loads((path / "config.json").read_text())
        config["eos_token_id"] = None
        (path / "config.json").write_text(json.dumps(config, indent=2))
        generation = GenerationConfig.from_model_config(model.config)
        generation.eos_token_id = None
        generation.suppress_tokens = held_back_tokens(tokenizer) or None
        generation.save_pretrained(path)
    return path


def save_lab_model(name: str, path: str | Path, pretrained: bool = True, stop_at_eos: bool = False) -> Path:
    """Save the lab's model `name` to `path`: the old `helpers.save_lab_model`, kept as a thin wrapper.

    New code loads the model itself and calls `save_model_folder`, which this does (pretrained weights where
    they can be had, else random ones)."""
    from ....plumbing.models import load_model  # deferred: torch and transformers load only when a model is saved

    model, tokenizer = load_model(name, device="cpu", pretrained=pretrained)
    return save_model_folder(path, model, tokenizer, stop_at_eos=stop_at_eos)
