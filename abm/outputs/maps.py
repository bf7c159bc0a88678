"""The tract map of a run: ``map.html`` (folium/Leaflet, self-contained, works offline) with a
day slider and one layer per measure, and PNG snapshots of it at chosen days.

Measures (per 100,000 agents of each tract, means over replicates):

- cumulative infections (``by_tract.cumulative_per_100k``)
- active infections (``by_tract.active``)
- hospital occupancy (``by_tract.hospital_occupancy``: hospitalized, ICU and step-down)

To keep the file small the map carries weekly frames, the last day and the snapshot days,
with values rounded to whole numbers per 100,000.

Legend classes (per measure for all frames, the same on the page and the PNGs): "0" (white:
none in the tract that day), then whole-number ranges above 0 ("1 – 1,000", "1,001 – 2,000"...),
light to dark, and "no agents" (grey: a tract without agents has no value).
"""

from __future__ import annotations

import html as html_lib
import json
import math
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from abm.outputs.boundaries import TractShapes
from abm.outputs.run_folder import output_path

ASSETS = Path(__file__).parent / "assets"
DEFAULT_SNAPSHOT_DAYS = (50, 70, 120)
FRAME_STEP = 7
NO_AGENTS_COLOR = "#d9d9d9"
ZERO_COLOR = "#ffffff"
MEASURES = (
    ("cumulative", "Cumulative infections per 100k", "cumulative_infected"),
    ("active", "Active infections per 100k", "active"),
    ("hospital", "Hospital occupancy per 100k", "hospital_occupancy"),
)


@dataclass
class MapData:
    """What the map shows: frames (days), and per measure a [frame, tract] array of values per
    100,000 agents (NaN where a tract has no agents), its colour bins and colours."""

    days: list[int]
    tracts: pd.DataFrame  # geoid, name, residents, agents
    values: dict[str, np.ndarray]
    bins: dict[str, list[float]]  # upper edges of the colour classes, ascending: 0 first (the "0" class)
    colors: dict[str, list[str]]  # ZERO_COLOR first
    title: str = ""
    dates: list[str] | None = None  # the frames' dates, where the run gives the date of day 0

    def day_text(self, k: int) -> str:
        """Frame ``k``'s day as the map names it: "day 71", or "day 71 (2020-04-12)" with dates."""
        return f"day {self.days[k]}" + (f" ({self.dates[k]})" if self.dates else "")

    def color_of(self, measure: str, value: float) -> str:
        """The fill colour of a value (the same rule as the map's JavaScript)."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return NO_AGENTS_COLOR
        for edge, color in zip(self.bins[measure], self.colors[measure], strict=True):
            if value <= edge:
                return color
        return self.colors[measure][-1]

    def labels(self, measure: str) -> list[str]:
        """The legend's label of each colour class (both legends show these)."""
        return class_labels(self.bins[measure])


def class_labels(bins: list[float]) -> list[str]:
    """Labels of colour classes with upper edges ``bins`` (whole numbers, ascending, the first
    0) by the whole numbers each holds: ``[0, 1000, 2000]`` gives "0", "1 – 1,000",
    "1,001 – 2,000"; a class of one number is that number."""
    labels, lo = [], 0.0
    for hi in bins:
        labels.append(f"{hi:,.0f}" if lo == hi else f"{lo:,.0f} – {hi:,.0f}")
        lo = hi + 1
    return labels


def nice_bins(vmax: float, classes: int = 10) -> list[float]:
    """Upper edges of at most ``classes`` equal colour classes above 0 (0 is a class of its own)
    up to a round number >= vmax; none where vmax is not above 0. Whole numbers: the
    map's values are whole numbers per 100,000, so narrower classes would hold no value and
    their edges, shown as whole numbers, would repeat ("1 - 1"), and an edge such as 2.5 would
    be shown rounded, as a class it does not hold ("0 - 3" holds no 3)."""
    if not np.isfinite(vmax) or vmax <= 0:
        return []
    raw = vmax / classes
    mag = 10 ** math.floor(math.log10(raw))
    step = max(1.0, next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw and float(m * mag).is_integer()))
    n = max(1, math.ceil(vmax / step - 1e-9))
    return [round(step * (k + 1), 6) for k in range(n)]


