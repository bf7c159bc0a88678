"""Counter-based random streams: one generator per (seed, stream, day), so any day's draws can
be re-created without replaying the days before it."""

from __future__ import annotations

import hashlib

import torch


def stream_key(seed: int, stream: str, day: int) -> int:
    """A 63-bit key derived from (seed, stream, day)."""
    digest = hashlib.blake2b(f"{seed}:{stream}:{day}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def generator(seed: int, stream: str, day: int, device: torch.device) -> torch.Generator:
    """A torch generator on ``device`` seeded by (seed, stream, day)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(stream_key(seed, stream, day))
    return gen
