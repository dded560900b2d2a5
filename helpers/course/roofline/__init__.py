"""Chapter 1, compute vs memory bound: operations on the roofline, op counts, GPT-2 blocks, GPUs' rooflines.

- `costs`: what an operation must do (FLOPs, bytes), its roofline time, measured-vs-predicted tables.
- `op_counts`: the one recorder of dispatched operators, and the counts made from it.
- `gpt2_blocks`: GPT-2 blocks with random weights, the chapter's model-sized workload.
- `gpu_plots`: each GPU's ridge point, and a matmul on this device's roofline and a GPU's (the widget).
"""

from .costs import (
    OpCost,
    beats_roof,
    bound_by,
    matmul_cost,
    predicted_time,
    roofline_row,
    roofline_table,
    rotating_matmul,
    rotating_weights,
    vector_add_cost,
)
from .gpt2_blocks import BlockStack, gpt2_blocks
from .gpu_plots import gpu_ridge_table, measured_matmul_rate, plot_matmul_on_roofline
from .op_counts import DispatchedOp, DispatchRecorder, count_flops, count_ops, launches_kernel, record_dispatch

__all__ = ["BlockStack", "DispatchRecorder", "DispatchedOp", "OpCost", "beats_roof", "bound_by", "count_flops",
           "count_ops", "gpt2_blocks", "gpu_ridge_table", "launches_kernel", "matmul_cost", "measured_matmul_rate",
           "plot_matmul_on_roofline", "predicted_time", "record_dispatch", "roofline_row", "roofline_table",
           "rotating_matmul", "rotating_weights", "vector_add_cost"]
