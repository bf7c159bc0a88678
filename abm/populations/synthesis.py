"""Build a synthetic population from a region's figures, deterministically from a seed.

Steps: agents per tract (largest remainder) and age band (systematic rounding: exact tract
totals, unbiased band counts); long-term care residents by age; households sampled from each
tract's size distribution with a coherent composition (children live with adults of parent age,
couples of similar age, single adults); schools by age near home; workplaces by sector and
establishment size; facility staff.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


def cut_to_total(sizes: np.ndarray, total: int) -> np.ndarray:
    """The leading ``sizes`` that reach ``total`` (they must), the last one cut to fit exactly."""
    end = np.cumsum(sizes)
    n = int(np.searchsorted(end, total)) + 1
    sizes = sizes[:n].copy()
    sizes[-1] -= int(end[n - 1]) - total
    return sizes


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
    return cut_to_total(np.concatenate(sizes), total)


def fill_in_order(capacity: np.ndarray, amount: int) -> np.ndarray:
    """Give ``amount`` units to slots in order, each up to its capacity."""
    before = np.cumsum(capacity) - capacity
    return np.clip(amount - before, 0, capacity)


def _draw_household_sizes(
    rng: np.random.Generator, people: np.ndarray, hh_weights: np.ndarray, size_7up: int
) -> list[np.ndarray]:
    """Each tract's household sizes (1..6, and ``size_7up`` for 7 or more), drawn as one sequence
    through the tracts in order that holds ``people.sum()`` people.

    A tract's households are drawn from its counts (``hh_weights[t]``) until the sequence holds
    the people of the tracts so far; its last household is kept whole, and the next tract draws
    for what is then left. So every household is an unbiased draw of its tract's sizes and only
    the very last one is cut to fit. (Cutting each tract's last household to fit its people made
    households too small where tracts have few agents: mean 2.20 at 5,000 agents against the
    figures' 2.39.) A tract whose people the previous tract's last household already holds gets
    no household of its own.
    """
    size_values = np.array([1, 2, 3, 4, 5, 6, size_7up])
    target = np.cumsum(people)
    placed = 0
    out: list[np.ndarray] = []
    for t in range(people.shape[0]):
        need = int(target[t]) - placed
        if need <= 0:
            out.append(np.zeros(0, dtype=np.int64))
            continue
        w = hh_weights[t] / hh_weights[t].sum()
        mean = float((w * size_values).sum())
        sizes = size_values[rng.choice(7, size=int(need / mean * 1.3) + 16, p=w)]
        while sizes.sum() < need:
            sizes = np.concatenate([sizes, size_values[rng.choice(7, size=16, p=w)]])
        sizes = sizes[: int(np.searchsorted(np.cumsum(sizes), need)) + 1]
        placed += int(sizes.sum())
        out.append(sizes)
    last = max((t for t, sizes in enumerate(out) if sizes.shape[0]), default=None)
    if last is not None:
        out[last][-1] -= placed - int(target[-1])
    return out


def _adults_for_every_household(rng: np.random.Generator, ages: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """``ages`` with an adult for every household: where the tract's figures leave more children
    than places beside an adult (student areas: the 10-19 band is mostly 18-19 there), the
    oldest of the 10-17 year olds are 18-19 instead (which moves them to another age band)."""
    excess = int((ages < ADULT_AGE).sum()) - int(np.maximum(sizes - 1, 0).sum())
    if excess <= 0:
        return ages
    teens = np.flatnonzero((ages >= 10) & (ages < ADULT_AGE))
    older = teens[np.argsort(-ages[teens], kind="stable")][:excess]
    ages = ages.copy()
    ages[older] = rng.integers(ADULT_AGE, 20, older.shape[0])
    return ages


def _child_places(rng: np.random.Generator, sizes: np.ndarray, n_child: int) -> np.ndarray:
    """How many of ``n_child`` children each household takes, households in a random order: first
    the places beside two adults, then those beside a single parent (each household keeps at
    least one adult); fewer than ``n_child`` in all where the places run out."""
    pref = np.maximum(sizes - 2, 0)
    most = np.maximum(sizes - 1, 0)
    order = rng.permutation(sizes.shape[0])
    kids = np.zeros(sizes.shape[0], dtype=np.int64)
    kids[order] = fill_in_order(pref[order], n_child)
    extra = n_child - int(kids.sum())
    if extra > 0:
        kids[order] += fill_in_order((most - pref)[order], extra)
    return kids


def _split_children(
    rng: np.random.Generator, ages: np.ndarray, sizes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The children (in a random order) and the adults of one tract, and how many children each
    household takes. Children beyond the places beside an adult (more under 10 than places) take
    adult places, the oldest of them first."""
    is_child = ages < ADULT_AGE
    children = rng.permutation(ages[is_child])
    adults = ages[~is_child]
    kids = _child_places(rng, sizes, children.shape[0])
    left = children.shape[0] - int(kids.sum())
    if left > 0:
        children = np.sort(children)
        adults = np.concatenate([adults, children[-left:]])
        children = rng.permutation(children[:-left])
    return children, adults, kids


def _place_adults(
    rng: np.random.Generator, adults: np.ndarray, children: np.ndarray, sizes: np.ndarray, kids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Adults' ages in adult-place order (households in order, ``sizes - kids`` places each) and
    each place's rank within its household. A target age per place (the head: parent age of the
    oldest child, or a random adult's age; a partner near the head; others young adults beside
    children, or random adults' ages), then the real adult ages rank-matched to the targets, so
    the age marginals stay exact while household members get coherent ages."""
    h = sizes.shape[0]
    n_adult_slots = sizes - kids
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
    return placed, rank


def build_tract_households(rng: np.random.Generator, ages: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Arrange one tract's non-institutional residents into households of ``sizes`` (which hold
    them all): the members' ages in household order (each household's adults, then its children).
    """
    m = ages.shape[0]
    if m == 0:
        return ages
    ages = _adults_for_every_household(rng, ages, sizes)
    children, adults, kids = _split_children(rng, ages, sizes)
    placed, rank = _place_adults(rng, adults, children, sizes, kids)
    n_adult_slots = sizes - kids
    out = np.empty(m, dtype=ages.dtype)
    start = np.cumsum(sizes) - sizes
    out[np.repeat(start, n_adult_slots) + rank] = placed
    kid_rank = np.arange(children.shape[0]) - np.repeat(np.cumsum(kids) - kids, kids)
    out[np.repeat(start + n_adult_slots, kids) + kid_rank] = children
    return out


def chunk_groups(members: np.ndarray, sizes: np.ndarray, first_id: int) -> np.ndarray:
    """Group ids for ``members`` cut into consecutive runs of ``sizes``."""
    return first_id + np.repeat(np.arange(sizes.shape[0]), sizes)[: members.shape[0]]


@dataclass
class _Residents:
    """Where every agent lives, in agent order: each tract's households in tract order, then the
    long-term care residents (in tract order), each in a one-person household of their own room."""

    age: np.ndarray  # int16 years
    tract: np.ndarray  # int32
    household: np.ndarray  # int32 household index per agent
    household_start: np.ndarray  # first agent of each household
    household_size: np.ndarray  # int32 per household
    long_term_care: np.ndarray  # bool per agent

    @property
    def size(self) -> int:
        """Number of agents."""
        return int(self.age.shape[0])


@dataclass
class _Groups:
    """Occupation groups as they are added: each agent's group id (-1 for none) and each group's
    category; ids are handed out consecutively."""

    group: np.ndarray  # int32 per agent
    category: list[np.ndarray] = field(default_factory=list)  # int16 per group, one array per add
    next_id: int = 0

    def add(self, members: np.ndarray, sizes: np.ndarray, category: int) -> int:
        """Cut ``members`` into consecutive groups of ``sizes`` of ``category``; the first new id."""
        first = self.next_id
        self.group[members] = chunk_groups(members, sizes, first)
        self.category.append(np.full(sizes.shape[0], category, dtype=np.int16))
        self.next_id += sizes.shape[0]
        return first


@dataclass
class _StaffedPlaces:
    """Places that take staff from a sector: the sector, the places' first group id, their
    sizes and how many members one staff member serves."""

    sector: str
    first: int
    sizes: np.ndarray
    members_per_staff: float


def _draw_tract_ages(
    rng: np.random.Generator, band_counts: np.ndarray, agents: int, band_lo: np.ndarray, band_hi: np.ndarray
) -> np.ndarray:
    """One tract's ``agents`` ages: counts per age band by systematic rounding of the band's
    residents, then a uniform single-year age within each agent's band."""
    n_band = systematic_round(band_counts, agents, rng)
    band = np.repeat(np.arange(band_counts.shape[0]), n_band)
    return rng.integers(band_lo[band], band_hi[band] + 1).astype(np.int16)


def _draw_residents(region: Region, bands: np.ndarray, agents: int, rng: np.random.Generator) -> _Residents:
    """Agents per tract (largest remainder), their ages, who lives in long-term care (by age),
    and the households of everyone else (each tract's household sizes, or the county's where the
    tract has none; ``_draw_household_sizes``)."""
    fig = region.figures
    per_tract = largest_remainder(bands.sum(axis=1), agents)
    band_lo = np.array([b[0] for b in fig.age_bands.values()])
    band_hi = np.array([b[1] for b in fig.age_bands.values()])
    hh_counts = region.household_counts().copy()
    empty = hh_counts.sum(axis=1) == 0
    hh_counts[empty] = hh_counts.sum(axis=0)
    home_ages, ltc_ages, ltc_tract = [], [], []
    for t in range(bands.shape[0]):
        ages = _draw_tract_ages(rng, bands[t], int(per_tract[t]), band_lo, band_hi)
        in_care = rng.random(ages.shape[0]) < rate_by_age(fig.long_term_care.residence_rate, ages)
        ltc_ages.append(ages[in_care])
        ltc_tract.append(np.full(int(in_care.sum()), t, dtype=np.int32))
        home_ages.append(ages[~in_care])
    people = np.array([a.shape[0] for a in home_ages], dtype=np.int64)
    tract_sizes = _draw_household_sizes(rng, people, hh_counts, fig.household_size_7up)
    # a household that runs past its tract's people takes the next tracts' first people (the
    # tracts are in map order, so they are neighbours) and lives in the tract where it began
    in_order = np.concatenate(home_ages)
    ends = np.cumsum([int(sizes.sum()) for sizes in tract_sizes])
    ages_out, tract_out = [], []
    for t, sizes in enumerate(tract_sizes):
        members = build_tract_households(rng, in_order[ends[t] - int(sizes.sum()) : ends[t]], sizes)
        ages_out.append(members)
        tract_out.append(np.full(members.shape[0], t, dtype=np.int32))
    ltc_a = np.concatenate(ltc_ages)
    age = np.concatenate([*ages_out, ltc_a]).astype(np.int16)
    household_size = np.concatenate([*tract_sizes, np.ones(ltc_a.shape[0], dtype=np.int64)]).astype(np.int32)
    long_term_care = np.zeros(age.shape[0], dtype=bool)
    long_term_care[age.shape[0] - ltc_a.shape[0] :] = True
    return _Residents(
        age=age,
        tract=np.concatenate([*tract_out, *ltc_tract]).astype(np.int32),
        household=np.repeat(np.arange(household_size.shape[0], dtype=np.int32), household_size),
        household_start=np.cumsum(household_size) - household_size,
        household_size=household_size,
        long_term_care=long_term_care,
    )


def _add_care_facilities(
    rng: np.random.Generator, fig: RegionFigures, residents: _Residents, groups: _Groups, category: int
) -> _StaffedPlaces:
    """Long-term care facilities of drawn sizes, filled with the residents in agent order (tract
    order, so facilities are local); staffed from HEALTHCARE."""
    members = np.flatnonzero(residents.long_term_care)
    sizes = draw_sizes(rng, fig.long_term_care.sizes, members.shape[0])
    first = groups.add(members, sizes, category)
    return _StaffedPlaces("HEALTHCARE", first, sizes, fig.long_term_care.residents_per_staff)


def _add_schools(
    rng: np.random.Generator, fig: RegionFigures, residents: _Residents, groups: _Groups, category: int
) -> _StaffedPlaces:
    """Enrolment by age (not in long-term care), then schools by type: the type's pupils in agent
    order (tract order along the curve, so schools are local) cut into schools of sizes drawn
    from the type's size shares; staffed from EDUCATION."""
    age, group = residents.age, groups.group
    enrolled = (rng.random(residents.size) < rate_by_age(fig.school_enrollment, age)) & ~residents.long_term_care
    brackets = fig.school_size_brackets
    first = groups.next_id
    for kind, (lo, hi) in fig.school_types.items():
        pupils = np.flatnonzero(enrolled & (age >= lo) & (age <= hi) & (group < 0))
        shares = fig.school_size_shares[kind]
        table = [(a, b, s) for (a, b), s in zip(brackets, shares, strict=True) if s > 0]
        groups.add(pupils, draw_sizes(rng, table, pupils.shape[0]), category)
    count = groups.next_id - first
    sizes = np.bincount(group[group >= first] - first, minlength=count)
    return _StaffedPlaces("EDUCATION", first, sizes[:count], fig.pupils_per_staff)


def _draw_workers(
    rng: np.random.Generator, fig: RegionFigures, residents: _Residents, groups: _Groups
) -> tuple[np.ndarray, np.ndarray]:
    """The employed (by age, among agents in no group yet and not in long-term care) and the
    index of each one's sector, drawn from the sector shares."""
    employed = (
        (rng.random(residents.size) < rate_by_age(fig.employment_rate, residents.age))
        & (groups.group < 0)
        & ~residents.long_term_care
    )
    sector_w = np.array(list(fig.sectors.values()), dtype=np.float64)
    workers = np.flatnonzero(employed)
    sector_of = rng.choice(len(fig.sectors), size=workers.shape[0], p=sector_w / sector_w.sum())
    return workers, sector_of


def _hire_staff(
    rng: np.random.Generator,
    sectors: list[str],
    workers: np.ndarray,
    sector_of: np.ndarray,
    plan: list[_StaffedPlaces],
    groups: _Groups,
) -> None:
    """Staff for each place in ``plan``, ceil(members / ratio) a place, from the workers of its
    sector (in ``sector_of``, which gains workers from the non-staff sectors where the sector is
    short); a place's staff join its group."""
    staff_sectors = [sectors.index(p.sector) for p in plan if p.sector in sectors]
    for places in plan:
        if places.sector not in sectors or places.sizes.shape[0] == 0:
            continue
        s = sectors.index(places.sector)
        per_place = np.ceil(places.sizes / places.members_per_staff).astype(np.int64)
        need = rng.permutation(np.repeat(np.arange(places.sizes.shape[0]), per_place))
        short = need.shape[0] - int((sector_of == s).sum())
        if short > 0:
            # The sector shares leave too few workers for the places' staff ratios (EDUCATION's
            # share is 1.9%): the shortfall joins the sector from the other (non-staff) sectors.
            others = np.flatnonzero(~np.isin(sector_of, staff_sectors))
            sector_of[rng.choice(others, size=min(short, others.shape[0]), replace=False)] = s
        pool = rng.permutation(workers[sector_of == s])
        need = need[: pool.shape[0]]  # no workers left at all: places stay short (README)
        groups.group[pool[: need.shape[0]]] = places.first + need


def _add_workplaces(
    rng: np.random.Generator, fig: RegionFigures, workers: np.ndarray, sector_of: np.ndarray, groups: _Groups
) -> None:
    """Each sector's workers not yet on a staff, in a random order, cut into establishments of
    sizes drawn from the workplace size brackets."""
    for s, _ in enumerate(fig.sectors):
        staff = rng.permutation(workers[(sector_of == s) & (groups.group[workers] < 0)])
        groups.add(staff, draw_sizes(rng, fig.workplace_sizes, staff.shape[0]), s)


def _tract_table(region: Region, bands: np.ndarray, tract: np.ndarray) -> pd.DataFrame:
    """The tracts' geography with their census residents and their agents."""
    tracts = region.tracts[["geoid", "name", "lat", "lon", "land_km2"]].copy()
    tracts["residents"] = bands.sum(axis=1)
    tracts["agents"] = np.bincount(tract, minlength=len(tracts))
    return pd.DataFrame(tracts).reset_index(drop=True)


def build_population(region: Region, agents: int, seed: int) -> Population:
    """Build ``agents`` agents for ``region``; the same seed gives the same population.

    The steps draw from one generator in this order: residents and households tract by tract,
    long-term care facilities, schools, workers and their sectors, the staff of schools and
    facilities, then the other workplaces.
    """
    fig: RegionFigures = region.figures
    rng = np.random.default_rng([seed, 0x504F50])
    bands = region.band_counts()
    residents = _draw_residents(region, bands, agents, rng)
    sectors = list(fig.sectors)
    school_cat, ltc_cat = len(sectors), len(sectors) + 1
    groups = _Groups(group=np.full(residents.size, -1, dtype=np.int32))
    facilities = _add_care_facilities(rng, fig, residents, groups, ltc_cat)
    schools = _add_schools(rng, fig, residents, groups, school_cat)
    workers, sector_of = _draw_workers(rng, fig, residents, groups)
    _hire_staff(rng, sectors, workers, sector_of, [schools, facilities], groups)
    _add_workplaces(rng, fig, workers, sector_of, groups)
    return Population(
        age=residents.age,
        age_group=ten_year_group(residents.age),
        tract=residents.tract,
        household=residents.household,
        household_start=residents.household_start.astype(np.int64),
        household_size=residents.household_size,
        long_term_care=residents.long_term_care,
        group=groups.group,
        group_category=np.concatenate(groups.category) if groups.category else np.zeros(0, np.int16),
        categories=[*sectors, SCHOOL, LONG_TERM_CARE],
        tracts=_tract_table(region, bands, residents.tract),
        region_name=fig.name,
        age_bands=tuple((lo, hi) for lo, hi in fig.age_bands.values()),
    )
