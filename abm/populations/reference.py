"""The reference population of the thesis model's published results (chapter E; the authors'
code, ``initialize_agents_networks.py``), built from its figures:

* ages: nine ten-year groups drawn independently for each agent, with King County census
  counts as weights (so there is no age structure inside households);
* households: sizes 1-6 drawn with King County household counts as weights until every agent
  has one (the last one is cut to fit), filled with agents by consecutive id;
* occupation groups: ages 0-19 form one group ``CHILD``, ages 70+ one group ``ELDERLY``, and
  every agent aged 20-69 joins one of 19 industries drawn independently with King County
  worker counts as weights. Each group is one small-world ring ordered by agent id (the
  engine's occupation layer), so most work contacts join agents with nearby ids.

Every figure is the thesis model's (specs: epidemic model sections 2.1-2.3). The population
has one pseudo-tract (the county), since geography does not enter transmission.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from abm.populations.population import Population
from abm.populations.region import load_region
from abm.populations.synthesis import cut_to_total

# Census counts of the nine age groups 0-9 .. 80+ (sampling weights).
AGE_GROUP_COUNTS = (278_073, 258_328, 317_005, 359_688, 323_457, 307_938, 229_274, 109_487, 69_534)
# Households of 1..6 people (sampling weights).
HOUSEHOLD_SIZE_COUNTS = (329_114, 306_979, 139_176, 115_757, 45_162, 30_375)
# Workers by industry (sampling weights for agents aged 20-69).
INDUSTRY_COUNTS = {
    "AGRICULTURE": 7_952, "MINING": 1_244, "UTILITIES": 5_813, "CONSTRUCTION": 226_711,
    "MANUFACTURING": 315_030, "WHOLESALETRADE": 188_971, "RETAILTRADE": 499_834,
    "TRANSPORTATION": 156_542, "INFORMATION": 373_581, "FINANCEINSURANCE": 126_708,
    "REALESTATERENTAL": 88_850, "SCIENTIFICTECHNICAL": 399_492, "ENTERPRISEMANAGEMENT": 94_516,
    "WASTEMANAGEMENT": 223_083, "EDUCATION": 73_614, "HEALTHCARE": 476_480, "ART": 79_193,
    "FOOD": 350_659, "OTHER": 144_458,
}  # fmt: skip
# The ages the reference knows: its ten-year groups (first age, last age; None: and over).
AGE_BANDS = (*((10 * g, 10 * g + 9) for g in range(8)), (80, None))
CHILD = "CHILD"
ELDERLY = "ELDERLY"
CATEGORIES = [*INDUSTRY_COUNTS, CHILD, ELDERLY]
CHILD_LAST_GROUP = 1  # age groups 0-1 (0-19) are children
ADULT_LAST_GROUP = 6  # age groups 2-6 (20-69) work; 7-8 (70+) are elderly


def household_sizes(rng: np.random.Generator, agents: int) -> np.ndarray:
    """Household sizes drawn from the weights until they hold ``agents``; the last is cut."""
    w = np.asarray(HOUSEHOLD_SIZE_COUNTS, dtype=np.float64)
    p = w / w.sum()
    mean = float((p * np.arange(1, 7)).sum())
    sizes = rng.choice(6, size=int(agents / mean * 1.2) + 16, p=p) + 1
    while sizes.sum() < agents:
        sizes = np.concatenate([sizes, rng.choice(6, size=64, p=p) + 1])
    return cut_to_total(sizes, agents)


def county_tract(agents: int) -> pd.DataFrame:
    """One pseudo-tract for the whole county: the bundled King County tracts' resident-weighted
    centroid, their total land area and the county's residents (only maps use it: a tract's
    tooltip gives its residents and agents)."""
    region = load_region("king_county")
    t = region.tracts
    w = region.band_counts().sum(axis=1)
    row = {
        "geoid": str(region.figures.fips or "county"),
        "name": region.figures.name,
        "lat": float(np.average(t["lat"], weights=w)),
        "lon": float(np.average(t["lon"], weights=w)),
        "land_km2": float(t["land_km2"].sum()),
        "residents": int(region.figures.population),  # the county's, which the agents stand for
        "agents": agents,
    }
    return pd.DataFrame([row])


def build_reference_population(agents: int, seed: int) -> Population:
    """The thesis model's reference population of ``agents`` agents; the same seed gives the
    same population."""
    rng = np.random.default_rng([seed, 0x52454650])
    w = np.asarray(AGE_GROUP_COUNTS, dtype=np.float64)
    age_group = rng.choice(9, size=agents, p=w / w.sum()).astype(np.int8)
    size = household_sizes(rng, agents).astype(np.int32)
    start = (np.cumsum(size) - size).astype(np.int64)
    household = np.repeat(np.arange(size.shape[0], dtype=np.int32), size)
    iw = np.asarray(list(INDUSTRY_COUNTS.values()), dtype=np.float64)
    adult = (age_group > CHILD_LAST_GROUP) & (age_group <= ADULT_LAST_GROUP)
    group = np.where(age_group <= CHILD_LAST_GROUP, CATEGORIES.index(CHILD), CATEGORIES.index(ELDERLY))
    group[adult] = rng.choice(len(iw), size=int(adult.sum()), p=iw / iw.sum())
    tract = county_tract(agents)
    return Population(
        # The reference knows age groups only; an agent's age in years is its group's first year.
        age=(10 * age_group.astype(np.int16)),
        age_group=age_group,
        tract=np.zeros(agents, dtype=np.int32),
        household=household,
        household_start=start,
        household_size=size,
        long_term_care=np.zeros(agents, dtype=bool),
        group=group.astype(np.int32),
        group_category=np.arange(len(CATEGORIES), dtype=np.int16),
        categories=list(CATEGORIES),
        tracts=tract,
        region_name="King County, WA (thesis reference population)",
        age_bands=AGE_BANDS,
    )
