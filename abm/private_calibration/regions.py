"""The institutions' regions: King County tracts split into Seattle, North, East and South.

Rule (2010-vintage Census tract codes, the last six digits of the GEOID, and tract centroids):

* **Seattle**: tract codes 000100-012199, the City of Seattle's tracts (Census numbers 1-121).
* **North**: other tracts with centroid latitude >= 47.70 (Shoreline, Lake Forest Park, Kenmore,
  Bothell, Woodinville and north-east rural King County).
* **East**: other tracts with latitude in [47.50, 47.70) and longitude > -122.23 (Bellevue,
  Kirkland, Redmond, Issaquah, Sammamish, the Snoqualmie valley, most of Mercer Island).
* **South**: every other tract (Renton, Tukwila, Burien, SeaTac, Kent, Federal Way, Auburn,
  Vashon, Maple Valley, Enumclaw). The longitude cut runs along Lake Washington, so the three
  non-Seattle tracts of that latitude band whose centroids lie just west of it (within 0.03
  degrees: 024200, 024300 and 024602, on the lake's eastern shore and Mercer Island) are South's, not East's.

The four sets are disjoint and cover the county (tested). A scenario may instead give an
institution an explicit list of GEOIDs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from abm.populations.region import Region, subset_region

SEATTLE_CODES = (100, 12199)
NORTH_LAT = 47.70
EAST_LAT = 47.50
EAST_LON = -122.23


def region_masks(tracts: pd.DataFrame) -> dict[str, np.ndarray]:
    """Boolean masks over ``tracts`` (columns geoid, lat, lon) for the four named rules."""
    code = tracts["geoid"].astype(str).str[5:].astype(int).to_numpy()
    lat, lon = tracts["lat"].to_numpy(), tracts["lon"].to_numpy()
    seattle = (code >= SEATTLE_CODES[0]) & (code <= SEATTLE_CODES[1])
    north = ~seattle & (lat >= NORTH_LAT)
    east = ~seattle & ~north & (lat >= EAST_LAT) & (lon > EAST_LON)
    south = ~seattle & ~north & ~east
    return {"seattle": seattle, "north": north, "east": east, "south": south}


def institution_region(county: Region, tracts: str | list[str], name: str) -> Region:
    """The sub-region of ``county`` for a named rule or an explicit list of GEOIDs."""
    if isinstance(tracts, str):
        geoids = county.tracts["geoid"].to_numpy()[region_masks(county.tracts)[tracts]]
    else:
        geoids = np.asarray(tracts, dtype=str)
    return subset_region(county, list(geoids), name)
