"""Build a synthetic population from a region's figures, deterministically from a seed.

Steps: agents per tract (largest remainder) and age band (systematic rounding: exact tract
totals, unbiased band counts); long-term care residents by age; households sampled from each
tract's size distribution with a coherent composition (children live with adults of parent age,
couples of similar age, single adults); schools by age near home; workplaces by sector and
establishment size; facility staff.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from abm.populations.population import LONG_TERM_CARE, SCHOOL, Population, ten_year_group
from abm.populations.region import Region, RegionFigures

ADULT_AGE = 18


def floored_quotas(weights: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The quotas of ``total`` proportional to ``weights``, their floors, and how many the floors
    leave over (all zero when there is nothing to share)."""
    w = np.asarray(weights, dtype=np.float64)
    if total <= 0 or w.sum() <= 0:
        return np.zeros(w.shape), np.zeros(w.shape, dtype=np.int64), 0
    quota = w / w.sum() * total
    base = np.floor(quota).astype(np.int64)
    return quota, base, total - int(base.sum())


def largest_remainder(weights: np.ndarray, total: int) -> np.ndarray:
    """Integers proportional to ``weights`` summing exactly to ``total``."""
    quota, base, short = floored_quotas(weights, total)
    if short > 0:
        base[np.argsort(-(quota - base), kind="stable")[:short]] += 1
    return base


def systematic_round(weights: np.ndarray, total: int, rng: np.random.Generator) -> np.ndarray:
    """Integers summing exactly to ``total`` whose expectations are proportional to ``weights``:
    each entry gets the floor of its quota, and the agents left over go to entries drawn by
    systematic sampling on the quotas' fractional parts (an entry gets one more with probability
    equal to its fractional part). Unlike :func:`largest_remainder`, small quotas are not
    starved: with 18 age bands and a dozen agents per tract, largest remainder gave the small
    old-age bands almost nobody (65+ 8% of 5,000 agents against 12.7%)."""
    quota, base, short = floored_quotas(weights, total)
    if short > 0:
        edges = np.cumsum(quota - base)
        edges *= short / edges[-1]  # the fractional parts sum to ``short`` up to rounding
        points = rng.random() + np.arange(short)
        base += np.bincount(np.searchsorted(edges, points, side="right"), minlength=base.shape[0])[: base.shape[0]]
    return base


def rate_by_age(table: list[tuple[int, int, float]], ages: np.ndarray) -> np.ndarray:
    """Look up ``[first, last, value]`` rows by single-year age (0 outside every row)."""
    out = np.zeros(ages.shape, dtype=np.float64)
    for lo, hi, value in table:
        out[(ages >= lo) & (ages <= hi)] = value
    return out


def draw_sizes(rng: np.random.Generator, brackets: list[tuple[int, int, float]], total: int) -> np.ndarray:
    """Group sizes drawn from ``[first, last, weight]`` brackets until they hold ``total``
    people; the last group takes the remainder."""
    if total <= 0:
        return np.zeros(0, dtype=np.int64)
    lo = np.array([b[0] for b in brackets], dtype=np.int64)
    hi = np.array([b[1] for b in brackets], dtype=np.int64)
    w = np.array([b[2] for b in brackets], dtype=np.float64)
    mean = float((w * (lo + hi) / 2).sum() / w.sum())
    sizes: list[np.ndarray] = []
    held = 0
    while held < total:
        k = max(8, int(1.5 * (total - held) / mean) + 8)
        b = rng.choice(len(w), size=k, p=w / w.sum())
        s = rng.integers(lo[b], hi[b] + 1)
        sizes.append(s)
        held += int(s.sum())
    sizes_all = np.concatenate(sizes)
    end = np.cumsum(sizes_all)
    n = int(np.searchsorted(end, total)) + 1
    sizes_all = sizes_all[:n].copy()
    sizes_all[-1] -= int(end[n - 1]) - total
    return sizes_all


