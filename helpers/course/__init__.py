"""The course: one module per chapter topic, each built on `formulas` (every closed form, once).

| chapter | module |
|---|---|
| 0. Setup and your hardware | `hardware`: spec sheets, measured ceilings |
| 1. Compute vs memory bound | `roofline`: operations on the roofline, op counts |
| 2. Prefill vs decode | `phases`: prefill, decode_step, the timed loop; `latency`: TTFT, TPOT, ITL, E2EL |
| 3. Attention is quadratic | `attention`: the FLOP split of a block |
| 4. The KV cache | `kv_cache`: bytes of a real cache, memory plans, contiguous vs paged |
| 5. Batching and serving | `serving/`: requests, step costs, the simulator, metrics, a client |
"""
