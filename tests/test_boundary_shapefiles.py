"""Census-style tract boundary shapefiles (``.shp`` with its ``.dbf``, or the three files zipped)
read for the map: written here with pyshp's Writer, then read back through the public functions.
Checks GEOID matching, holes, multi-part tracts, ring order, the cache and the refusals."""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import pytest
import shapefile
from shapely.geometry import MultiPolygon, Point, Polygon

from abm.outputs.boundaries import (
    BoundaryError,
    centroid_cells,
    read_boundary_file,
    shapes_from_file,
    tract_shapes,
)

Ring = list[tuple[float, float]]


def box(lon: float, lat: float, half: float, clockwise: bool = True) -> Ring:
    """A closed square ring around (lon, lat); clockwise for an outer ring, as shapefiles have it."""
    ring = [(lon - half, lat - half), (lon - half, lat + half), (lon + half, lat + half), (lon + half, lat - half)]
    ring = ring if clockwise else ring[::-1]
    return [*ring, ring[0]]


def write_shapefile(base: Path, records: list[tuple[str, list[Ring] | None]], field: str = "GEOID") -> Path:
    """``base``.shp/.shx/.dbf with one polygon record per (GEOID, rings); rings None is a null shape."""
    with shapefile.Writer(str(base), shapeType=shapefile.POLYGON) as w:
        w.field(field, "C", size=11)
        w.field("ALAND", "N", size=14)
        for geoid, rings in records:
            if rings is None:
                w.null()
            else:
                w.poly(rings)
            w.record(geoid, 1000)
    return base.with_suffix(".shp")


def zip_shapefile(shp: Path, target: Path, members: tuple[str, ...] = (".shp", ".shx", ".dbf")) -> Path:
    with zipfile.ZipFile(target, "w") as z:
        for ext in members:
            z.write(shp.with_suffix(ext), f"cb_2019_53_tract_500k{ext}")
    return target


@pytest.fixture
def tract_file(king_county, tmp_path) -> tuple[Path, list[str]]:
    """A shapefile of the King County tracts as small boxes: tract 0 has a hole, tract 1 two parts,
    tract 2 an island listed before the hole of its main part, tract 5 is left out; a null shape
    and a tract of another county come along."""
    records: list[tuple[str, list[Ring] | None]] = []
    geoids = [str(g) for g in king_county.tracts["geoid"]]
    for i, row in enumerate(king_county.tracts.itertuples(index=False)):
        lon, lat = float(row.lon), float(row.lat)
        if i == 5:
            continue
        if i == 0:
            rings = [box(lon, lat, 0.01), box(lon, lat, 0.004, clockwise=False)]
        elif i == 1:
            rings = [box(lon, lat, 0.005), box(lon + 0.03, lat, 0.005)]
        elif i == 2:
            rings = [box(lon + 0.05, lat, 0.005), box(lon, lat, 0.004, clockwise=False), box(lon, lat, 0.01)]
        else:
            rings = [box(lon, lat, 0.005)]
        records.append((geoids[i], rings))
    records += [("53033999999", None), ("53053000100", [box(-122.4, 47.2, 0.01)])]
    return write_shapefile(tmp_path / "tracts", records), geoids


def test_a_shapefile_gives_each_tract_its_polygon_by_geoid(king_county, tract_file, tmp_path):
    shp, geoids = tract_file
    for path in (shp, zip_shapefile(shp, tmp_path / "tracts.zip")):
        found = read_boundary_file(path)
        assert set(found) == (set(geoids) - {geoids[5]}) | {"53053000100"}  # the null shape is skipped
        holed = found[geoids[0]]
        assert isinstance(holed, Polygon) and len(holed.interiors) == 1
        assert holed.area == pytest.approx(0.02**2 - 0.008**2, rel=1e-9)
        assert not holed.contains(Point(king_county.tracts["lon"].iloc[0], king_county.tracts["lat"].iloc[0]))
        two = found[geoids[1]]
        assert isinstance(two, MultiPolygon) and len(two.geoms) == 2 and two.area == pytest.approx(2e-4, rel=1e-9)
        # The hole belongs to the part that surrounds it, not to the ring listed before it.
        island = found[geoids[2]]
        assert isinstance(island, MultiPolygon) and island.is_valid
        parts = sorted((len(p.interiors), p.area) for p in island.geoms)
        assert [n for n, _ in parts] == [0, 1]
        assert [a for _, a in parts] == pytest.approx([1e-4, 0.02**2 - 0.008**2], rel=1e-9)
        assert found[geoids[3]].area == pytest.approx(1e-4, rel=1e-9)

    shapes = shapes_from_file(king_county.tracts, path)
    assert shapes.geoid == geoids and len(shapes.geometry[0].interiors) == 1
    assert shapes.geometry[5].area == pytest.approx(centroid_cells(king_county.tracts).geometry[5].area, rel=0.05)
    assert shapes.source == f"{path} (1 tract not in the file drawn as centroid cells)"
    assert tract_shapes(king_county.tracts, path).source == shapes.source


