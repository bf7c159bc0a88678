"""The maintainer script that derives King County's tracts.csv: its polygon centroids."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "derive_king_county_region.py"
spec = importlib.util.spec_from_file_location("derive_king_county_region", TOOL)
derive = importlib.util.module_from_spec(spec)
spec.loader.exec_module(derive)


def square(x0: float, y0: float, side: float, clockwise: bool) -> list[list[float]]:
    """A closed square ring (lon, lat) with its lower left corner at (x0, y0)."""
    ring = [[x0, y0], [x0 + side, y0], [x0 + side, y0 + side], [x0, y0 + side], [x0, y0]]
    return ring[::-1] if clockwise else ring


@pytest.mark.parametrize("outer_cw", [False, True])
@pytest.mark.parametrize("hole_cw", [False, True])
def test_a_hole_is_taken_out_whatever_the_winding(outer_cw, hole_cw):
    """GeoJSON (RFC 7946) winds exteriors counterclockwise and holes clockwise, shapefiles the
    other way, and some writers wind every ring alike: a hole is cut out of its polygon in every
    case (with both rings wound alike it was added instead)."""
    # a 0.02-degree square with a 0.01-degree hole in its right half: the centroid moves left
    outer = square(-122.0, 47.5, 0.02, outer_cw)
    hole = square(-121.99, 47.505, 0.01, hole_cw)
    lat, lon = derive.polygon_centroid({"type": "Polygon", "coordinates": [outer, hole]})
    # area-weighted: (4 * -121.99 - 1 * -121.985) / 3 in x, the hole centred in y
    assert lon == pytest.approx((4 * -121.99 - -121.985) / 3, abs=1e-6)
    assert lat == pytest.approx(47.51, abs=1e-6)


def test_parts_of_a_multipolygon_count_by_their_areas_whatever_their_winding():
    """A tract in two parts (an island), one wound each way: its centroid lies between the parts,
    nearer the larger one (opposite windings cancelled out and put it far outside both)."""
    big = square(-122.0, 47.5, 0.02, clockwise=True)
    small = square(-121.9, 47.5, 0.01, clockwise=False)
    lat, lon = derive.polygon_centroid({"type": "MultiPolygon", "coordinates": [[big], [small]]})
    assert lon == pytest.approx((4 * -121.99 + 1 * -121.895) / 5, abs=1e-5)
    assert lat == pytest.approx((4 * 47.51 + 1 * 47.505) / 5, abs=1e-5)
