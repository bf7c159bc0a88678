"""Derive the King County region figures the project carries from public extracts.

Run once, by a maintainer, against the public King County extracts (not shipped with the
project)::

    python tools/derive_king_county_region.py ../shared/data/king_county [--check]

It writes ``abm/populations/regions/king_county/tracts.csv``: one row per 2010-vintage census
tract with people (GEOID, name, centroid, land area, population by 18 five-year age bands, households by
size). Polygons are read only to compute each tract's area-weighted centroid and the county's
extent (``bounds`` of ``region.yaml``, which it prints); no polygon is written. County-level
figures live in ``region.yaml`` next to it, with their sources.

``--check`` writes nothing and says whether the committed table, and the ``bounds`` of the
``region.yaml`` beside it, are what the extracts give.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import math
import sys
from pathlib import Path

import yaml

# Five-year bands of ACS table B01001 (columns Total_0_4 .. Total_85up of the extract), written
# as age_0_4 .. age_80_84 and age_85_plus.
SOURCE_BANDS = [f"Total_{a}_{a + 4}" for a in range(0, 85, 5)] + ["Total_85up"]
AGE_BANDS = [f"age_{a}_{a + 4}" for a in range(0, 85, 5)] + ["age_85_plus"]
HH_SIZES = ["hh_size_1", "hh_size_2", "hh_size_3", "hh_size_4", "hh_size_5", "hh_size_6", "hh_size_7up"]


def ring_centroid(ring: list[list[float]]) -> tuple[float, float, float]:
    """Signed area (local equal-area km^2) and centroid (lon, lat) of one polygon ring."""
    lat0 = math.radians(sum(p[1] for p in ring) / len(ring))
    kx = 111.320 * math.cos(lat0)
    ky = 110.574
    a = cx = cy = 0.0
    for (x0, y0), (x1, y1) in itertools.pairwise(ring):
        cross = x0 * y1 - x1 * y0
        a += cross
        cx += (x0 + x1) * cross
        cy += (y0 + y1) * cross
    a *= 0.5
    if a == 0:
        return 0.0, ring[0][0], ring[0][1]
    return a * kx * ky, cx / (6 * a), cy / (6 * a)


def polygon_centroid(geometry: dict) -> tuple[float, float]:
    """Area-weighted centroid (lat, lon) of a Polygon or MultiPolygon. Each polygon's first ring
    is its exterior and adds its area, the others are holes and take theirs away, whichever way
    the rings are wound (GeoJSON winds exteriors counterclockwise, shapefiles clockwise, and some
    writers wind holes as their exteriors)."""
    polys = geometry["coordinates"]
    if geometry["type"] == "Polygon":
        polys = [polys]
    total = sx = sy = 0.0
    for poly in polys:
        for i, ring in enumerate(poly):
            area, x, y = ring_centroid(ring)
            area = abs(area) if i == 0 else -abs(area)
            total += area
            sx += area * x
            sy += area * y
    return sy / total, sx / total


def ring_points(geometry: dict) -> list[list[float]]:
    """Every vertex (lon, lat) of a Polygon or MultiPolygon."""
    polys = geometry["coordinates"]
    if geometry["type"] == "Polygon":
        polys = [polys]
    return [p for poly in polys for ring in poly for p in ring]


def region_bounds(src: Path) -> list[float]:
    """The county's extent from the tract polygons of the extracts in ``src`` (:func:`bounds_of`)."""
    return bounds_of(json.loads((src / "king_county_tracts_2010_cb2018.geojson").read_text(encoding="utf-8")))


def bounds_of(geo: dict) -> list[float]:
    """The extent ``[west, south, east, north]`` of a GeoJSON FeatureCollection's polygons,
    rounded outwards to 4 decimals (about 10 m), so that every polygon lies within it."""
    points = [p for f in geo["features"] for p in ring_points(f["geometry"])]
    lon, lat = [p[0] for p in points], [p[1] for p in points]

    def out(value: float, up: bool) -> float:
        scaled = round(value * 1e4, 6)  # 47.0844 * 1e4 is 470843.99999...: not a step outwards
        return (math.ceil(scaled) if up else math.floor(scaled)) / 1e4

    return [out(min(lon), False), out(min(lat), False), out(max(lon), True), out(max(lat), True)]


