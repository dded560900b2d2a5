"""Chapters 5, 6 and 9, batching and serving: requests, step costs, the scheduler simulator, metrics, an HTTP client,
the engine in-process, prefill meeting decode, disaggregation."""
