"""Plumbing: what every chapter uses and no chapter teaches.

device (where and in what dtype), profile (sweep sizes), timing (benchmark, time_alternating), sweeps
(interleaved, OOM-tolerant), memory (measure_memory, record_oom, CPU allocations), models (registry, any
architecture's spec, load_model, random weights), hub (is the Hub reachable), tokenizer (offline BPE), compat
(the KV cache across transformers versions), results (tables and reference/), plots, widgets, checks
(self-checks and answers), validate (argument errors), fits (slopes and lines), setup (the first cell of every
notebook, without the course's measured ceilings). Nothing here imports from `helpers.course`.
"""
