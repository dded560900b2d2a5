"""Links between devices, from their spec sheets, and the alpha-beta model that prices a message on one: a fixed
latency plus its bytes over a bandwidth.

- `AlphaBeta`: seconds of a message of n bytes, alpha_s + n / bandwidth; fitted on timed collectives in chapter
  10 (`parallel.collectives.fit_alpha_beta`) or set from a link;
- `Link` and `LINKS`: NVLink, PCIe, InfiniBand and Ethernet from their spec sheets, with an assumed latency; a
  link prices a ring all-reduce or all-gather (chapter 10) and one message sent once (`Link.send`);
- `kv_transfer_s`: a prompt's KV cache sent from a prefill instance to a decode instance (chapter 9)."""

from __future__ import annotations

from dataclasses import dataclass

from ...plumbing.validate import non_negative, positive, positive_int


@dataclass(frozen=True)
class AlphaBeta:
    """A collective's seconds for a message of n bytes: alpha_s + n / bandwidth (bytes/s of the message)."""

    alpha_s: float
    bandwidth: float
    source: str = "measured"  # "measured" here, or where the figures come from

    def __post_init__(self):
        non_negative("alpha_s", self.alpha_s)
        positive("bandwidth", self.bandwidth)

    def __call__(self, nbytes: float) -> float:
        """Predicted seconds for one collective on a message of `nbytes` bytes."""
        return self.alpha_s + non_negative("nbytes", nbytes) / self.bandwidth


@dataclass(frozen=True)
class Link:
    """A link between two GPUs: its bandwidth each way from a spec sheet, and an assumed latency per collective."""

    name: str
    bandwidth: float  # bytes/s each way, per GPU (spec sheet)
    latency_s: float  # seconds a small collective takes (assumed, not on a spec sheet)
    source: str

    def allreduce(self, tp: int) -> AlphaBeta:
        """A ring all-reduce over `tp` GPUs: each sends and receives 2 (tp - 1) / tp of the message."""
        tp = positive_int("tp", tp)
        return AlphaBeta(self.latency_s, self.bandwidth * tp / (2 * max(tp - 1, 1)), f"{self.name} (spec)")

    def send(self) -> AlphaBeta:
        """One message sent once, one way: the link's latency, then its bytes at the link's bandwidth."""
        return AlphaBeta(self.latency_s, self.bandwidth, f"{self.name} (spec)")

    def allgather(self, tp: int) -> AlphaBeta:
        """A ring all-gather over `tp` GPUs: each receives (tp - 1) / tp of the gathered message."""
        tp = positive_int("tp", tp)
        return AlphaBeta(self.latency_s, self.bandwidth * tp / max(tp - 1, 1), f"{self.name} (spec)")


# Bandwidths from the spec sheets, each way (the sheets give both directions together). The latencies are assumed,
# of the order nccl-tests reports for small all-reduces (about 6 us on two H100s over NVLink with CUDA graphs,
# NVIDIA/nccl issue 1259); no spec sheet gives them.
LINKS: dict[str, Link] = {link.name: link for link in [
    # NVIDIA H100 SXM datasheet: NVLink 900 GB/s (fourth generation, both directions together).
    Link("NVLink 4 (H100 SXM)", 450e9, 10e-6, "H100 SXM datasheet: 900 GB/s both ways"),
    # NVIDIA HGX platform page (2025): fifth-generation NVLink, 1.8 TB/s a GPU (both directions) on B200 and
    # B300, and across all 72 GPUs of a GB200 or GB300 NVL72 rack.
    Link("NVLink 5 (B200, NVL72)", 900e9, 10e-6, "HGX B200 page: 1.8 TB/s both ways"),
    # NVIDIA H100 PCIe datasheet: PCIe Gen5 128 GB/s (x16, both directions together).
    Link("PCIe Gen5 x16", 64e9, 15e-6, "H100 PCIe datasheet: 128 GB/s both ways"),
    # NVIDIA ConnectX-7 / Quantum-2: InfiniBand NDR, 400 Gb/s a port each way; between two nodes.
    Link("InfiniBand NDR (400 Gb/s)", 50e9, 20e-6, "ConnectX-7 datasheet: 400 Gb/s a port"),
    # NVIDIA ConnectX-8 SuperNIC / Quantum-X800 (announced March 2024, in GB300 NVL72 racks): 800 Gb/s a port.
    Link("InfiniBand XDR (800 Gb/s)", 100e9, 20e-6, "ConnectX-8 SuperNIC: 800 Gb/s a port"),
    # IEEE 802.3 100 Gb/s Ethernet (RoCE between two nodes): 100 Gb/s each way; latency assumed above InfiniBand's.
    Link("Ethernet 100 Gb/s", 12.5e9, 30e-6, "IEEE 802.3 100GbE: 100 Gb/s each way"),
]}


def kv_transfer_s(prompt_len: int, kv_bytes_per_token: float, link_bytes_per_s: float,
                  link_latency_s: float = 0.0) -> float:
    """Seconds to send a prompt's KV over a link: latency + prompt_len x bytes per token / bandwidth (one message:
    `AlphaBeta`, as `Link.send` prices it)."""
    positive_int("prompt_len", prompt_len)
    positive("kv_bytes_per_token", kv_bytes_per_token)
    link = AlphaBeta(non_negative("link_latency_s", link_latency_s), positive("link_bytes_per_s", link_bytes_per_s))
    return link(prompt_len * kv_bytes_per_token)