def fill_in_order(capacity: np.ndarray, amount: int) -> np.ndarray:
    """Give ``amount`` units to slots in order, each up to its capacity."""
    before = np.cumsum(capacity) - capacity
    return np.clip(amount - before, 0, capacity)


def build_tract_households(
    rng: np.random.Generator, ages: np.ndarray, hh_weights: np.ndarray, size_7up: int
) -> tuple[np.ndarray, np.ndarray]:
    """Arrange one tract's non-institutional residents into households.

    Returns the members' ages in household order and the household sizes.
    """
    m = ages.shape[0]
    if m == 0:
        return ages, np.zeros(0, dtype=np.int64)
    size_values = np.array([1, 2, 3, 4, 5, 6, size_7up])
    w = hh_weights / hh_weights.sum()
    mean = float((w * size_values).sum())
    sizes = size_values[rng.choice(7, size=int(m / mean * 1.3) + 16, p=w)]
    while sizes.sum() < m:
        sizes = np.concatenate([sizes, size_values[rng.choice(7, size=16, p=w)]])
    end = np.cumsum(sizes)
    h = int(np.searchsorted(end, m)) + 1
    sizes = sizes[:h].copy()
    sizes[-1] -= int(end[h - 1]) - m

    # Each household needs an adult. Where the tract's figures leave more children than places
    # beside an adult (student areas: the 10-19 band is mostly 18-19 there), the oldest of the
    # 10-17 year olds are 18-19 instead (which moves them to another age band).
    excess = int((ages < ADULT_AGE).sum()) - int(np.maximum(sizes - 1, 0).sum())
    if excess > 0:
        teens = np.flatnonzero((ages >= 10) & (ages < ADULT_AGE))
        older = teens[np.argsort(-ages[teens], kind="stable")][:excess]
        ages = ages.copy()
        ages[older] = rng.integers(ADULT_AGE, 20, older.shape[0])
    is_child = ages < ADULT_AGE
    children = rng.permutation(ages[is_child])
    adults = ages[~is_child]
    n_child = children.shape[0]
    # Child places: two adults and the rest children first; then single parents.
    pref = np.maximum(sizes - 2, 0)
    most = np.maximum(sizes - 1, 0)
    order = rng.permutation(h)
    kids = np.zeros(h, dtype=np.int64)
    kids[order] = fill_in_order(pref[order], n_child)
    extra = n_child - int(kids.sum())
    if extra > 0:
        kids[order] += fill_in_order((most - pref)[order], extra)
    left = n_child - int(kids.sum())
    if left > 0:  # more children under 10 than places beside an adult: the oldest take adult places
        children = np.sort(children)
        adults = np.concatenate([adults, children[-left:]])
        children = rng.permutation(children[:-left])
    n_adult_slots = sizes - kids
    # Target ages for adult places, then rank-match real adult ages to targets so that the
    # age marginals stay exact while household members get coherent ages.
    kid_owner = np.repeat(np.arange(h), kids)
    oldest = np.full(h, -1, dtype=np.int64)
    np.maximum.at(oldest, kid_owner, children.astype(np.int64))
    has_kids = oldest >= 0
    head = np.where(
        has_kids,
        np.maximum(oldest + 28 + rng.normal(0, 6, h), oldest + ADULT_AGE + 2),
        rng.choice(adults, size=h) if adults.size else 30.0,
    )
    slot_owner = np.repeat(np.arange(h), n_adult_slots)
    rank = np.arange(slot_owner.shape[0]) - np.repeat(np.cumsum(n_adult_slots) - n_adult_slots, n_adult_slots)
    target = head[slot_owner].astype(np.float64)
    partner = rank == 1
    target[partner] += rng.normal(0, 3, int(partner.sum()))
    others = rank >= 2
    n_others = int(others.sum())
    target[others] = np.where(
        has_kids[slot_owner[others]],
        ADULT_AGE + 2 + rng.normal(0, 2, n_others),
        rng.choice(adults, size=n_others) if adults.size else 30.0,
    )
    target += rng.uniform(0, 1e-3, target.shape)
    placed = np.empty_like(adults)
    placed[np.argsort(target, kind="stable")] = np.sort(adults, kind="stable")
    # Members in household order: adults then children.
    out = np.empty(m, dtype=ages.dtype)
    start = np.cumsum(sizes) - sizes
    adult_pos = np.repeat(start, n_adult_slots) + rank
    out[adult_pos] = placed
    kid_rank = np.arange(children.shape[0]) - np.repeat(np.cumsum(kids) - kids, kids)
    out[np.repeat(start + n_adult_slots, kids) + kid_rank] = children
    return out, sizes


