"""The run map: tract cells, map data against the run tables, and ``map.html`` rendered in
headless Chromium (driven over the DevTools protocol through a pipe, no network needed):
every tract cell is drawn and moving the day slider changes the colours."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import shapely
from conftest import fixed_seeds_note

import abm
from abm.outputs import maps
from abm.outputs.boundaries import (
    BoundaryError,
    centroid_cells,
    download_boundaries,
    shapes_from_file,
    tract_shapes,
)
from abm.populations import load_region

SCENARIO = Path("scenarios/king_county/no_intervention.yaml").resolve()


def chromium_path() -> str | None:
    # Debian's /usr/bin/chromium is a shell launcher that loses the debugging pipe; use the binary.
    for exe in ("/usr/lib/chromium/chromium", "/usr/lib/chromium-browser/chromium-browser"):
        if os.access(exe, os.X_OK):
            return exe
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Chromium:
    """Headless Chromium driven over the DevTools protocol on --remote-debugging-pipe
    (fd 3: commands in, fd 4: replies out, NUL-separated JSON)."""

    def __init__(self, exe: str, profile: Path, width: int = 1200, height: int = 900) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        # bash (not dash: fds above 9) puts the pipe ends on fds 3 and 4, where Chromium expects them.
        wire = f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w}'
        self.proc = subprocess.Popen(
            ["bash", "-c", wire, exe, *args],
            pass_fds=(to_browser_r, from_browser_w),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.session: str | None = None

    def send(self, method: str, params: dict | None = None, session: bool = True, timeout: float = 30.0) -> dict:
        self._next_id += 1
        msg: dict = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buffer:
                raw, _, self._buffer = self._buffer.partition(b"\0")
                reply = json.loads(raw)
                if reply.get("id") == self._next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
            if time.monotonic() > deadline:
                raise TimeoutError(method)
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self._buffer += chunk

    def open(self, url: str) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)[
            "sessionId"
        ]
        self.send("Page.enable")
        self.send("Page.navigate", {"url": url})

    def eval(self, expression: str) -> object:
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in res:
            raise RuntimeError(res["exceptionDetails"])
        return res["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.eval(expression):
            if time.monotonic() > deadline:
                raise TimeoutError(expression)
            time.sleep(0.1)

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"]))

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.send("Browser.close", session=False, timeout=5)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


@pytest.fixture(scope="module")
def small_run():
    # The thesis's rate (5.02, faster than King County's calibrated 3.137), so that 40 days
    # spread the epidemic over many tracts and the map has something to show.
    with fixed_seeds_note():
        return abm.run(SCENARIO, agents=3000, days=40, replicates=2, seed=5, sets=["disease.transmission_rate=5.02"])


@pytest.fixture(scope="module")
def written_run(small_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "ni"
    small_run.write(out)
    return out


def test_centroid_cells_cover_every_tract_and_do_not_overlap(king_county):
    shapes = centroid_cells(king_county.tracts)
    assert shapes.geoid == [str(g) for g in king_county.tracts.geoid]
    assert len(shapes.geometry) == 397
    for geom, lon, lat in zip(shapes.geometry, king_county.tracts.lon, king_county.tracts.lat, strict=True):
        assert geom.is_valid and not geom.is_empty
        assert geom.buffer(1e-4).contains(shapely.Point(lon, lat))  # each cell holds its centroid
    total = sum(g.area for g in shapes.geometry)
    union = shapely.union_all(shapes.geometry).area
    assert union == pytest.approx(total, rel=1e-4)  # cells tile the outline without overlap


# King County's extent [west, south, east, north]: the bounding box of the Census cartographic
# boundaries of its tracts (cb_2018_53_tract_500k), rounded outwards to 4 decimals.
KING_COUNTY_EXTENT = (-122.5282, 47.0844, -121.0659, 47.7806)


def test_offline_map_cells_stay_within_the_county(small_run, tmp_path, monkeypatch):
    """The cells grown around the tract centroids reached 4.4 km past King County's northern line
    (12 cells, up to latitude 47.82); a run's map now keeps them within the county's extent, which
    the region gives, and every tract keeps a cell holding its centroid."""
    monkeypatch.setenv("ABM_CACHE_DIR", str(tmp_path))  # no cached Census file: the centroid cells
    shapes = small_run.map(tiles=False).shapes
    assert shapes.source == "cells from tract centroids"
    west, south, east, north = KING_COUNTY_EXTENT
    left, bottom, right, top = shapes.bounds
    assert west - 1e-9 <= left and south - 1e-9 <= bottom and right <= east + 1e-9 and top <= north + 1e-9
    assert top > north - 1e-6  # the northern cells are cut at the county line, not shrunk
    tracts = small_run.population.tracts
    for geom, lon, lat in zip(shapes.geometry, tracts.lon, tracts.lat, strict=True):
        assert not geom.is_empty and geom.buffer(1e-4).contains(shapely.Point(lon, lat))


def test_map_data_matches_by_tract(small_run):
    data = maps.map_data(small_run.by_tract, small_run.population.tracts, snapshot_days=(10, 33))
    assert data.days == [0, 7, 10, 14, 21, 28, 33, 35, 39]
    bt = small_run.by_tract
    for k, day in enumerate(data.days):
        today = bt[bt.day == day].set_index("geoid")
        agents = today["agents"].to_numpy(float)
        ok = agents > 0
        expect = np.round(today["cumulative_per_100k"].to_numpy())
        assert np.array_equal(data.values["cumulative"][k][ok], expect[ok])
        assert np.isnan(data.values["cumulative"][k][~ok]).all()
        hosp = np.round(today["hospital_occupancy"].to_numpy()[ok] * 1e5 / agents[ok])
        assert np.array_equal(data.values["hospital"][k][ok], hosp)
        active = np.round(today["active"].to_numpy()[ok] * 1e5 / agents[ok])
        assert np.array_equal(data.values["active"][k][ok], active)
    top = np.nanmax(data.values["cumulative"])
    assert data.bins["cumulative"][-1] >= top and data.bins["cumulative"][-2] < top


def test_run_folder_has_map_and_plots(written_run):
    assert (written_run / "map.html").stat().st_size > 100_000
    names = {p.name for p in (written_run / "plots").iterdir()}
    assert {
        "hospital_occupancy.png",
        "new_infections.png",
        "cumulative_infections.png",
        "cumulative_by_age.png",
        "cumulative_cost.png",
    } <= names
    assert "map_day039.png" in names  # no default snapshot day (50, 70, 120) is in a 40-day run
    html = (written_run / "map.html").read_text()
    assert "cdn.jsdelivr" not in html and "code.jquery" not in html  # nothing to fetch but tiles


def test_map_html_in_headless_chromium(written_run, small_run, tmp_path):
    exe = chromium_path()
    if exe is None:
        if os.environ.get("ABM_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is not installed (ABM_REQUIRE_CHROMIUM is set)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    browser = Chromium(exe, tmp_path / "profile")
    try:
        browser.open((written_run / "map.html").as_uri())
        browser.wait_for("window.abmMap !== undefined && document.readyState === 'complete'")
        cells = """Array.from(document.querySelectorAll('path.abm-tract')).map(function (p) {
            var b = p.getBoundingClientRect();
            return [p.getAttribute('data-geoid'), p.getAttribute('fill'), b.width, b.height,
                    b.left, b.top, b.right, b.bottom, (p.getAttribute('d') || '').length];
        })"""
        geoids = [str(g) for g in small_run.population.tracts.geoid]
        last = browser.eval(cells)
        assert sorted(c[0] for c in last) == sorted(geoids)  # one drawn path per tract
        width, height = browser.eval("[window.innerWidth, window.innerHeight]")
        for _, fill, w, h, left, top, right, bottom, d in last:
            assert d > 10 and w > 0 and h > 0 and fill.startswith("#")
            assert left >= -1 and top >= -1 and right <= width + 1 and bottom <= height + 1  # in view
        assert browser.eval("document.getElementById('abm-day').textContent") == "39"
        browser.screenshot(tmp_path / "day39.png")

        # The colours the page shows are those of the run's table on that day.
        data = maps.map_data(small_run.by_tract, small_run.population.tracts)
        want = {g: data.color_of("cumulative", v) for g, v in zip(geoids, data.values["cumulative"][-1], strict=True)}
        assert {c[0]: c[1] for c in last} == want

        # Drive the slider as a user does: set its value and fire an input event.
        browser.eval(
            "var s = document.getElementById('abm-day-slider'); s.value = 0;"
            "s.dispatchEvent(new Event('input', {bubbles: true})); 0"
        )
        first = browser.eval(cells)
        assert browser.eval("document.getElementById('abm-day').textContent") == "0"
        day0 = {c[0]: c[1] for c in first}
        want0 = {g: data.color_of("cumulative", v) for g, v in zip(geoids, data.values["cumulative"][0], strict=True)}
        assert day0 == want0
        assert maps.ZERO_COLOR in day0.values()  # tracts without a case yet are white
        changed = sum(day0[g] != c[1] for g, c in zip((c[0] for c in last), last, strict=True))
        assert changed > len(geoids) // 4

        # Switching to the hospital layer draws it with its own colours.
        browser.eval(
            "Array.from(document.querySelectorAll('.leaflet-control-layers-base label'))"
            ".find(function (l) { return l.textContent.indexOf('Hospital') >= 0; }).querySelector('input').click(); 0"
        )
        hosp = browser.eval(cells)
        assert sorted(c[0] for c in hosp) == sorted(geoids)
        assert browser.eval("window.abmMap.measure()") == "hospital"
        legend = browser.eval("document.querySelector('.abm-legend').innerText").split("\n")
        assert [line.strip() for line in legend if line.strip()] == [
            "Hospital occupancy per 100k",
            *data.labels("hospital"),
            "no agents",
        ]
    finally:
        browser.close()


def test_boundary_file_geojson_is_used(king_county, tmp_path):
    tracts = king_county.tracts
    features = []
    for i, row in enumerate(tracts.itertuples(index=False)):
        if i == 5:
            continue  # one tract missing: it is drawn as its centroid cell
        box = shapely.box(row.lon - 0.005, row.lat - 0.005, row.lon + 0.005, row.lat + 0.005)
        features.append({"type": "Feature", "properties": {"GEOID": str(row.geoid)}, "geometry": box.__geo_interface__})
    path = tmp_path / "tracts.geojson"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    shapes = shapes_from_file(tracts, path)
    assert shapes.geometry[0].area == pytest.approx(1e-4, rel=1e-3)
    cell = centroid_cells(tracts).geometry[5]
    assert shapes.geometry[5].area == pytest.approx(cell.area, rel=0.05) and "1 tract not in the file" in shapes.source
    assert tract_shapes(tracts, path).source == shapes.source
    other = tmp_path / "other.geojson"
    other.write_text(json.dumps({"type": "FeatureCollection", "features": []}))
    with pytest.raises(BoundaryError, match="none of the region's 397 tract GEOIDs"):
        shapes_from_file(tracts, other)


def test_download_says_clearly_when_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("ABM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr("abm.outputs.boundaries.CENSUS_URL", "http://127.0.0.1:9/cb_{year}_{state}_tract_500k.zip")
    with pytest.raises(BoundaryError, match="looks offline"):
        download_boundaries("53", timeout=5)
    assert list(tmp_path.iterdir()) == []  # no file, and no empty cache folder either
    with pytest.raises(BoundaryError, match="file not found"):
        download_boundaries("53", source=tmp_path / "missing.zip")
    assert list(tmp_path.iterdir()) == []


def test_load_region_fixture_is_king_county(king_county):
    assert len(pd.DataFrame(king_county.tracts)) == 397 and load_region("king_county").figures.fips == "53033"


def test_the_map_title_warns_when_tracts_hold_few_agents():
    from abm.outputs.maps import map_title

    summary = {"scenario": "ni", "agents": 20_000, "replicates": 3}
    assert map_title(summary) == "ni: 20,000 agents, mean of 3 replicates"
    assert map_title({**summary, "replicates": 1}) == "ni: 20,000 agents, one replicate"
    few = map_title(summary, 397)
    assert few.endswith("; about 50 agents a tract, so one tract's figure per 100,000 is noisy")
    assert "noisy" not in map_title({**summary, "agents": 2_252_782}, 397)


def test_map_snapshot_title_fits_the_figure_and_shows_the_day(small_run):
    # A run of fewer than 1,000 agents a tract (the default 100,000 agents) has a long title; the
    # snapshot's title must stay inside the PNG, day included, or two days' snapshots look alike.
    title = maps.map_title(small_run.summary, len(small_run.population.tracts))
    assert "noisy" in title
    data = maps.map_data(small_run.by_tract, small_run.population.tracts, snapshot_days=(33,), title=title)
    fig = maps.snapshot_figure(centroid_cells(small_run.population.tracts), data, 33)
    fig.canvas.draw()
    text = fig.axes[0].title
    box = text.get_window_extent(fig.canvas.get_renderer())
    assert "day 33" in text.get_text()
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width and box.y1 <= fig.bbox.height


def test_map_snapshot_of_the_whole_county_keeps_its_labels_and_legend_inside(king_county):
    """A run of all the county's residents has a short title (no noise warning: thousands of
    agents a tract), so its map is taller; constrained layout then widened the fixed-aspect map
    past the figure: the PNG cut off "latitude" on the left and the legend's labels ("35,001 -
    40,000") on the right. Made from a one-day by_tract table (no run)."""
    tracts = king_county.tracts
    agents = 5_000
    by_tract = pd.DataFrame(
        {
            "day": 0,
            "geoid": tracts["geoid"],
            "agents": agents,
            # 0 to 40,000 per 100,000 over the tracts: the legend's longest labels
            "cumulative_infected": np.linspace(0, 0.4 * agents, len(tracts)).round(),
            "active": 0.0,
            "hospital_occupancy": 0.0,
        }
    )
    summary = {"scenario": "ni", "agents": agents * len(tracts), "replicates": 1}
    title = maps.map_title(summary, len(tracts))
    assert "noisy" not in title
    data = maps.map_data(by_tract, tracts, snapshot_days=(0,), title=title)
    fig = maps.snapshot_figure(centroid_cells(tracts, king_county.figures.bounds), data, 0)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert legend.get_texts()[-2].get_text() == "35,001 – 40,000"
    for artist in (ax.yaxis.label, ax.xaxis.label, ax.title, legend):
        box = artist.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= fig.bbox.width and box.y0 >= 0 and box.y1 <= fig.bbox.height, artist


