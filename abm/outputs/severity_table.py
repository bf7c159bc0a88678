"""The severity table: what an infection leads to by age under a scenario's disease settings
(:mod:`abm.engine.severity`), as ``abm validate --severity`` prints it and a run's
``report.html`` shows it, with a row for all ages weighted by the region's residents."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from abm.engine.config import AGE_GROUP_LABELS, DiseaseConfig
from abm.engine.severity import resident_severity, severity_by_age, weighted_severity
from abm.outputs.summary_table import SummaryTable

if TYPE_CHECKING:
    from abm.scenario import Scenario

COLUMNS = ["age group", "symptoms", "hospital", "intensive care", "death"]


def percent(p: float) -> str:
    """A chance as a percentage to three significant digits, never in exponent form (0.0000182%,
    9.32%, 63%), 0 as "0"."""
    return "0" if p == 0 else np.format_float_positional(p * 100, precision=3, fractional=False, trim="-") + "%"


def residents_by_age_group(band_counts: np.ndarray, bands: dict[str, tuple[int, int]]) -> np.ndarray:
    """The region's residents in each ten-year age group (0-9 .. 80+) from its age bands' counts
    (``band_counts``: per tract and band). A band's residents are spread evenly over its years,
    as the population draws its agents' ages, so a band that spans two groups (15-24 of a
    region's own bands) gives each its share of the years."""
    last = len(AGE_GROUP_LABELS) - 1
    out = np.zeros(len(AGE_GROUP_LABELS))
    for (lo, hi), residents in zip(bands.values(), band_counts.sum(axis=0), strict=True):
        years = np.arange(lo, hi + 1)
        np.add.at(out, np.minimum(years // 10, last), residents / years.shape[0])
    return out


def severity_table(disease: DiseaseConfig, residents: np.ndarray, weighted_by: str) -> SummaryTable:
    """Each age group's chances per infection, and those of an infection of a resident drawn at
    random (``residents`` per age group, who they are: ``weighted_by``): the population's ratios
    if every age were infected alike, which no epidemic does; then, where the disease settings give
    them a table of their own, long-term-care residents'."""
    rows = severity_by_age(disease)
    everyone = weighted_severity(rows, residents, "all ages")
    in_care = resident_severity(disease)
    extra = [] if in_care is None else [in_care]
    cells = [[r.age_group, percent(r.symptoms), percent(r.hospital), percent(r.icu), percent(r.death)]
             for r in [*rows, everyone, *extra]]  # fmt: skip
    return SummaryTable(
        title="What an infection leads to, by age (disease.branching)",
        columns=COLUMNS,
        rows=cells,
        caption=(
            "the chance that an infection brings symptoms, a hospital stay, intensive care and death, for an agent "
            f"without vaccine or earlier infection; all ages: weighted by {weighted_by}, as if every age were "
            "infected alike. Death / infection is the infection fatality ratio"
            + ("" if in_care is None else "; long-term-care residents (any age): disease.long_term_care_branching")
        ),
    )


def scenario_severity_table(sc: Scenario) -> SummaryTable:
    """The severity table of epidemic scenario ``sc``: its disease settings, and all ages weighted
    as its population's agents are drawn (the region's residents; the reference population's own
    census counts by age group for ``population.kind: reference``)."""
    if sc.population.kind == "reference":
        from abm.populations.reference import AGE_GROUP_COUNTS

        weights = np.asarray(AGE_GROUP_COUNTS, dtype=np.float64)
        whom = "the census counts by age group the thesis reference population draws its ages from"
        return severity_table(sc.disease, weights, whom)
    from abm.populations.region import load_region

    region = load_region(sc.population.region)
    residents = residents_by_age_group(region.band_counts(), region.figures.age_bands)
    return severity_table(sc.disease, residents, f"the residents of {region.name}")
