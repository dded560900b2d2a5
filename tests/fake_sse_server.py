"""A fake OpenAI-compatible server for the client's tests: lists one model, streams completions as SSE."""

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer


class FakeOpenAI(BaseHTTPRequestHandler):
    """Lists the model "fake"; streams max_tokens one-word chunks, then usage, in the completions SSE format."""

    count_prompt: Callable[[str], int] = staticmethod(lambda prompt: 3)  # the usage.prompt_tokens it reports

    def do_GET(self):  # noqa: N802 (the http.server API)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"data": [{"id": "fake"}]}).encode())

    def do_POST(self):  # noqa: N802 (the http.server API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        n = body["max_tokens"]
        for i in range(n):
            choice = {"text": " hi", "finish_reason": "length" if i == n - 1 else None}
            self.wfile.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
            self.wfile.flush()
        usage = {"prompt_tokens": self.count_prompt(body["prompt"]), "completion_tokens": n}
        self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def fake_server(count_prompt: Callable[[str], int] | None = None) -> Iterator[str]:
    """Serve FakeOpenAI on a free loopback port from a thread; yield its URL; shut it down after.

    count_prompt: how the server counts a prompt's tokens (default: 3, whatever the prompt)."""
    handler = FakeOpenAI
    if count_prompt is not None:
        handler = type("CountingFakeOpenAI", (FakeOpenAI,), {"count_prompt": staticmethod(count_prompt)})
    server = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
