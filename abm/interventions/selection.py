"""Choosing at most a given number of agents per replicate, at random or by priority."""

from __future__ import annotations

import torch


def first_per_replicate(rep: torch.Tensor, key: torch.Tensor, limit: torch.Tensor) -> torch.Tensor:
    """Mask of the entries with the ``limit[r]`` smallest ``key`` (in [0, 1)) within each
    replicate ``r``; ties cannot occur across replicates."""
    if rep.numel() == 0:
        return torch.zeros(0, dtype=torch.bool, device=rep.device)
    order = torch.argsort(rep.to(torch.float64) + key.to(torch.float64))
    sorted_rep = rep.index_select(0, order)
    counts = torch.bincount(sorted_rep, minlength=limit.shape[0])
    first = torch.cumsum(counts, 0) - counts
    rank = torch.arange(order.shape[0], device=rep.device) - first.index_select(0, sorted_rep)
    chosen = torch.zeros_like(rep, dtype=torch.bool)
    chosen[order] = rank < limit.index_select(0, sorted_rep)
    return chosen