def palette(classes: int = 7) -> list[str]:
    """``classes`` sequential yellow-orange-red colours, light to dark."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cmap = colormaps["YlOrRd"]
    return [to_hex(cmap(0.08 + 0.92 * k / max(classes - 1, 1))) for k in range(classes)]


def frame_days(days: int, snapshot_days: tuple[int, ...] | list[int] = DEFAULT_SNAPSHOT_DAYS) -> list[int]:
    """Days the map carries: every FRAME_STEP-th day, the last day and the snapshot days."""
    chosen = set(range(0, days, FRAME_STEP)) | {days - 1} | {d for d in snapshot_days if 0 <= d < days}
    return sorted(chosen)


def map_data(
    by_tract: pd.DataFrame,
    tracts: pd.DataFrame,
    snapshot_days: tuple[int, ...] | list[int] = DEFAULT_SNAPSHOT_DAYS,
    title: str = "",
) -> MapData:
    """The map's frames from a run's ``by_tract`` table and the region's tracts."""
    days = int(by_tract["day"].max()) + 1
    frames = frame_days(days, snapshot_days)
    geoids = [str(g) for g in tracts["geoid"]]
    sel = by_tract[by_tract["day"].isin(frames)].copy()
    sel["geoid"] = sel["geoid"].astype(str)
    first = by_tract[by_tract["day"] == 0]
    agents = pd.Series(first["agents"].to_numpy(), index=first["geoid"].astype(str))
    agents = agents.reindex(geoids).fillna(0).to_numpy(float)
    per = np.where(agents > 0, 1e5 / np.maximum(agents, 1), np.nan)
    values, bins, colors = {}, {}, {}
    for key, _label, column in MEASURES:
        wide = sel.pivot(index="day", columns="geoid", values=column).reindex(index=frames, columns=geoids)
        v = np.round(wide.to_numpy(float) * per[None, :])
        values[key] = v
        above = nice_bins(float(np.nanmax(v)) if np.isfinite(v).any() else 0.0)
        bins[key] = [0.0, *above]
        colors[key] = [ZERO_COLOR, *palette(len(above))]
    info = pd.DataFrame(
        {
            "geoid": geoids,
            "name": tracts["name"].astype(str).to_numpy() if "name" in tracts else geoids,
            "residents": tracts["residents"].to_numpy() if "residents" in tracts else np.zeros(len(geoids)),
            "agents": agents.astype(int),
        }
    )
    dates = None
    if "date" in by_tract:  # the run gives the date of day 0 (simulation.start_date)
        by_day = by_tract.drop_duplicates("day").set_index("day")["date"]
        dates = [str(by_day[d]) for d in frames]
    return MapData(frames, info, values, bins, colors, title, dates)


