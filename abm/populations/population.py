"""The synthetic population: static attributes of every agent and of the places they share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

SCHOOL = "SCHOOL"
LONG_TERM_CARE = "LONG_TERM_CARE"
AGE_GROUPS = 9  # ten-year groups 0-9, 10-19, ..., 70-79, 80+
AGE_GROUP_LABELS = ["0-9", "10-19", "20-29", "30-39", "40-49", "50-59", "60-69", "70-79", "80+"]


def ten_year_group(age: np.ndarray) -> np.ndarray:
    """The age group (0..8: 0-9, ..., 70-79, 80+) of ages in years."""
    return np.minimum(np.asarray(age) // 10, AGE_GROUPS - 1).astype(np.int8)


@dataclass
class Population:
    """Agents ordered by tract, then household; households are contiguous id ranges.

    Attributes are numpy arrays with one entry per agent unless named ``household_*`` (one
    per household) or ``group_*`` (one per school, workplace or long-term care facility).
    """

    age: np.ndarray  # int16 years
    age_group: np.ndarray  # int8, 0..8 (ten-year bands, 80+ last)
    tract: np.ndarray  # int32 index into ``tracts``
    household: np.ndarray  # int32 household index
    household_start: np.ndarray  # int64 first agent of each household
    household_size: np.ndarray  # int32
    long_term_care: np.ndarray  # bool: lives in a long-term care facility
    group: np.ndarray  # int32 occupation group (school, workplace, facility); -1 for none
    group_category: np.ndarray  # int16 per group: index into ``categories``
    categories: list[str]  # sector names, then SCHOOL and LONG_TERM_CARE
    tracts: pd.DataFrame  # geoid, name, lat, lon, land_km2, residents
    region_name: str
    # The age bands (first age, last age; None: and over) the ages were drawn in: uniformly within
    # a band (a region's age_bands), or each agent its band's first year (the reference's ten-year
    # groups), so the ages tell no more than the band; empty: ages exact to the year.
    age_bands: tuple[tuple[int, int | None], ...] = ()

    @property
    def size(self) -> int:
        """Number of agents."""
        return int(self.age.shape[0])

    @property
    def num_households(self) -> int:
        """Number of households."""
        return int(self.household_size.shape[0])

    @property
    def num_groups(self) -> int:
        """Number of occupation groups (schools, workplaces, facilities)."""
        return int(self.group_category.shape[0])

    def agent_table(self) -> pd.DataFrame:
        """One row per agent, for inspection and export."""
        cat = np.array([*self.categories, ""])[
            np.where(self.group >= 0, self.group_category[np.maximum(self.group, 0)], -1)
        ]
        return pd.DataFrame(
            {
                "age": self.age,
                "age_group": self.age_group,
                "tract": self.tracts["geoid"].to_numpy()[self.tract],
                "household": self.household,
                "long_term_care": self.long_term_care,
                "group": self.group,
                "setting": cat,
            }
        )
