"""Chapter 5 and 6, a client for any OpenAI-compatible server: replay requests, one time stamp per generated token.

Works unchanged against `transformers serve`, vLLM, SGLang or any endpoint that streams /v1/completions (or
/v1/chat/completions) and reports `usage`. Metric definitions follow vLLM's benchmark
(vllm/benchmarks/lib/endpoint_request_func.py and serve.py):

- the clock of a request starts when it is sent; TTFT is the first chunk that carries choices;
- the server's token count comes from `usage.completion_tokens` (asked with the standard
  `stream_options: {"include_usage": true}`), never from text chunks;
- E2EL is the last token chunk; TPOT = (E2EL - TTFT) / (tokens - 1), as vLLM computes it from usage.

A chunk may carry several tokens; `stamps.token_stamps` gives every token its chunk's arrival time, so every
served request has exactly `usage.completion_tokens` stamps.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ....plumbing.contention import watch
from ..requests import Request, Served, as_tokenizer, prompt_text
from .stamps import token_stamps

# "vllm" and "sglang" add the ignore_eos field both accept; "openai" (any other server, `transformers serve` among
# them, which rejects unknown fields with HTTP 422) gets standard fields only.
SERVERS = ("openai", "vllm", "sglang")
IGNORE_EOS_SERVERS = ("vllm", "sglang")
APPROXIMATE_SHARE = 0.1  # a server's prompt count this far from the one asked earns a warning


class ServerError(RuntimeError):
    """A request failed: the server refused it, broke off the stream, or took longer than allowed."""

    def __init__(self, message: str, token_times: Sequence[float] = ()):
        super().__init__(message)
        self.token_times = list(token_times)  # stamps of the tokens that did arrive before the failure


def list_models(url: str, timeout: float = 5.0) -> list[str]:
    """The model ids a server's /v1/models lists; urllib's and json's errors reach the caller."""
    with urllib.request.urlopen(url.rstrip("/") + "/v1/models", timeout=timeout) as response:
        return [m.get("id") for m in json.load(response).get("data", [])]


def check_server(url: str, model: str | None = None, timeout: float = 5.0) -> list[str]:
    """Ask /v1/models and return the ids served; raise a clear error if nothing answers at `url` or `model`
    (when given) is not among the models served."""
    base = url.rstrip("/")
    try:
        models = list_models(base, timeout)
    except urllib.error.HTTPError as err:
        raise ConnectionError(f"{base}/v1/models answered HTTP {err.code}: is {base} an OpenAI-compatible "
                              "server?") from err
    except (urllib.error.URLError, OSError, json.JSONDecodeError) as err:
        reason = getattr(err, "reason", err)
        raise ConnectionError(f"no OpenAI-compatible server answers at {base} ({reason}); start one (e.g. "
                              "helpers.serve_model) or check the URL") from err
    if model is not None and models and model not in models:
        raise ValueError(f"model {model!r} is not served at {base}; it serves {models}")
    return models


def _payload(model: str, prompt: str, max_tokens: int, server: str, chat: bool) -> dict:
    """The request body: standard OpenAI fields, plus ignore_eos only for servers that accept it (vLLM, SGLang)."""
    if server not in SERVERS:
        raise ValueError(f"server must be one of {SERVERS}, got {server!r}")
    body: dict = {"model": model, "stream": True, "temperature": 0.0, "stream_options": {"include_usage": True}}
    if chat:
        body |= {"messages": [{"role": "user", "content": prompt}], "max_completion_tokens": max_tokens}
    else:
        body |= {"prompt": prompt, "max_tokens": max_tokens}
    if server in IGNORE_EOS_SERVERS:
        body["ignore_eos"] = True  # generate exactly max_tokens; not an OpenAI field, so only where accepted
    return body


def _chunk_tokens(choice: dict) -> int | None:
    """How many tokens a streamed choice carries, when the server says (logprobs); None when it does not."""
    logprobs = choice.get("logprobs") or {}
    for key in ("tokens", "content"):  # completions: logprobs.tokens; chat: logprobs.content
        if isinstance(logprobs.get(key), list):
            return len(logprobs[key])
    return None


def _post_stream(url: str, body: dict, deadline: float):
    """Open a streaming POST; yield each `data:` payload; the whole exchange must end before `deadline`."""
    parts = urllib.parse.urlsplit(url)
    connection_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    remaining = deadline - time.perf_counter()
    conn = connection_type(parts.hostname, parts.port, timeout=max(0.01, remaining))
    try:
        conn.request("POST", parts.path, json.dumps(body), {"Content-Type": "application/json"})
        sock = conn.sock  # the response keeps reading from it even where the connection lets go of it
        response = conn.getresponse()
        if response.status != 200:
            detail = response.read(2000).decode(errors="replace").strip()
            raise ServerError(f"HTTP {response.status} from {url}: {detail}")
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError
            sock.settimeout(remaining)
            raw = response.readline()
            if not raw:
                return
            line = raw.decode(errors="replace").strip()
            if line.startswith("data:"):
                yield line[len("data:"):].strip()
    finally:
        conn.close()