# ----------------------------------------------------------------------------- HTML
_JS = r"""
(function () {
  var map = %(map)s;
  var D = %(data)s;
  var frame = D.start, measure = 0, layers = [];
  function color(m, v) {
    if (v === null) { return D.noAgents; }
    var M = D.measures[m];
    for (var k = 0; k < M.bins.length; k++) { if (v <= M.bins[k]) { return M.colors[k]; } }
    return M.colors[M.colors.length - 1];
  }
  function style(m) {
    return function (f) {
      return {fillColor: color(m, D.measures[m].values[frame][f.properties.i]), fillOpacity: 0.75,
              color: '#555', weight: 0.4, className: 'abm-tract'};
    };
  }
  function dayText(k) { return D.days[k] + (D.dates ? ' (' + D.dates[k] + ')' : ''); }
  function fmt(v) { return v === null ? 'no agents' : Math.round(v).toLocaleString('en-US'); }
  function tip(i) {
    var t = D.tracts[i], s = '<b>Tract ' + t[1] + '</b> (' + t[0] + ')<br>Residents: ' +
      t[2].toLocaleString('en-US') + ' (' + t[3].toLocaleString('en-US') + ' agents)<br>Day ' + dayText(frame);
    for (var m = 0; m < D.measures.length; m++) {
      var row = D.measures[m].label + ': ' + fmt(D.measures[m].values[frame][i]);
      s += '<br>' + (m === measure ? '<b>' + row + '</b>' : row);
    }
    return s;
  }
  var base = {};
  D.measures.forEach(function (M, m) {
    var lyr = L.geoJSON(D.geojson, {
      style: style(m),
      onEachFeature: function (f, l) {
        l.bindTooltip(function () { return tip(f.properties.i); }, {sticky: true});
        l.on('add', function () {
          var el = l.getElement();
          if (el) { el.setAttribute('data-geoid', f.properties.geoid); el.setAttribute('data-measure', M.key); }
        });
      }
    });
    layers.push(lyr);
    base[M.label] = lyr;
  });
  function legendHtml() {
    var M = D.measures[measure], s = '<b>' + M.label + '</b><br>';
    for (var k = 0; k < M.labels.length; k++) {
      s += '<i style="background:' + M.colors[k] + '"></i>' + M.labels[k] + '<br>';
    }
    return s + '<i style="background:' + D.noAgents + '"></i>no agents';
  }
  var legend = L.control({position: 'bottomright'});
  legend.onAdd = function () {
    this._div = L.DomUtil.create('div', 'abm-legend');
    this._div.innerHTML = legendHtml();
    return this._div;
  };
  var slider = L.control({position: 'bottomleft'});
  slider.onAdd = function () {
    var div = L.DomUtil.create('div', 'abm-slider');
    div.innerHTML = '<div class="abm-title">' + D.title + '</div><label>Day <span id="abm-day">' + dayText(frame) +
      '</span></label><br><input id="abm-day-slider" type="range" min="0" max="' + (D.days.length - 1) +
      '" step="1" value="' + frame + '">';
    L.DomEvent.disableClickPropagation(div);
    L.DomEvent.disableScrollPropagation(div);
    return div;
  };
  function refresh() {
    layers[measure].setStyle(style(measure));
    document.getElementById('abm-day').textContent = dayText(frame);
    document.getElementById('abm-day-slider').value = frame;
    legend._div.innerHTML = legendHtml();
  }
  function setFrame(k) { frame = Math.max(0, Math.min(D.days.length - 1, k)); refresh(); }
  function setDay(day) {
    var best = 0;
    for (var k = 0; k < D.days.length; k++) {
      if (Math.abs(D.days[k] - day) < Math.abs(D.days[best] - day)) { best = k; }
    }
    setFrame(best);
  }
  layers[0].addTo(map);
  var overlays = {};
  %(tiles_overlay)s
  L.control.layers(base, overlays, {collapsed: false}).addTo(map);
  slider.addTo(map);
  legend.addTo(map);
  map.on('baselayerchange', function (e) { measure = layers.indexOf(e.layer); refresh(); });
  document.getElementById('abm-day-slider').addEventListener('input', function (e) {
    setFrame(parseInt(e.target.value, 10));
  });
  map.fitBounds(layers[0].getBounds());
  var h = /day=(\d+)/.exec(window.location.hash);
  if (h) { setDay(parseInt(h[1], 10)); } else { refresh(); }
  window.abmMap = {setFrame: setFrame, setDay: setDay, days: D.days, frame: function () { return frame; },
                   measure: function () { return D.measures[measure].key; }, layers: layers, map: map};
})();
"""

_CSS = """
.abm-slider, .abm-legend { background: rgba(255,255,255,0.92); padding: 6px 10px; border-radius: 5px;
  box-shadow: 0 0 6px rgba(0,0,0,0.3); font: 13px/1.4 sans-serif; }
.abm-slider input { width: 260px; }
.abm-title { font-weight: bold; max-width: 280px; }
.abm-legend i { width: 18px; height: 12px; float: left; margin: 2px 6px 0 0; opacity: 0.8; border: 1px solid #999; }
"""


class _Script:
    """A child of the folium map that adds raw JavaScript to the page once the map exists."""

    def __new__(cls, code: str) -> Any:
        from branca.element import Element, MacroElement

        class Script(MacroElement):
            def __init__(self) -> None:
                super().__init__()
                self._name = "AbmTractLayers"

            def render(self, **kwargs: Any) -> None:
                self.get_root().script.add_child(Element(code), name=self.get_name())

        return Script()


