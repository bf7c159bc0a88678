"""The maintainer scripts that derive King County's tracts.csv (its polygon centroids) and its 2020
series: how they are called."""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
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


def write_extracts(folder: Path, polygons: list[str]) -> None:
    """The three extracts the script reads, for tracts A (8 people), B (5) and Z (none), with
    polygons for ``polygons``."""
    features = [
        {
            "type": "Feature",
            "properties": {"GEOID": g, "NAME": g, "ALAND": 1_500_000, "AWATER": 0},
            "geometry": {"type": "Polygon", "coordinates": [square(-122.0 + i / 10, 47.5, 0.01, True)]},
        }
        for i, g in enumerate(polygons)
    ]
    (folder / "king_county_tracts_2010_cb2018.geojson").write_text(
        json.dumps({"type": "FeatureCollection", "features": features}), encoding="utf-8"
    )
    bands = [*derive.SOURCE_BANDS]
    people = {"A": [1] * 8 + [0] * 10, "B": [0] * 13 + [1] * 5, "Z": [0] * 18}
    lines = [",".join(["GEOID", "name", "total", *bands])]
    lines += [f'{g},"Census Tract {g}, King, WA",{sum(c)},' + ",".join(map(str, c)) for g, c in people.items()]
    (folder / "king_county_tract_age_acs2018_tract2010.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = [",".join(["GEOID", "name", "households_total", *derive.HH_SIZES])]
    lines += [f'{g},"Census Tract {g}, King, WA",{n},{n},0,0,0,0,0,0' for g, n in (("A", 3), ("B", 2), ("Z", 0))]
    (folder / "king_county_tract_household_size_acs2018_tract2010.csv").write_text(
        "\n".join(lines) + "\n", encoding="utf-8"
    )


def test_check_says_whether_the_table_is_what_the_extracts_give(tmp_path, capsys):
    write_extracts(tmp_path, ["A", "B", "Z"])
    table = tmp_path / "out" / "tracts.csv"
    assert derive.main(tmp_path, table)
    rows = list(csv.DictReader(table.open(encoding="utf-8")))
    assert [r["geoid"] for r in rows] == ["A", "B"]  # Z has no residents
    assert rows[0]["age_0_4"] == "1" and rows[1]["age_85_plus"] == "1" and rows[0]["land_km2"] == "1.5000"
    assert derive.main(tmp_path, table, check=True)
    assert capsys.readouterr().out.endswith("as derived (2 tracts)\n")
    table.write_text(table.read_text(encoding="utf-8").replace("1.5000", "1.5001", 1), encoding="utf-8")
    assert not derive.main(tmp_path, table, check=True)
    assert "DIFFERS from the extracts" in capsys.readouterr().out


def test_a_tract_with_residents_and_no_polygon_is_refused(tmp_path):
    """Tract B has people but no polygon: the script stops naming it (it left B out without a
    word, and its residents with it). Tract Z, without people, needs none."""
    write_extracts(tmp_path, ["A"])
    table = tmp_path / "tracts.csv"
    with pytest.raises(SystemExit, match=r"no figures in the extracts: B \(polygon\)"):
        derive.main(tmp_path, table)
    assert not table.exists()


def test_check_compares_the_bounds_of_the_region_yaml_beside_the_table(tmp_path, capsys):
    """The county's extent in region.yaml (``bounds``, which map cells stay within) is derived from
    the polygons, rounded outwards to 4 decimals: the three 0.01-degree squares of A, B and Z span
    lon -122.0 .. -121.79, lat 47.5 .. 47.51. ``--check`` says whether region.yaml holds it."""
    write_extracts(tmp_path, ["A", "B", "Z"])
    assert derive.region_bounds(tmp_path) == [-122.0, 47.5, -121.79, 47.51]
    table = tmp_path / "out" / "tracts.csv"
    assert derive.main(tmp_path, table)
    assert "bounds for region.yaml: [-122.0, 47.5, -121.79, 47.51]" in capsys.readouterr().out
    figures = table.parent / "region.yaml"
    figures.write_text("name: x\nbounds: [-122.0, 47.5, -121.79, 47.51]\n", encoding="utf-8")
    assert derive.main(tmp_path, table, check=True)
    assert "bounds [-122.0, 47.5, -121.79, 47.51] as derived" in capsys.readouterr().out
    figures.write_text("name: x\nbounds: [-122.0, 47.5, -121.79, 47.52]\n", encoding="utf-8")
    assert not derive.main(tmp_path, table, check=True)
    assert "DIFFER from the extracts ([-122.0, 47.5, -121.79, 47.51])" in capsys.readouterr().out


def test_bounds_are_rounded_outwards():
    """A vertex at -122.52813 puts the western bound at -122.5282, not -122.5281 (which would cut
    the tract); 47.0844, whose float is a hair below, stays 47.0844."""
    ring = [[-122.52813, 47.0844], [-121.06594, 47.0844], [-121.06594, 47.78058], [-122.52813, 47.0844]]
    feature = {"properties": {"GEOID": "A"}, "geometry": {"type": "Polygon", "coordinates": [ring]}}
    geo = {"type": "FeatureCollection", "features": [feature]}
    assert derive.bounds_of(geo) == [-122.5282, 47.0844, -121.0659, 47.7806]


@pytest.mark.parametrize("script", ["derive_king_county_region.py", "derive_king_county_series.py"])
def test_without_the_extracts_folder_a_script_says_how_to_call_it(script):
    """docs/calibration.md called the series script as `tools/derive_king_county_series.py
    --check`; without the extracts' folder both scripts ended in a StopIteration traceback. Now
    argparse's usage line names the folder, exit code 2; --help describes it."""
    tool = TOOL.parent / script
    res = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.splitlines()[-1].endswith("error: the following arguments are required: extracts")
    res = subprocess.run([sys.executable, str(tool), "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "the folder of the public King County extracts" in res.stdout
    doc = (TOOL.parents[1] / "docs" / "calibration.md").read_text()
    assert "tools/derive_king_county_series.py EXTRACTS --check" in doc