def _stream(url: str, model: str, prompt: str, max_tokens: int, timeout: float, server: str,
            chat: bool) -> tuple[list[float], int | None]:
    """One streamed request: seconds from sending it to each generated token, and the server's prompt tokens."""
    endpoint = url.rstrip("/") + ("/v1/chat/completions" if chat else "/v1/completions")
    body = _payload(model, prompt, max_tokens, server, chat)
    start = time.perf_counter()
    chunk_times: list[float] = []
    chunk_tokens: list[int | None] = []
    usage_tokens = prompt_tokens = None
    finished = False

    def partial() -> list[float]:  # what arrived, one stamp per chunk: a failed request keeps its chunks
        return list(chunk_times)

    try:
        for data in _post_stream(endpoint, body, start + timeout):
            if data == "[DONE]":
                finished = True
                break
            chunk = json.loads(data)
            if "error" in chunk:
                raise ServerError(f"the server broke off the stream: {chunk['error']}", partial())
            if chunk.get("usage") and chunk["usage"].get("completion_tokens") is not None:
                usage_tokens = int(chunk["usage"]["completion_tokens"])
                prompt_tokens = chunk["usage"].get("prompt_tokens")
            choices = chunk.get("choices") or []
            if not choices:
                continue
            choice = choices[0]
            text = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
            n = _chunk_tokens(choice)
            if text or n:  # a chunk that carries a token (an empty closing chunk with finish_reason does not)
                chunk_times.append(time.perf_counter() - start)
                chunk_tokens.append(n)
            if choice.get("finish_reason"):
                finished = True
    except TimeoutError as err:
        raise ServerError(f"no complete answer from {endpoint} within {timeout:g} s", partial()) from err
    except (OSError, http.client.HTTPException, json.JSONDecodeError) as err:
        raise ServerError(f"the stream from {endpoint} broke: {type(err).__name__}: {err}", partial()) from err
    except ServerError as err:
        err.token_times = err.token_times or partial()
        raise
    if not finished:
        raise ServerError(f"the stream from {endpoint} ended without finish_reason or [DONE]", partial())
    if usage_tokens is None:
        known = [n for n in chunk_tokens if n is not None]
        if not chunk_times or len(known) < len(chunk_tokens):
            raise ServerError(f"{endpoint} reported no usage.completion_tokens: its tokens cannot be counted",
                              partial())
        usage_tokens = sum(known)
    if usage_tokens == 0:
        return [], prompt_tokens
    if not chunk_times:
        raise ServerError(f"{endpoint} reported {usage_tokens} tokens but streamed none")
    try:
        return token_stamps(chunk_times, chunk_tokens, usage_tokens), prompt_tokens
    except ValueError as err:
        raise ServerError(str(err), partial()) from err


def stream_completion(url: str, model: str, prompt: str, max_tokens: int, timeout: float = 60.0,
                      server: str = "openai", chat: bool = False) -> list[float]:
    """Send one streaming completion; return the seconds from sending it to each of its tokens (one each).

    server="vllm" or "sglang" adds their ignore_eos; chat=True uses /v1/chat/completions. Raises ServerError if the
    server refuses the request, breaks off the stream or takes longer than `timeout` seconds in all."""
    return _stream(url, model, prompt, max_tokens, timeout, server, chat)[0]


def benchmark_server(url: str, model: str, requests: Sequence[Request], timeout: float = 60.0,
                     server: str = "openai", chat: bool = False, check: bool = True,
                     seed: int | None = None, tokenizer=None) -> list[Served]:
    """Replay `requests` (arrival times, lengths) against a running server, one thread per request in flight.

    Every request comes back as a `Served`, in order: a failed one keeps its error and the tokens that came.
    `timeout` bounds each request (seconds from sending it). check: first ask /v1/models, so a wrong URL or
    model id fails within seconds with a clear message instead of after the run. Prompts are random
    (`prompt_text`), drawn afresh each call unless `seed` is given, so no run reuses another's prefix cache.
    With the model's `tokenizer` (loaded, or a path or Hub id) each prompt is exactly its `prompt_len` tokens;
    without one it is that many words, exact only for GPT-2-style tokenizers. Either way each `Served` records
    the server's own count (`usage.prompt_tokens`) where it gives one, and a warning says when the counts
    differ by more than 10% on average."""
    if not requests:
        raise ValueError("requests is empty")
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0, got {timeout}")
    if check:
        check_server(url, model)

    rng = np.random.default_rng(seed)
    tokenizer = as_tokenizer(tokenizer)
    prompts = [prompt_text(r.prompt_len, rng, tokenizer) for r in requests]

    def send(r: Request, prompt: str) -> Served:
        time.sleep(max(0.0, start + r.arrival - time.perf_counter()))
        sent = time.perf_counter() - start
        times, prompt_len, error = [], r.prompt_len, ""
        try:
            times, counted = _stream(url, model, prompt, r.output_len, timeout, server, chat)
            prompt_len = counted or prompt_len  # the server's count, as vLLM's benchmark takes it
        except ServerError as err:
            times, error = err.token_times, str(err)
        return Served(Request(r.id, sent, prompt_len, r.output_len), [sent + t for t in times], error=error)

    start = time.perf_counter()
    with watch(), ThreadPoolExecutor(max_workers=min(256, len(requests))) as pool:  # contention: for the checks
        served = list(pool.map(send, requests, prompts))
    warn_if_lengths_differ(requests, served)
    return served


def warn_if_lengths_differ(asked: Sequence[Request], served: Sequence[Served]) -> None:
    """Warn when the server counted the prompts as other lengths than asked (another model's tokenizer)."""
    counted = sum(s.request.prompt_len for s in served if s.ok)
    meant = sum(r.prompt_len for r, s in zip(asked, served, strict=True) if s.ok)
    if meant and abs(counted / meant - 1) > APPROXIMATE_SHARE:
        warnings.warn(f"the server counted the prompts as {counted / meant:.2f}x the tokens asked (its "
                      "usage.prompt_tokens, kept in each Served): pass the model's tokenizer for exact lengths",
                      stacklevel=3)