def test_a_changed_shapefile_is_read_again(king_county, tract_file, tmp_path):
    shp, geoids = tract_file
    path = zip_shapefile(shp, tmp_path / "tracts.zip")
    assert geoids[0] in read_boundary_file(path)
    write_shapefile(tmp_path / "fewer", [(geoids[1], [box(-122.3, 47.6, 0.01)])])
    zip_shapefile(tmp_path / "fewer.shp", path)
    later = path.stat().st_mtime + 5
    os.utime(path, (later, later))
    assert set(read_boundary_file(path)) == {geoids[1]}


def test_a_bad_shapefile_is_refused_naming_it(king_county, tract_file, tmp_path):
    shp, geoids = tract_file

    def refused(path: Path, message: str) -> None:
        with pytest.raises(BoundaryError, match=re.escape(str(path)) + ": " + message):
            shapes_from_file(king_county.tracts, path)

    data, table = shp.read_bytes(), shp.with_suffix(".dbf").read_bytes()
    cut = tmp_path / "cut.shp"
    cut.write_bytes(data[: len(data) // 2])
    cut.with_suffix(".dbf").write_bytes(table)
    refused(cut, r"the shapes \(\.shp\) are corrupt or truncated")

    garbled = tmp_path / "garbled.shp"
    garbled.write_bytes(data)
    garbled.with_suffix(".dbf").write_bytes(b"not a dBase table")
    refused(garbled, r"the attribute table \(\.dbf\) is corrupt or truncated")

    other = write_shapefile(tmp_path / "other", [(geoids[0], [box(-122.3, 47.6, 0.01)])])
    mixed = tmp_path / "mixed.shp"
    mixed.write_bytes(data)
    mixed.with_suffix(".dbf").write_bytes(other.with_suffix(".dbf").read_bytes())
    refused(mixed, r"the \.shp file holds 398 shapes but the \.dbf table 1 records; .*not from the same shapefile")

    no_geoid = write_shapefile(tmp_path / "no_geoid", [(geoids[0], [box(-122.3, 47.6, 0.01)])], field="TRACTCE")
    refused(no_geoid, "the attribute table has no GEOID field .*TRACTCE")

    with shapefile.Writer(str(tmp_path / "points"), shapeType=shapefile.POINT) as w:
        w.field("GEOID", "C", size=11)
        w.point(-122.3, 47.6)
        w.record(geoids[0])
    refused(tmp_path / "points.shp", "shape type POINT is not a polygon")

    alone = tmp_path / "alone.shp"
    alone.write_bytes(data)
    refused(alone, "no alone.dbf next to it")
    refused(zip_shapefile(shp, tmp_path / "no_table.zip", (".shp", ".shx")), "the zip file holds no .shp and .dbf pair")

    elsewhere = write_shapefile(tmp_path / "elsewhere", [("53053000100", [box(-122.4, 47.2, 0.01)])])
    refused(elsewhere, "none of the region's 397 tract GEOIDs .*right state and census vintage")


def test_caching_a_bad_file_keeps_the_cached_one(king_county, tract_file, tmp_path, monkeypatch):
    """`abm data boundaries --from FILE` reads FILE in full before it replaces the cache: a zip
    whose shapefile is corrupt, or that holds another county's tracts, is refused naming FILE
    (exit code 2), and the good file cached before stays, byte for byte."""
    from typer.testing import CliRunner

    from abm.cli import app

    monkeypatch.setenv("ABM_CACHE_DIR", str(tmp_path / "cache"))
    shp, _ = tract_file
    good = zip_shapefile(shp, tmp_path / "good.zip")
    runner = CliRunner()
    ok = runner.invoke(app, ["data", "boundaries", "--from", str(good)])
    assert ok.exit_code == 0, ok.output
    cached = next((tmp_path / "cache").rglob("*.zip"))
    before = cached.read_bytes()

    cut = tmp_path / "cut"
    cut.with_suffix(".shp").write_bytes(shp.read_bytes()[:300])
    for ext in (".shx", ".dbf"):
        cut.with_suffix(ext).write_bytes(shp.with_suffix(ext).read_bytes())
    elsewhere = write_shapefile(tmp_path / "elsewhere", [("53053000100", [box(-122.4, 47.2, 0.01)])])
    for bad, message in (
        (zip_shapefile(cut.with_suffix(".shp"), tmp_path / "cut.zip"), "are corrupt or truncated"),
        (zip_shapefile(elsewhere, tmp_path / "elsewhere.zip"), "none of the region's 397 tract GEOIDs"),
    ):
        res = runner.invoke(app, ["data", "boundaries", "--from", str(bad)])
        assert res.exit_code == 2
        assert f"{bad}: " in " ".join(res.output.split()) and message in " ".join(res.output.split())
        assert cached.read_bytes() == before
        assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == [cached]  # no part file left


def test_a_degenerate_ring_is_refused_and_reversed_rings_are_read_quietly(king_county, tmp_path, capsys, caplog):
    """A one-point ring cannot be a polygon: the file is refused naming it and the shape. Rings
    written counter-clockwise (holes, in a shapefile) with no outer ring are read as outer rings,
    without pyshp's warning for every shape."""
    geoids = [str(g) for g in king_county.tracts["geoid"]]
    lon, lat = float(king_county.tracts["lon"].iloc[0]), float(king_county.tracts["lat"].iloc[0])
    point = write_shapefile(tmp_path / "point", [(geoids[0], [[(lon, lat)]])])
    with pytest.raises(BoundaryError, match=re.escape(f"{point}: shape 0 (GEOID {geoids[0]}) is not a valid polygon")):
        read_boundary_file(point)
    reversed_rings = write_shapefile(
        tmp_path / "ccw", [(g, [box(lon + 0.03 * i, lat, 0.01, clockwise=False)]) for i, g in enumerate(geoids[:5])]
    )
    with caplog.at_level("WARNING"):
        found = read_boundary_file(reversed_rings)
    assert set(found) == set(geoids[:5]) and all(g.area == pytest.approx(4e-4, rel=1e-9) for g in found.values())
    assert not [r for r in caplog.records if r.name == "shapefile"] and capsys.readouterr().err == ""


@pytest.mark.parametrize("timeout", ["-1", "0", "nan"])
def test_a_download_timeout_that_is_no_positive_number_is_refused(timeout, tmp_path, monkeypatch):
    """`abm data boundaries --timeout` takes seconds above 0: anything else is refused with exit
    code 2 before any download is tried."""
    from typer.testing import CliRunner

    from abm.cli import app

    monkeypatch.setenv("ABM_CACHE_DIR", str(tmp_path / "cache"))
    res = CliRunner().invoke(app, ["data", "boundaries", "--timeout", timeout])
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert f"--timeout: {float(timeout):g} is not allowed; give a number of seconds above 0" in text
    assert "downloading" not in text and not (tmp_path / "cache").exists()


def test_a_region_of_other_tract_geoids_is_told_the_census_file_is_2010_vintage(king_county, tract_file, tmp_path):
    """The Census file `abm data boundaries` fetches holds 2010-vintage tracts; a region built on
    2020 GEOIDs matches none or only some of them. Both cases say so and name a 2020 file: the
    refusal (none match) and a note after caching (some match: 4 here, tract 5 of the fixture
    and three renumbered tracts, are drawn as centroid cells)."""
    import pandas as pd
    from typer.testing import CliRunner

    from abm.cli import app

    shp, geoids = tract_file
    zipped = zip_shapefile(shp, tmp_path / "tracts.zip")
    renumbered = king_county.tracts.assign(geoid=[f"53033{990000 + i}" for i in range(len(geoids))])
    with pytest.raises(BoundaryError, match="none of the region's 397 tract GEOIDs") as caught:
        shapes_from_file(renumbered, zipped)
    said = str(caught.value)
    assert "Census 2019 file (cb_2019_53_tract_500k.zip), whose tracts are the 2010-vintage tracts" in said
    assert "uses 2020 tract GEOIDs" in said and "(e.g. cb_2020_53_tract_500k.zip)" in said

    region = tmp_path / "county2020"
    region.mkdir()
    (region / "region.yaml").write_text((king_county.path / "region.yaml").read_text())
    table = pd.read_csv(king_county.path / "tracts.csv", dtype={"geoid": str})
    changed = [g for g in table["geoid"] if g != geoids[5]][:3]
    table["geoid"] = table["geoid"].replace({g: g[:-2] + "99" for g in changed})
    table.to_csv(region / "tracts.csv", index=False)
    res = CliRunner().invoke(
        app,
        ["data", "boundaries", "--region", str(region), "--from", str(zipped)],
        env={"ABM_CACHE_DIR": str(tmp_path)},
    )
    assert res.exit_code == 0, res.output
    note = " ".join(res.stderr.split())
    assert note.startswith("note: 4 of the region's 397 tracts are not in the file. `abm data boundaries` fetches")
    assert "2010-vintage tracts" in note and "cb_2020_53_tract_500k.zip" in note
    assert "(4 tracts not in the file drawn as centroid cells)" in " ".join(res.stdout.split())
    whole = CliRunner().invoke(app, ["data", "boundaries", "--from", str(zipped)], env={"ABM_CACHE_DIR": str(tmp_path)})
    assert whole.exit_code == 0 and "note: 1 of the region's 397 tracts" in " ".join(whole.stderr.split())


INTERRUPTED_CACHING = """
import os, signal, sys
from abm import entry
from abm.outputs import boundaries

call, signame = int(sys.argv[1]), sys.argv[2]
reading, calls = boundaries.shapes_from_file, []


def shapes_from_file(*args, **kwargs):  # read 1: the copy, checked; read 2: the cached file, for the summary
    calls.append(1)
    if len(calls) == call:
        os.kill(os.getpid(), getattr(signal, signame))
    return reading(*args, **kwargs)


boundaries.shapes_from_file = shapes_from_file
sys.argv = ["abm", "data", "boundaries", "--from", sys.argv[3]]
entry.main()
"""


@pytest.mark.parametrize("earlier", [False, True])
def test_caching_interrupted_leaves_the_cache_as_it_was_and_says_so(tract_file, tmp_path, earlier):
    """`abm data boundaries --from FILE` stopped (Ctrl-C) as it reads FILE, before caching it: it
    said "interrupted while starting; nothing was run" and left the cache folder it had made. Now
    one line says nothing was cached (and that the file cached before is kept, where there is
    one), the cache is as it was, without a part file or a folder made for it, exit code 130. A
    SIGTERM once FILE is cached, as the command reads it again for its summary, is ignored (it
    ended with exit code 143 and "nothing was run" with the file cached): exit 0, the summary."""
    import signal
    import subprocess
    import sys

    shp, _ = tract_file
    good = zip_shapefile(shp, tmp_path / "good.zip")
    cache = tmp_path / "cache"
    env = {**os.environ, "ABM_CACHE_DIR": str(cache)}
    if earlier:
        cached = cache / "boundaries" / "cb_2019_53_tract_500k.zip"
        cached.parent.mkdir(parents=True)
        cached.write_bytes(b"the file cached before")

    def cache_it(call: int, signame: str) -> subprocess.CompletedProcess:
        args = [sys.executable, "-c", INTERRUPTED_CACHING, str(call), signame, str(good)]
        return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)

    stopped = cache_it(1, "SIGINT")
    assert stopped.returncode == 128 + signal.SIGINT, stopped.stderr
    said = " ".join(stopped.stderr.split())
    if earlier:
        assert said == f"interrupted: nothing was cached; the file cached before is kept: {cached}"
        assert [p.name for p in cached.parent.iterdir()] == [cached.name]
        assert cached.read_bytes() == b"the file cached before"
    else:
        assert said == "interrupted: nothing was cached"
        assert not cache.exists()
    late = cache_it(2, "SIGTERM")
    assert late.returncode == 0, late.stderr
    assert late.stdout.startswith(f"cached {cache / 'boundaries' / 'cb_2019_53_tract_500k.zip'}: 397 tracts")
    assert [p.name for p in (cache / "boundaries").iterdir()] == ["cb_2019_53_tract_500k.zip"]
