"""Chapter 5, batching and serving: requests, step costs, the scheduler simulator, metrics, an HTTP client."""