def test_legend_classes_of_small_values_have_distinct_whole_edges():
    """The map's values are whole numbers per 100,000. Where the largest was under 10 (a small
    epidemic in a large run: one agent in a tract of 5,700 over 10 replicates is 2 per 100,000),
    the classes were 0.2 wide and the legend read "0 - 0", "1 - 1": classes without a value, and
    labels that repeat. Classes are now at least 1 wide."""
    tracts = pd.DataFrame({"geoid": ["1", "2", "3"], "name": ["a", "b", "c"], "residents": [5, 5, 5]})
    by_tract = pd.DataFrame(
        {
            "day": [0, 0, 0],
            "geoid": ["1", "2", "3"],
            "agents": [100_000] * 3,  # 1 agent is 1 per 100,000
            "cumulative_infected": [0.0, 1.0, 2.0],
            "active": [0.0, 1.0, 2.0],
            "hospital_occupancy": [0.0, 0.0, 2.0],
        }
    )
    data = maps.map_data(by_tract, tracts, snapshot_days=())
    for key in ("cumulative", "active", "hospital"):
        assert data.bins[key] == [0.0, 1.0, 2.0] and data.labels(key) == ["0", "1", "2"]
    # Each value falls in the class whose label holds it, and the largest gets the darkest colour.
    assert [data.color_of("cumulative", v) for v in (0.0, 1.0, 2.0)] == data.colors["cumulative"]
    assert maps.nice_bins(100) == [10.0 * k for k in range(1, 11)] and maps.nice_bins(0) == []
