"""Who infected whom. Each infection by transmission is put down to one of the infected agent's
infectious contacts of that day, drawn with probability proportional to what the contact added
to the agent's force of infection: with independent exposures, the first to transmit is contact j
with probability c_j / sum_k c_k. The draws come from their own random stream, so an epidemic is
the same whether or not its infections are attributed."""

from __future__ import annotations

import torch


def choose(owner: torch.Tensor, value: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """For each target k = 0..n-1 (``n = u.shape[0]``), the position of one of its pairs (those
    with ``owner == k``), pair i drawn with probability ``value[i]`` / the target's sum, by the
    uniform ``u[k]`` in [0, 1): the pair whose cumulative share first exceeds ``u[k]``.

    Every target must own at least one pair of positive value; pairs of value 0 are never drawn.
    The shares come from one float64 running sum over all the targets' pairs, so a pair's chance
    is exact to about 1e-16 of that whole sum (a target whose force is 1e-12 of the day's total
    still has its shares to within 1e-4 of their own size).
    """
    n = u.shape[0]
    if n == 0:
        return owner[:0]
    order = torch.argsort(owner, stable=True)
    owner_s = owner.index_select(0, order)
    cum = torch.cumsum(value.index_select(0, order).double(), 0)
    counts = torch.bincount(owner_s, minlength=n)
    if bool((counts == 0).any()):
        raise ValueError("choose: a target without any pair")
    end = torch.cumsum(counts, 0)
    start = end - counts
    zero = torch.zeros(1, dtype=cum.dtype, device=cum.device)
    before = torch.cat([zero, cum]).index_select(0, start)
    total = cum.index_select(0, end - 1) - before
    if bool((total <= 0).any()):
        raise ValueError("choose: a target whose pairs carry nothing")
    goal = before + u.double() * total
    pick = torch.searchsorted(cum, goal, right=True)
    pick = torch.minimum(torch.maximum(pick, start), end - 1)  # rounding at a target's last pair
    return order.index_select(0, pick)
