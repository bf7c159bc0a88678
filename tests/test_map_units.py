"""The map on tiny hand-made tracts: legend classes, the page's data (days, the day shown
first, the tooltip's numbers), centroid cells for tracts that share a centroid, and the
scenario's map days."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import fixed_seeds_note

import abm
from abm.outputs import maps
from abm.outputs.boundaries import centroid_cells

NI = Path(__file__).resolve().parents[1] / "scenarios/king_county/no_intervention.yaml"

TRACTS = pd.DataFrame(
    {
        "geoid": ["53033000100", "53033000200", "53033000300"],
        "name": ["1", "2", "3"],
        "lat": [47.60, 47.65, 47.70],
        "lon": [-122.30, -122.25, -122.35],
        "land_km2": [2.0, 3.0, 4.0],
        "residents": [4000, 5000, 6000],
    }
)


def test_legend_classes_are_round_steps_up_to_the_largest_value() -> None:
    """At most 10 equal classes whose width is 1, 2, 2.5 or 5 times a power of ten (a whole
    number), the last edge the first at or above the largest value."""
    assert maps.nice_bins(250) == [25.0 * k for k in range(1, 11)]
    assert maps.nice_bins(25) == [5.0 * k for k in range(1, 6)]  # not 2.5 wide: see below
    assert maps.nice_bins(73) == [10.0 * k for k in range(1, 9)]
    assert maps.nice_bins(1234) == [200.0 * k for k in range(1, 8)]
    assert maps.nice_bins(float("nan")) == [] and maps.nice_bins(0) == []  # only the class "0"


def page_data(html: str) -> dict:
    """The data the map page's script draws from (``var D = {...};``)."""
    found = re.search(r"var D = (\{.*?\});\n", html)
    assert found is not None
    return json.loads(found.group(1))


def test_the_page_carries_the_frames_the_last_day_first_and_each_tracts_numbers() -> None:
    """Frames: every 7th day, the snapshot day and the last day; the slider starts on the last
    day; a tooltip's numbers are the tract's residents and agents, and its values per 100,000
    (none for a tract without agents)."""
    rows = []
    for day in range(10):
        infected_by_tract = (("53033000100", 200, 2 * day), ("53033000200", 500, day), ("53033000300", 0, 0))
        for geoid, agents, infected in infected_by_tract:
            rows.append(
                {
                    "day": day,
                    "geoid": geoid,
                    "agents": agents,
                    "cumulative_infected": infected,
                    "active": infected,
                    "hospital_occupancy": 0,
                }
            )
    data = maps.map_data(pd.DataFrame(rows), TRACTS, snapshot_days=(3,), title="tiny")
    assert data.days == [0, 3, 7, 9]
    d = page_data(maps.render_html(centroid_cells(TRACTS), data, tiles=False))
    assert d["days"] == [0, 3, 7, 9] and d["start"] == 3 and d["title"] == "tiny"
    assert d["tracts"] == [
        ["53033000100", "1", 4000, 200],
        ["53033000200", "2", 5000, 500],
        ["53033000300", "3", 6000, 0],
    ]
    cumulative = d["measures"][0]
    assert cumulative["key"] == "cumulative"
    # day 9: 18 of 200 agents and 9 of 500 per 100,000; the tract without agents has no value
    assert cumulative["values"][3] == [9000, 1800, None]
    assert cumulative["values"][1] == [3000, 600, None]  # day 3
    assert cumulative["bins"] == [1000.0 * k for k in range(10)]  # 0 first: the class "0"