def _json_values(v: np.ndarray) -> list[list[float | None]]:
    return [[None if not np.isfinite(x) else int(x) for x in row] for row in v]


def render_html(shapes: TractShapes, data: MapData, tiles: bool = True) -> str:
    """The map as one self-contained HTML page (Leaflet inlined; background tiles optional)."""
    import folium
    from branca.element import Element

    west, south, east, north = shapes.bounds
    m = folium.Map(location=[(south + north) / 2, (west + east) / 2], zoom_start=9, tiles=None, control_scale=True)
    # Leaflet is inlined below; drop folium's CDN scripts and stylesheets (jQuery, Bootstrap,
    # awesome-markers are not used).
    m.default_js = []
    m.default_css = []
    leaflet_css = (ASSETS / "leaflet" / "leaflet.css").read_text(encoding="utf-8")
    leaflet_js = (ASSETS / "leaflet" / "leaflet.js").read_text(encoding="utf-8")
    header = m.get_root().header
    header.add_child(Element(f"<style>{leaflet_css}</style>"), name="leaflet_css")
    header.add_child(Element(f"<script>{leaflet_js}</script>"), name="leaflet_js")
    header.add_child(Element(f"<style>{_CSS}</style>"), name="abm_css")
    if data.title:
        header.add_child(Element(f"<title>{data.title}</title>"), name="abm_title")
    payload: dict[str, Any] = {
        "title": data.title,
        "days": data.days,
        "dates": data.dates,  # null without a start date
        "start": len(data.days) - 1,
        "noAgents": NO_AGENTS_COLOR,
        # The tooltip is HTML: a tract's geoid and name (free text of the region's tracts.csv) as text.
        "tracts": [
            [html_lib.escape(r.geoid), html_lib.escape(r.name), round(float(r.residents)), int(r.agents)]
            for r in data.tracts.itertuples(index=False)
        ],
        "geojson": shapes.geojson(),
        "measures": [
            {
                "key": key,
                "label": label,
                "bins": data.bins[key],
                "colors": data.colors[key],
                "labels": data.labels(key),
                "values": _json_values(data.values[key]),
            }
            for key, label, _ in MEASURES
        ],
        "source": shapes.source,
    }
    tiles_js = (
        "overlays['OpenStreetMap (online)'] = L.tileLayer('https://tile.openstreetmap.org/{z}/{x}/{y}.png', "
        "{maxZoom: 19, attribution: '&copy; OpenStreetMap contributors'}).addTo(map);"
        if tiles
        else ""
    )
    script = _JS % {"map": m.get_name(), "data": json.dumps(payload, separators=(",", ":")), "tiles_overlay": tiles_js}

    m.add_child(_Script(script))  # rendered after folium's script that creates the map
    html = m.get_root().render()
    # folium names its elements with random ids (map_<32 hex digits>): number them in order of
    # appearance instead, so that the same run writes the same file.
    ids: dict[str, str] = {}
    return re.sub(r"(?<=_)[0-9a-f]{32}\b", lambda x: ids.setdefault(x.group(0), f"abm{len(ids)}"), html)


