"""Serving over HTTP (chapters 6 and 9): `transformers serve` on loopback, always stopped (`serve_model`), a
streaming client for any OpenAI-compatible server (`benchmark_server`), and what the server adds to its
engine's steps (`probe_server_costs`)."""

from .client import (
                     APPROXIMATE_SHARE,
                     IGNORE_EOS_SERVERS,
                     SERVERS,
                     ServerError,
                     benchmark_server,
                     check_server,
                     list_models,
                     stream_completion,
                     warn_if_lengths_differ,
)
from .costs import ServerCosts, StreamingStepCost, probe_server_costs, simulate_server, thread_cpu_s
from .launch import (
                     HOST,
                     Server,
                     free_port,
                     held_back_tokens,
                     save_lab_model,
                     save_model_folder,
                     serve_command,
                     serve_model,
                     wait_until_ready,
)
from .stamps import token_stamps

__all__ = ["APPROXIMATE_SHARE", "HOST", "IGNORE_EOS_SERVERS", "SERVERS", "Server", "ServerCosts", "ServerError",
           "StreamingStepCost", "benchmark_server", "check_server", "free_port", "held_back_tokens", "list_models",
           "probe_server_costs", "save_lab_model", "save_model_folder", "serve_command", "serve_model",
           "simulate_server", "stream_completion", "thread_cpu_s", "token_stamps", "wait_until_ready",
           "warn_if_lengths_differ"]
