"""Chapters 5, 6 and 9, serving, in three parts and the two things they share:

- `simulator/`: the model of a server, priced by a step cost: the scheduler (`schedule`, `postprocess`), the
  discrete-event simulation of static, continuous and chunked batching, disaggregated prefill and decode, and
  the step trace as a picture (chapters 5 and 9);
- `engine/`: the real engine, in process: transformers' `generate_batch` over a paged KV cache with its steps
  recorded (chapter 6), and the same engine with requests arriving over time, long prompts among them (chapter 9);
- `server/`: over HTTP: `transformers serve` started on loopback and always stopped, a streaming client for any
  OpenAI-compatible server, and what a server adds to its engine's steps (chapter 6);
- `requests`: what arrives (when, prompt and output lengths) and what came back, for all three;
- `metrics`: TTFT, TPOT, ITL, E2EL and goodput, as vLLM's benchmark defines them, for all three.
"""