def test_a_layers_colour_classes_reach_its_largest_value_on_any_frame() -> None:
    """One legend serves every day of a layer, so its classes must reach the largest value of any
    frame, not the last day's. Tract 1 has 100,000 agents (one agent is 1 per 100,000); its active
    infections rise to 40 on day 7 and fall to 10 by day 9, the last day, while its cumulative
    ones end at 40. Active: classes up to 40 (5 wide: 40 / 10 classes is 4, the next round
    width 5), so day 7's 40 is in the darkest class "36 - 40", as it is for cumulative."""
    active = {0: 0, 7: 40, 9: 10}
    rows = [
        {
            "day": day,
            "geoid": geoid,
            "agents": 100_000 if geoid == "53033000100" else 0,
            "cumulative_infected": 40 * day / 9 if geoid == "53033000100" else 0,
            "active": active.get(day, 0) if geoid == "53033000100" else 0,
            "hospital_occupancy": 0,
        }
        for day in range(10)
        for geoid in TRACTS["geoid"]
    ]
    data = maps.map_data(pd.DataFrame(rows), TRACTS, snapshot_days=())
    assert data.days == [0, 7, 9]
    assert data.values["active"][:, 0].tolist() == [0, 40, 10]
    for key in ("active", "cumulative"):
        assert data.bins[key] == [0.0, *(5.0 * k for k in range(1, 9))]
        assert data.labels(key)[-1] == "36 – 40"
    assert data.color_of("active", 40.0) == data.colors["active"][-1] != data.color_of("active", 10.0)


def test_tracts_that_share_a_centroid_each_get_a_cell() -> None:
    """Two tracts at the same point (a tract split in two, say): each gets its own cell, side by
    side, so every tract is drawn and the shapes stay in the tracts' order."""
    tracts = TRACTS.copy()
    tracts.loc[2, ["lat", "lon"]] = tracts.loc[1, ["lat", "lon"]].to_numpy()
    shapes = centroid_cells(tracts)
    assert shapes.geoid == list(tracts["geoid"]) and len(shapes.geometry) == 3
    assert all(g.is_valid and g.area > 0 for g in shapes.geometry)
    assert shapes.geometry[1].intersection(shapes.geometry[2]).area < 1e-3 * shapes.geometry[1].area
    assert len(shapes.geojson()["features"]) == 3


def test_the_scenarios_map_days_are_the_maps_snapshot_days() -> None:
    """outputs.map_days picks the map's frames and snapshots (not the default 50, 70, 120)."""
    with fixed_seeds_note():
        res = abm.run(NI, agents=300, days=5, replicates=1, sets=["outputs.map_days=[2]"])
    assert res.map(tiles=False).data.days == [0, 2, 4]
    with fixed_seeds_note():
        assert abm.run(NI, agents=300, days=5, replicates=1).map(tiles=False).data.days == [0, 4]


def test_an_empty_map_days_list_writes_no_snapshot(tmp_path) -> None:
    """outputs.map_days: [] asks for no snapshot (the other plots are written); left out, a run
    shorter than the default days gets its last day's."""
    with fixed_seeds_note():
        none = abm.run(NI, agents=300, days=5, replicates=1, sets=["outputs.map_days=[]"])
    none.write_figures(tmp_path / "none")
    with fixed_seeds_note():
        default = abm.run(NI, agents=300, days=5, replicates=1)
    default.write_figures(tmp_path / "default")
    assert sorted(p.name for p in (tmp_path / "none" / "plots").glob("map_day*")) == []
    assert sorted(p.name for p in (tmp_path / "default" / "plots").glob("map_day*")) == ["map_day004.png"]
    assert (tmp_path / "none" / "plots" / "hospital_occupancy.png").is_file()


@pytest.mark.parametrize(("days", "snapshots"), [(120, [50, 70, 119]), (51, [50]), (180, [50, 70, 120])])
def test_default_snapshot_days_past_the_end_become_the_last_day(tmp_path, days: int, snapshots: list[int]) -> None:
    """The default days 50, 70 and 120, each past the run's end replaced by its last day: a
    120-day run (days 0..119) showed 50 and 70 but not its end."""
    with fixed_seeds_note():
        abm.run(NI, agents=300, days=days, replicates=1).write_figures(tmp_path, map_days=None)
    names = sorted(p.name for p in (tmp_path / "plots").glob("map_day*"))
    assert names == [f"map_day{d:03d}.png" for d in snapshots]


