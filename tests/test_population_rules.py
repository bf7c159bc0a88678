"""Population building: each tract's ages from its own age bands, single-year ages uniform
within a band, and each tract's household sizes from its own figures (found by a hand-made
mutation audit)."""

from __future__ import annotations

import numpy as np

from abm.populations.region import HOUSEHOLD_COLUMNS

# Bands that the adult-for-every-household step may change (10-17 year olds made 18-19).
TEEN_BANDS = ("age_10_14", "age_15_19")


def test_each_tract_draws_its_ages_from_its_own_age_bands(kc_100k, king_county):
    """Per tract, each age band gets the floor of its quota (the tract's agents x the band's
    share of the tract's residents) or one more (systematic rounding; synthesis.py docstring).
    A household that runs past its tract's people then takes at most ``size_7up - 1`` of the next
    tract's, and the tract's quotas follow its agents, so a tract's counts differ from its quotas
    by less than one per band plus four per person moved, the teen bands aside. Ages drawn from
    a neighbouring tract's bands (in the table's order) miss this by 83 agents a tract on average."""
    bands = king_county.band_counts()
    names = list(king_county.figures.age_bands)
    edges = [lo for lo, _ in king_county.figures.age_bands.values()] + [95]
    agents = np.bincount(kc_100k.tract, minlength=bands.shape[0])
    quota = bands / bands.sum(axis=1, keepdims=True).clip(min=1e-12) * agents[:, None]
    band = np.searchsorted(edges, kc_100k.age, side="right") - 1
    counts = np.zeros_like(bands)
    np.add.at(counts, (kc_100k.tract, band), 1)
    kept = [i for i, name in enumerate(names) if name not in TEEN_BANDS]
    moved = king_county.figures.household_size_7up - 1
    assert np.abs(counts[:, kept] - quota[:, kept]).sum(axis=1).max() < len(kept) + 4 * moved


def test_single_year_ages_are_uniform_within_each_band(kc_100k, king_county):
    """A uniform single-year age within each agent's band (synthesis.py): every year of every
    band occurs, and each band's mean age is its midpoint (lo + hi) / 2 within 4 standard errors,
    se = sqrt((w^2 - 1) / 12 / n) for a band of w years and n agents (the teen bands aside)."""
    age = kc_100k.age
    assert set(np.unique(age).tolist()) == set(range(95))
    for name, (lo, hi) in king_county.figures.age_bands.items():
        if name in TEEN_BANDS:
            continue
        inside = age[(age >= lo) & (age <= hi)].astype(np.float64)
        w = hi - lo + 1
        se = np.sqrt((w**2 - 1) / 12 / inside.shape[0])
        assert abs(inside.mean() - (lo + hi) / 2) < 4 * se, (name, inside.mean())


def test_each_tract_draws_its_household_sizes_from_its_own_figures(kc_100k, king_county):
    """Households are drawn from each tract's own size counts (hh_1 .. hh_7up, 7up counted as
    household_size_7up). Over the quarter of tracts with the smallest expected household size
    (from the figures) and the quarter with the largest, the mean size of the built households
    (outside long-term care) is the expected one of those tracts, sum m_t / sum (m_t / mean_t)
    with m_t the tract's agents in homes, within 0.1: about 9,000 households a quarter give a
    sampling se below 0.02, and each tract's last household, cut to fit, lowers the mean by at
    most some 0.03. The quarters' expected means differ by about 0.8."""
    hh = king_county.tracts[HOUSEHOLD_COLUMNS].to_numpy(dtype=np.float64)
    sizes = np.array([1, 2, 3, 4, 5, 6, king_county.figures.household_size_7up])
    expected = (hh * sizes).sum(axis=1) / hh.sum(axis=1)
    homes = ~np.isin(np.arange(kc_100k.num_households), kc_100k.household[kc_100k.long_term_care])
    first = kc_100k.household_start[homes]
    tract = kc_100k.tract[first]
    size = kc_100k.household_size[homes]
    in_homes = np.bincount(tract, weights=size, minlength=len(expected))
    households = np.bincount(tract, minlength=len(expected))
    low, high = np.quantile(expected, [0.25, 0.75])
    for part in (expected <= low, expected >= high):
        built = in_homes[part].sum() / households[part].sum()
        want = in_homes[part].sum() / (in_homes[part] / expected[part]).sum()
        assert abs(built - want) < 0.1, (built, want)
    assert (
        in_homes[expected >= high].sum() / households[expected >= high].sum()
        - in_homes[expected <= low].sum() / households[expected <= low].sum()
        > 0.5
    )
