"""Synthetic populations built from a region's figures."""

from abm.populations.population import Population
from abm.populations.region import Region, RegionError, load_region
from abm.populations.synthesis import build_population

__all__ = ["Population", "Region", "RegionError", "build_population", "load_region"]