def test_a_lone_tracts_cell_is_a_round_disc_of_its_land_on_the_ground() -> None:
    """One tract of 100 km2: its cell is the disc of radius 0.9 sqrt(100 / pi) + 0.5 km around its
    centroid, round on the ground (at latitude 47.6 a degree of longitude is 0.67 of one of
    latitude, so the cell is wider in degrees than it is high)."""
    import math

    lone = TRACTS.iloc[:1].assign(land_km2=100.0)
    cell = centroid_cells(lone).geometry[0]
    km_lon, km_lat = 111.320 * math.cos(math.radians(47.6)), 110.574
    west, south, east, north = cell.bounds
    radius = 0.9 * math.sqrt(100 / math.pi) + 0.5
    assert (east - west) * km_lon == pytest.approx(2 * radius, rel=0.01)
    assert (north - south) * km_lat == pytest.approx(2 * radius, rel=0.01)
    assert cell.area * km_lon * km_lat == pytest.approx(math.pi * radius**2, rel=0.01)


def test_legend_edges_are_whole_numbers_so_both_legends_label_each_class_alike() -> None:
    """The map's values are whole numbers per 100,000. A largest value of 21-25 made classes
    2.5 wide (edges 2.5, 7.5...): the page's legend rounded 2.5 up ("0 - 3", which holds no 3),
    the PNG's to even ("0 - 2"), so the two legends named one class differently. Edges are now
    whole numbers."""
    for vmax in (21, 25, 22.5):
        assert maps.nice_bins(vmax) == [5.0, 10.0, 15.0, 20.0, 25.0]
    for vmax in (1, 3, 7, 19, 20, 24, 99, 250, 2400, 37097):
        edges = maps.nice_bins(vmax)
        assert all(float(e).is_integer() for e in edges) and edges[-1] >= vmax
        assert len(edges) == 1 or edges[-2] < vmax


def test_tooltips_show_tract_names_as_text_not_markup() -> None:
    """A region's tract names are free text from its tracts.csv; the page's tooltip puts them into
    HTML, so a name such as "Lake <North> & Park" was read as a tag and lost. Names and geoids are
    escaped, and the tooltip reads them as written."""
    tracts = TRACTS.assign(name=["Lake <North> & Park", "2", "3"], geoid=["1<b>", "2", "3"])
    rows = [
        {"day": 0, "geoid": g, "agents": 10, "cumulative_infected": 0, "active": 0, "hospital_occupancy": 0}
        for g in tracts["geoid"]
    ]
    data = maps.map_data(pd.DataFrame(rows), tracts, snapshot_days=())
    d = page_data(maps.render_html(centroid_cells(tracts), data, tiles=False))
    assert d["tracts"][0][:2] == ["1&lt;b&gt;", "Lake &lt;North&gt; &amp; Park"]


def test_tooltips_round_a_tracts_residents_to_the_nearest_person() -> None:
    """A region's tract counts may be fractional (ACS figures interpolated onto other tracts); the
    tooltip cut them down (50.9 residents read 50). They are rounded to the nearest person."""
    tracts = TRACTS.assign(residents=[50.9, 1200.5, 7.2])
    rows = [
        {"day": 0, "geoid": g, "agents": 10, "cumulative_infected": 0, "active": 0, "hospital_occupancy": 0}
        for g in tracts["geoid"]
    ]
    data = maps.map_data(pd.DataFrame(rows), tracts, snapshot_days=())
    d = page_data(maps.render_html(centroid_cells(tracts), data, tiles=False))
    assert [t[2] for t in d["tracts"]] == [51, 1200, 7]  # 1200.5 to even, as Python rounds