def write_map(path: str | Path, shapes: TractShapes, data: MapData, tiles: bool = True) -> Path:
    """Write ``map.html``."""
    path = Path(path)
    path.write_text(render_html(shapes, data, tiles), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- PNG snapshots
def snapshot_figure(
    shapes: TractShapes, data: MapData, day: int, measure: str = "cumulative", *, pyplot: bool = True
) -> Any:
    """A matplotlib figure of the map on ``day`` (one of ``data.days``); pyplot's or, for a file,
    not (``pyplot``: :func:`abm.outputs.plots.new_figure`)."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Patch, PathPatch
    from matplotlib.path import Path as MplPath

    k = data.days.index(day)
    label = next(lab for key, lab, _ in MEASURES if key == measure)
    vals = data.values[measure][k]
    patches, facecolors = [], []
    for i, geom in enumerate(shapes.geometry):
        color = data.color_of(measure, float(vals[i]))
        for poly in getattr(geom, "geoms", [geom]):
            rings = [np.asarray(poly.exterior.coords)] + [np.asarray(r.coords) for r in poly.interiors]
            verts = np.concatenate(rings)
            codes = np.concatenate(
                [[MplPath.MOVETO] + [MplPath.LINETO] * (len(r) - 2) + [MplPath.CLOSEPOLY] for r in rings]
            )
            patches.append(PathPatch(MplPath(verts, codes)))
            facecolors.append(color)
    from abm.outputs.plots import new_figure

    fig = new_figure(pyplot, figsize=(9, 6.4), layout="compressed")
    ax = fig.subplots()
    ax.add_collection(PatchCollection(patches, facecolors=facecolors, edgecolors="#555555", linewidths=0.25))
    west, south, east, north = shapes.bounds
    ax.set_xlim(west, east)
    ax.set_ylim(south, north)
    ax.set_aspect(1 / math.cos(math.radians((south + north) / 2)))
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude")
    # What and which day first; the run's title (long for a run of few agents a tract) wrapped
    # under it, so that the title stays inside the figure.
    ax.set_title("\n".join([f"{label}, {data.day_text(k)}", *textwrap.wrap(data.title, 100)]), fontsize=11)
    handles = [
        Patch(facecolor=color, edgecolor="#999999", label=text)
        for text, color in zip(data.labels(measure), data.colors[measure], strict=True)
    ]
    handles.append(Patch(facecolor=NO_AGENTS_COLOR, edgecolor="#999999", label="no agents"))
    ax.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title="per 100,000",
        title_fontsize=8, frameon=False,
    )  # fmt: skip
    ax.text(
        0.99, 0.01, f"shapes: {shapes.source}", transform=ax.transAxes, ha="right", va="bottom", fontsize=7,
        color="#555555",
    )  # fmt: skip
    return fig


def write_snapshots(
    folder: str | Path,
    shapes: TractShapes,
    data: MapData,
    days: tuple[int, ...] | list[int] = DEFAULT_SNAPSHOT_DAYS,
    measure: str = "cumulative",
) -> list[Path]:
    """PNG snapshots ``map_day050.png``... for those of ``days`` within the run (none for an
    empty list); drawn without pyplot, which keeps its backend and figures."""
    from abm.outputs.figure_parts import save_png

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    chosen = [d for d in days if d in data.days]
    out = []
    for day in chosen:
        fig = snapshot_figure(shapes, data, day, measure, pyplot=False)
        path = folder / f"map_day{day:03d}.png"
        save_png(fig, path, 100)
        out.append(path)
    return out


def map_title(summary: dict[str, Any], tracts: int | None = None) -> str:
    """A map title from a run summary: scenario, agents, replicates; with the number of
    ``tracts``, a warning where a tract holds few agents (one agent is then hundreds per 100,000)."""
    reps = summary.get("replicates", 1)
    agents = summary.get("agents", 0)
    title = f"{summary.get('scenario', '')}: {agents:,} agents, " + (
        "one replicate" if reps == 1 else f"mean of {reps:,} replicates"
    )
    if tracts and agents / tracts < 1000:
        title += f"; about {agents / tracts:,.0f} agents a tract, so one tract's figure per 100,000 is noisy"
    return title


class MapPage:
    """A rendered map page: ``html``; ``save(path)``; shows itself in Jupyter."""

    def __init__(self, html: str, shapes: TractShapes, data: MapData) -> None:
        self.html, self.shapes, self.data = html, shapes, data

    def save(self, path: str | Path) -> Path:
        """Write the page to ``path`` (a file; its folder must exist) and return the path."""
        path = output_path(path, "path")
        path.write_text(self.html, encoding="utf-8")
        return path

    def snapshot(self, day: int, measure: str = "cumulative") -> Any:
        """A matplotlib figure of the map on one of ``data.days``."""
        return snapshot_figure(self.shapes, self.data, day, measure)

    def _repr_html_(self) -> str:
        return (
            f'<iframe srcdoc="{html_lib.escape(self.html, quote=True)}" '
            'style="width:100%;height:620px;border:none"></iframe>'
        )