def derive_rows(src: Path) -> list[dict[str, str]]:
    """The rows of tracts.csv from the extracts in ``src``: every tract of the age table with
    residents, in GEOID order. A tract with residents but no polygon or no household row is an
    error (it was left out without a word, taking its residents with it)."""
    geo = json.loads((src / "king_county_tracts_2010_cb2018.geojson").read_text(encoding="utf-8"))
    shapes = {f["properties"]["GEOID"]: f for f in geo["features"]}
    with open(src / "king_county_tract_age_acs2018_tract2010.csv", encoding="utf-8") as fh:
        ages = {r["GEOID"]: r for r in csv.DictReader(fh)}
    with open(src / "king_county_tract_household_size_acs2018_tract2010.csv", encoding="utf-8") as fh:
        hh = {r["GEOID"]: r for r in csv.DictReader(fh)}
    people = sorted(g for g, a in ages.items() if int(a["total"]) > 0)
    tables = {"polygon": shapes, "households": hh}
    missing = [f"{g} ({what})" for g in people for what, table in tables.items() if g not in table]
    if missing:
        raise SystemExit(f"tracts with residents but no figures in the extracts: {', '.join(missing)}")
    rows = []
    for geoid in people:
        a, h = ages[geoid], hh[geoid]
        lat, lon = polygon_centroid(shapes[geoid]["geometry"])
        rows.append(
            {
                "geoid": geoid,
                "name": a["name"].split(",")[0].replace("Census Tract ", ""),
                "lat": f"{lat:.6f}",
                "lon": f"{lon:.6f}",
                "land_km2": f"{shapes[geoid]['properties']['ALAND'] / 1e6:.4f}",
                **{band: a[column] for band, column in zip(AGE_BANDS, SOURCE_BANDS, strict=True)},
                "households": h["households_total"],
                **{k.replace("hh_size_", "hh_"): h[k] for k in HH_SIZES},
            }
        )
    return rows


def table_text(rows: list[dict[str, str]]) -> str:
    """tracts.csv's text (CSV with CRLF line ends, as the committed file has)."""
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def main(src: Path, dst: Path, check: bool = False) -> bool:
    """Write ``dst`` from the extracts in ``src`` or, with ``check``, write nothing and say
    whether ``dst`` is what the extracts give; True when it is (or was written)."""
    rows = derive_rows(src)
    text = table_text(rows)
    bounds = region_bounds(src)
    if check:
        same = dst.is_file() and dst.read_bytes().decode("utf-8") == text
        print(f"{dst}: {'as derived' if same else 'DIFFERS from the extracts'} ({len(rows)} tracts)")
        figures = dst.parent / "region.yaml"
        if figures.is_file():
            given = (yaml.safe_load(figures.read_text(encoding="utf-8")) or {}).get("bounds")
            ok = given == bounds
            print(f"{figures}: bounds {given} {'as derived' if ok else f'DIFFER from the extracts ({bounds})'}")
            same &= ok
        return same
    print(f"bounds for region.yaml: {bounds}")
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(text, encoding="utf-8", newline="")
    print(f"wrote {len(rows)} tracts, {sum(int(r['age_0_4']) for r in rows)} aged 0-4, to {dst}")
    return True


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Derive King County's tracts.csv from public extracts.")
    parser.add_argument("extracts", type=Path, help="the folder of the public King County extracts")
    parser.add_argument("--check", action="store_true", help="write nothing; say whether the files are as derived")
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[1]
    ok = main(args.extracts, root / "abm/populations/regions/king_county/tracts.csv", check=args.check)
    sys.exit(0 if ok else 1)
