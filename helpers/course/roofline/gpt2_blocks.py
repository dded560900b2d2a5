"""Chapter 1's model-sized workload: GPT-2 blocks alone (no embeddings, no head), with random weights."""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.gpt2.modeling_gpt2 import GPT2Block

from ...plumbing.device import as_device
from ...plumbing.models import ModelSpec, build_config, fill_random_


class BlockStack(nn.Module):
    """GPT-2 transformer blocks applied in order (no embeddings, no LM head): (B, T, d) -> (B, T, d)."""

    def __init__(self, blocks: list[nn.Module]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            out = block(hidden)
            hidden = out[0] if isinstance(out, tuple) else out  # older transformers return a tuple
        return hidden


def gpt2_blocks(spec: ModelSpec, n_blocks: int, device: torch.device | str | None = None,
                dtype: torch.dtype = torch.float32, attention: str = "sdpa") -> BlockStack:
    """`n_blocks` GPT-2 blocks of `spec`'s size with random weights, built fast (meta device, then filled)."""
    if spec.family != "gpt2":
        raise ValueError(f"spec must be a GPT-2 model, got family {spec.family!r}")
    config = build_config(spec)
    config._attn_implementation = attention  # "eager" makes the attention products visible to FlopCounterMode
    with torch.device("meta"):
        stack = BlockStack([GPT2Block(config, layer_idx=i) for i in range(n_blocks)])
    device = as_device(device)
    stack.to_empty(device=device)
    fill_random_(stack, device)
    with torch.no_grad():
        for buffer in stack.buffers():  # transformers < 5 kept a causal mask and a mask fill value here
            if buffer.dtype == torch.bool:
                buffer.copy_(torch.tril(torch.ones_like(buffer)))
            else:
                buffer.fill_(torch.finfo(buffer.dtype).min)
    return stack.to(dtype).eval()