def chunk_groups(members: np.ndarray, sizes: np.ndarray, first_id: int) -> np.ndarray:
    """Group ids for ``members`` cut into consecutive runs of ``sizes``."""
    return first_id + np.repeat(np.arange(sizes.shape[0]), sizes)[: members.shape[0]]


def build_population(region: Region, agents: int, seed: int) -> Population:
    """Build ``agents`` agents for ``region``; the same seed gives the same population."""
    fig: RegionFigures = region.figures
    rng = np.random.default_rng([seed, 0x504F50])
    bands = region.band_counts()
    per_tract = largest_remainder(bands.sum(axis=1), agents)
    band_lo = np.array([b[0] for b in fig.age_bands.values()])
    band_hi = np.array([b[1] for b in fig.age_bands.values()])
    hh_counts = region.household_counts()
    county_hh = hh_counts.sum(axis=0)

    ages_out, tract_out, hh_sizes, ltc_ages, ltc_tract = [], [], [], [], []
    for t in range(bands.shape[0]):
        n_band = systematic_round(bands[t], int(per_tract[t]), rng)
        band = np.repeat(np.arange(bands.shape[1]), n_band)
        ages = rng.integers(band_lo[band], band_hi[band] + 1).astype(np.int16)
        in_care = rng.random(ages.shape[0]) < rate_by_age(fig.long_term_care.residence_rate, ages)
        ltc_ages.append(ages[in_care])
        ltc_tract.append(np.full(int(in_care.sum()), t, dtype=np.int32))
        weights = hh_counts[t] if hh_counts[t].sum() > 0 else county_hh
        members, sizes = build_tract_households(rng, ages[~in_care], weights, fig.household_size_7up)
        ages_out.append(members)
        tract_out.append(np.full(members.shape[0], t, dtype=np.int32))
        hh_sizes.append(sizes)

    # Long-term care residents come after all households, in tract order, each in a one-person
    # household of their own room.
    ltc_a = np.concatenate(ltc_ages)
    age = np.concatenate([*ages_out, ltc_a]).astype(np.int16)
    tract = np.concatenate([*tract_out, *ltc_tract]).astype(np.int32)
    household_size = np.concatenate([*hh_sizes, np.ones(ltc_a.shape[0], dtype=np.int64)]).astype(np.int32)
    household_start = np.cumsum(household_size) - household_size
    household = np.repeat(np.arange(household_size.shape[0], dtype=np.int32), household_size)
    n = age.shape[0]
    long_term_care = np.zeros(n, dtype=bool)
    long_term_care[n - ltc_a.shape[0] :] = True
    age_group = ten_year_group(age)

    sectors = list(fig.sectors)
    categories = [*sectors, SCHOOL, LONG_TERM_CARE]
    school_cat, ltc_cat = len(sectors), len(sectors) + 1
    group = np.full(n, -1, dtype=np.int32)
    group_category: list[np.ndarray] = []
    next_id = 0

    def add_groups(members: np.ndarray, sizes: np.ndarray, category: int) -> np.ndarray:
        nonlocal next_id
        ids = chunk_groups(members, sizes, next_id)
        group[members] = ids
        group_category.append(np.full(sizes.shape[0], category, dtype=np.int16))
        next_id += sizes.shape[0]
        return sizes

    # Long-term care facilities (residents are in tract order, so facilities are local).
    ltc_members = np.flatnonzero(long_term_care)
    ltc_sizes = draw_sizes(rng, fig.long_term_care.sizes, ltc_members.shape[0])
    ltc_first = next_id
    add_groups(ltc_members, ltc_sizes, ltc_cat)

    # Schools by type, pupils in agent order (tract order along the curve, so schools are local).
    enrolled = (rng.random(n) < rate_by_age(fig.school_enrollment, age)) & ~long_term_care
    brackets = fig.school_size_brackets
    school_first = next_id
    for kind, (lo, hi) in fig.school_types.items():
        pupils = np.flatnonzero(enrolled & (age >= lo) & (age <= hi) & (group < 0))
        shares = fig.school_size_shares[kind]
        table = [(a, b, s) for (a, b), s in zip(brackets, shares, strict=True) if s > 0]
        add_groups(pupils, draw_sizes(rng, table, pupils.shape[0]), school_cat)
    school_last = next_id
    school_sizes = np.bincount(group[group >= school_first] - school_first, minlength=school_last - school_first)

    # Workers by age, then sector; schools and facilities take their staff first.
    employed = (rng.random(n) < rate_by_age(fig.employment_rate, age)) & (group < 0) & ~long_term_care
    sector_w = np.array(list(fig.sectors.values()), dtype=np.float64)
    workers = np.flatnonzero(employed)
    sector_of = rng.choice(len(sectors), size=workers.shape[0], p=sector_w / sector_w.sum())
    staff_plan = [
        ("EDUCATION", school_first, school_sizes[: school_last - school_first], fig.pupils_per_staff),
        ("HEALTHCARE", ltc_first, ltc_sizes, fig.long_term_care.residents_per_staff),
    ]
    staff_sectors = [sectors.index(name) for name, *_ in staff_plan if name in sectors]
    for sector_name, first, sizes, ratio in staff_plan:
        if sector_name not in sectors or sizes.shape[0] == 0:
            continue
        s = sectors.index(sector_name)
        need = rng.permutation(np.repeat(np.arange(sizes.shape[0]), np.ceil(sizes / ratio).astype(np.int64)))
        short = need.shape[0] - int((sector_of == s).sum())
        if short > 0:
            # The sector shares leave too few workers for the places' staff ratios (EDUCATION's
            # share is 1.9%): the shortfall joins the sector from the other (non-staff) sectors.
            others = np.flatnonzero(~np.isin(sector_of, staff_sectors))
            sector_of[rng.choice(others, size=min(short, others.shape[0]), replace=False)] = s
        pool = rng.permutation(workers[sector_of == s])
        need = need[: pool.shape[0]]  # no workers left at all: places stay short (README)
        group[pool[: need.shape[0]]] = first + need
    for s, _ in enumerate(sectors):
        staff = rng.permutation(workers[(sector_of == s) & (group[workers] < 0)])
        add_groups(staff, draw_sizes(rng, fig.workplace_sizes, staff.shape[0]), s)

    tracts = region.tracts[["geoid", "name", "lat", "lon", "land_km2"]].copy()
    tracts["residents"] = bands.sum(axis=1)
    tracts["agents"] = np.bincount(tract, minlength=len(tracts))
    return Population(
        age=age,
        age_group=age_group,
        tract=tract,
        household=household,
        household_start=household_start.astype(np.int64),
        household_size=household_size,
        long_term_care=long_term_care,
        group=group,
        group_category=np.concatenate(group_category) if group_category else np.zeros(0, np.int16),
        categories=categories,
        tracts=pd.DataFrame(tracts).reset_index(drop=True),
        region_name=fig.name,
    )
