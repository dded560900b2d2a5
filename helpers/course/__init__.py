"""The course: one module per chapter topic, each built on `formulas` (every closed form, once).

| chapter | module |
|---|---|
| 0. Setup and your hardware | `hardware/`: spec sheets, measured ceilings; `lab`: the first cell's `lab` |
| 1. Compute vs memory bound | `roofline/`: operation costs, op counts (the one dispatch recorder), GPT-2 blocks |
| 2. Prefill vs decode | `phases`: prefill, decode_step, a step at a fixed context, the timed loop; `latency` |
| 3. Attention is quadratic | `attention`: the FLOP split of a block |
| 4. The KV cache | `kv_cache/`: bytes of a real cache, memory plans (tokens that fit), contiguous vs paged |
| 5. Batching and serving | `serving/`: requests, metrics, `simulator/` (a model of a server); `experts` |
| 6. Serving for real | `serving/`: `engine/` (the real engine, in process), `server/` (over HTTP) |
| 7. Faster decode | `faster_decode/`: each optimisation, predicted and measured |
| 8. Predict before you run | `capstone`; `step_time/`: the calibrated step model |
| 9. Prefill meets decode | `serving/`: `engine/` (`live`, `interference`), `simulator/` (`disaggregation`) |
| 10. Beyond one device | `parallel/`: the torchrun launcher, collectives and their fit, the TP step, pipelines |
"""