def legends(values: dict[str, list[float | None]]) -> tuple[maps.MapData, dict, dict]:
    """Map data of one day of the three tracts with these values per 100,000 agents (None: no
    agents), and per measure the page's legend (labels, colours) and the PNG's (labels,
    colours)."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    agents = [0 if v is None else 100_000 for v in values["cumulative"]]
    rows = {"day": [0] * 3, "geoid": list(TRACTS["geoid"]), "agents": agents}
    for key, _, column in maps.MEASURES:
        rows[column] = [0.0 if v is None else v for v in values[key]]
    data = maps.map_data(pd.DataFrame(rows), TRACTS, snapshot_days=())
    page = {
        m["key"]: (m["labels"], m["colors"])
        for m in page_data(maps.render_html(centroid_cells(TRACTS), data, tiles=False))["measures"]
    }
    png = {}
    for key, _, _ in maps.MEASURES:
        fig = maps.snapshot_figure(centroid_cells(TRACTS), data, 0, key)
        legend = fig.axes[0].get_legend()
        png[key] = (
            [t.get_text() for t in legend.get_texts()],
            [to_hex(h.get_facecolor()) for h in legend.legend_handles],
        )
        plt.close(fig)
    return data, page, png


def test_a_tract_without_cases_has_its_own_legend_class_and_colour() -> None:
    """A tract with 0 per 100,000 was drawn in the lightest class, "0 - 5", like one with 5: no
    cases looked like some. 0 is now its own class, white, apart from the classes above it
    (whole numbers, light to dark) and from the grey of a tract without agents; the page and the
    PNGs show the same legend."""
    data, page, png = legends({"cumulative": [0, 25, None], "active": [0, 3, None], "hospital": [0, 1, None]})
    yellow = maps.palette(5)
    assert data.bins["cumulative"] == [0.0, 5.0, 10.0, 15.0, 20.0, 25.0]
    assert data.colors["cumulative"] == [maps.ZERO_COLOR, *yellow]
    assert data.labels("cumulative") == ["0", "1 – 5", "6 – 10", "11 – 15", "16 – 20", "21 – 25"]
    assert data.labels("active") == ["0", "1", "2", "3"]  # classes of one number each
    assert data.labels("hospital") == ["0", "1"]
    assert maps.class_labels([0.0, 1000.0, 2000.0]) == ["0", "1 – 1,000", "1,001 – 2,000"]
    assert [data.color_of("cumulative", v) for v in (0.0, 1.0, 5.0, 6.0, 25.0, float("nan"))] == [
        maps.ZERO_COLOR, yellow[0], yellow[0], yellow[1], yellow[4], maps.NO_AGENTS_COLOR,
    ]  # fmt: skip
    assert len({maps.ZERO_COLOR, maps.NO_AGENTS_COLOR, *yellow}) == 7
    for key, _, _ in maps.MEASURES:
        assert page[key] == (data.labels(key), data.colors[key])
        assert png[key] == ([*data.labels(key), "no agents"], [*data.colors[key], maps.NO_AGENTS_COLOR])


def test_a_layer_of_zeros_has_one_legend_class_and_zero_is_shown_when_no_tract_is_zero() -> None:
    """Hospital occupancy in a run of a few days is 0 everywhere: its legend was "0 - 1", a class
    made up for the empty layer. It is now "0" alone. Where no tract is 0 the legend still shows "0",
    as it shows "no agents" where every tract has agents: one legend for every day."""
    data, page, png = legends({"cumulative": [5, 7, 9], "active": [0, 0, 0], "hospital": [0, 0, None]})
    for key in ("active", "hospital"):
        assert data.bins[key] == [0.0] and data.labels(key) == ["0"] and data.colors[key] == [maps.ZERO_COLOR]
        assert page[key] == (["0"], [maps.ZERO_COLOR])
        assert png[key] == (["0", "no agents"], [maps.ZERO_COLOR, maps.NO_AGENTS_COLOR])
    assert data.labels("cumulative") == ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]
    assert [data.color_of("cumulative", v) for v in data.values["cumulative"][0]] == data.colors["cumulative"][5::2]
