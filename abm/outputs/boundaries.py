"""Tract shapes for maps: real boundaries when the user has them, otherwise cells built from the
tract centroids the region carries.

Offline, a tract's cell is its Voronoi cell among the tract centroids, clipped to an outline of
the region approximated from the centroids (a concave hull of the centroids, widened by a disc
of each tract's land area) and, where the region gives its ``bounds`` (its extent in degrees),
to them. No polygons from elsewhere are carried.

Real boundaries come from a file the user names (a Census cartographic boundary shapefile, as
``.zip`` or ``.shp``, or a GeoJSON file with a ``GEOID`` property), or from the cache that
``abm data boundaries`` fills by downloading the Census file for the region's state. Shapefiles
are read with pyshp (``shapefile``), GeoJSON with the standard library; shapely makes the geometries.
"""

from __future__ import annotations

import functools
import io
import json
import logging
import math
import os
import shutil
import struct
import urllib.error
import urllib.request
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import shapefile
import shapely
import shapely.geometry
from shapely.geometry import MultiPolygon, Point, Polygon
from shapely.geometry.base import BaseGeometry

from abm.interrupts import interrupted, results_written
from abm.outputs.run_folder import missing_folders, remove_empty

CENSUS_YEAR = 2019  # 2010-vintage tracts, as in the bundled King County figures
CENSUS_URL = "https://www2.census.gov/geo/tiger/GENZ{year}/shp/cb_{year}_{state}_tract_500k.zip"
KM_PER_DEG_LAT = 110.574
KM_PER_DEG_LON_EQUATOR = 111.320
Bounds = tuple[float, float, float, float]  # [west, south, east, north], decimal degrees


class BoundaryError(ValueError):
    """A boundary file cannot be read or does not match the region. The message is for the user."""


@dataclass
class TractShapes:
    """One geometry (longitude/latitude) per tract, in the order of the region's tracts."""

    geoid: list[str]
    geometry: list[BaseGeometry]
    source: str  # "cells from tract centroids" or the boundary file used
    missing: int = 0  # tracts not in the boundary file, drawn as centroid cells

    def geojson(self, digits: int = 4) -> dict:
        """A GeoJSON FeatureCollection; feature ``i`` has properties ``i`` and ``geoid``."""
        features = []
        for i, (g, geom) in enumerate(zip(self.geoid, self.geometry, strict=True)):
            rounded = shapely.set_precision(geom, 10.0**-digits) if digits else geom
            if rounded.is_empty:
                rounded = geom
            features.append(
                {
                    "type": "Feature",
                    "properties": {"i": i, "geoid": g},
                    "geometry": json.loads(shapely.to_geojson(rounded)),
                }
            )
        return {"type": "FeatureCollection", "features": features}

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """(min lon, min lat, max lon, max lat)."""
        return tuple(shapely.total_bounds(np.array(self.geometry, dtype=object)).tolist())


# ----------------------------------------------------------------------------- projection
def _projection(lat0: float) -> tuple[float, float]:
    """Kilometres per degree of longitude and of latitude near latitude ``lat0``."""
    return KM_PER_DEG_LON_EQUATOR * math.cos(math.radians(lat0)), KM_PER_DEG_LAT


def _to_km(lon: np.ndarray, lat: np.ndarray, lat0: float, lon0: float) -> np.ndarray:
    kx, ky = _projection(lat0)
    return np.column_stack([(lon - lon0) * kx, (lat - lat0) * ky])


def _to_lonlat(geom: BaseGeometry, lat0: float, lon0: float) -> BaseGeometry:
    kx, ky = _projection(lat0)
    return shapely.transform(geom, lambda xy: np.column_stack([xy[:, 0] / kx + lon0, xy[:, 1] / ky + lat0]))


# ----------------------------------------------------------------------------- centroid cells
def region_outline_km(points: np.ndarray, land_km2: np.ndarray) -> BaseGeometry:
    """The region's outline approximated from tract centroids (km coordinates): a concave hull
    of the centroids buffered by 1.5 km, united with a disc of each tract's land area around
    its centroid (so large rural tracts reach out as far as they are big)."""
    multipoint = shapely.MultiPoint(points)
    hull = shapely.concave_hull(multipoint, ratio=0.12).buffer(1.5)
    radius = np.sqrt(np.maximum(land_km2, 0.5) / math.pi)
    discs = shapely.buffer(shapely.points(points), radius * 0.9 + 0.5)
    outline = shapely.union_all([hull, *discs])
    # Smooth the seams between discs and hull, and fill holes (lakes are not known here).
    smooth = outline.buffer(1.0).buffer(-1.0)
    parts = [Polygon(p.exterior) for p in getattr(smooth, "geoms", [smooth])]
    return parts[0] if len(parts) == 1 else MultiPolygon(parts)


def centroid_cells(tracts: pd.DataFrame, bounds: Bounds | None = None) -> TractShapes:
    """Voronoi cells of the tract centroids clipped to the outline of the region and to its
    ``bounds`` ([west, south, east, north] in degrees, if given): the outline, grown around the
    centroids, reaches past a county line that runs close to its outermost tracts' centroids
    (King County's northern line by up to 4.4 km)."""
    lat, lon = tracts["lat"].to_numpy(float), tracts["lon"].to_numpy(float)
    lat0, lon0 = float(lat.mean()), float(lon.mean())
    pts = _to_km(lon, lat, lat0, lon0)
    land = tracts["land_km2"].to_numpy(float) if "land_km2" in tracts else np.ones(len(tracts))
    outline = region_outline_km(pts, land)
    if bounds is not None:
        west, south, east, north = bounds
        corners = _to_km(np.array([west, east]), np.array([south, north]), lat0, lon0)
        outline = outline.intersection(shapely.box(*corners[0], *corners[1]))
    if len(pts) == 1:
        cells = [outline]
    else:
        # Jitter exact duplicates apart so that every centroid gets a cell.
        _, first = np.unique(pts.round(6), axis=0, return_index=True)
        dup = np.setdiff1d(np.arange(len(pts)), first)
        pts = pts.copy()
        pts[dup] += 1e-3 * (1 + np.arange(len(dup)))[:, None]
        vor = shapely.voronoi_polygons(shapely.MultiPoint(pts), extend_to=outline.envelope.buffer(10), ordered=True)
        cells = list(vor.geoms)
    out = []
    for k, cell in enumerate(cells):
        clipped = cell.intersection(outline)
        if clipped.is_empty:  # a centroid outside the outline: keep a small disc
            clipped = Point(pts[k]).buffer(0.5)
        clipped = _largest_parts(clipped)
        out.append(_to_lonlat(clipped.simplify(0.02), lat0, lon0))
    return TractShapes([str(g) for g in tracts["geoid"]], out, "cells from tract centroids")


def _largest_parts(geom: BaseGeometry) -> BaseGeometry:
    """Polygonal parts only, dropping slivers under 1% of the largest part."""
    parts = [g for g in getattr(geom, "geoms", [geom]) if isinstance(g, Polygon | MultiPolygon)]
    polys = [p for g in parts for p in getattr(g, "geoms", [g])]
    if not polys:
        return geom
    big = max(p.area for p in polys)
    keep = [p for p in polys if p.area >= 0.01 * big]
    return keep[0] if len(keep) == 1 else MultiPolygon(keep)


# ----------------------------------------------------------------------------- boundary files
POLYGON_TYPES = (shapefile.POLYGON, shapefile.POLYGONZ, shapefile.POLYGONM)
GEOID_FIELDS = ("GEOID", "GEOID10", "GEOID20")
# What pyshp raises on a file it cannot parse (a truncated or garbled file fails while unpacking).
_PARSE_ERRORS = (shapefile.ShapefileException, struct.error, ValueError, KeyError, IndexError, TypeError)


def _read_shapefile(path: Path, shp: bytes, dbf: bytes) -> dict[str, BaseGeometry]:
    """Polygon geometries by GEOID from a shapefile's ``.shp`` and ``.dbf`` contents, read with
    pyshp (``path`` names the file in messages). Null shapes are skipped; outer rings and holes
    are told apart by their orientation (pyshp's ``__geo_interface__``); Z and M values are dropped."""
    with warnings.catch_warnings():
        # pyshp warns of header sizes that disagree with the data; a file that cannot be read
        # fails below with a message naming it, and one that can is used as before.
        warnings.simplefilter("ignore")
        try:
            table = shapefile.Reader(dbf=io.BytesIO(dbf), encoding="utf-8", encodingErrors="replace")
            names = [field[0] for field in table.fields[1:]]  # fields[0] is the deletion flag
            key = next((k for k in GEOID_FIELDS if k in names), None)
            records = table.records() if key is not None else []
        except _PARSE_ERRORS as exc:
            raise BoundaryError(f"{path}: the attribute table (.dbf) is corrupt or truncated ({exc})") from exc
        if key is None:
            raise BoundaryError(f"{path}: the attribute table has no GEOID field (its fields: {', '.join(names)})")
        geoids = [str(record[key]).strip() for record in records]
        try:
            shapes = shapefile.Reader(shp=io.BytesIO(shp)).shapes()
        except _PARSE_ERRORS as exc:
            raise BoundaryError(f"{path}: the shapes (.shp) are corrupt or truncated ({exc})") from exc
    if len(shapes) != len(geoids):
        raise BoundaryError(
            f"{path}: the .shp file holds {len(shapes)} shapes but the .dbf table {len(geoids)} records; "
            "one of them is truncated, or they are not from the same shapefile"
        )
    out: dict[str, BaseGeometry] = {}
    log = logging.getLogger("shapefile")
    level = log.level
    log.setLevel(logging.ERROR)  # pyshp logs a warning a shape for rings it reads as outer ones
    try:
        for i, (shape, geoid) in enumerate(zip(shapes, geoids, strict=True)):
            if shape.shapeType == shapefile.NULL:
                continue
            if shape.shapeType not in POLYGON_TYPES:
                raise BoundaryError(
                    f"{path}: shape type {shape.shapeTypeName} is not a polygon; tract boundaries must be polygons"
                )
            try:
                out[geoid] = shapely.force_2d(shapely.geometry.shape(shape.__geo_interface__))
            except (*_PARSE_ERRORS, shapely.errors.ShapelyError, shapefile.GeoJSON_Error) as exc:
                raise BoundaryError(f"{path}: shape {i} (GEOID {geoid}) is not a valid polygon ({exc})") from exc
    finally:
        log.setLevel(level)
    return out


def _shapefile_members(path: Path) -> tuple[bytes, bytes]:
    if path.suffix.lower() == ".zip":
        try:
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
                shp = next((n for n in names if n.lower().endswith(".shp")), None)
                dbf = next((n for n in names if n.lower().endswith(".dbf")), None)
                if shp is None or dbf is None:
                    raise BoundaryError(f"{path}: the zip file holds no .shp and .dbf pair")
                return z.read(shp), z.read(dbf)
        except zipfile.BadZipFile as exc:
            raise BoundaryError(f"{path}: not a readable zip file ({exc})") from exc
    dbf_path = path.with_suffix(".dbf")
    if not dbf_path.is_file():
        raise BoundaryError(f"{path}: no {dbf_path.name} next to it (the shapefile's attribute table)")
    return path.read_bytes(), dbf_path.read_bytes()


def read_boundary_file(path: str | Path) -> dict[str, BaseGeometry]:
    """Tract geometries by GEOID from a shapefile (``.zip``/``.shp``) or GeoJSON file. A file read
    before is not read again while it is unchanged (a scenario's is checked at every validation)."""
    path = Path(path)
    if not path.is_file():
        raise BoundaryError(f"{path}: boundary file not found")
    return dict(_read_boundary_file(path, path.resolve(), path.stat().st_mtime_ns))


@functools.lru_cache(maxsize=4)
def _read_boundary_file(path: Path, resolved: Path, mtime: int) -> dict[str, BaseGeometry]:
    """The file's geometries (cached by its resolved path and modification time; ``path`` as
    given names it in messages)."""
    suffix = path.suffix.lower()
    try:
        if suffix in (".json", ".geojson"):
            data = json.loads(path.read_text(encoding="utf-8"))
            out = {}
            for f in data.get("features", []):
                props = f.get("properties") or {}
                geoid = props.get("GEOID") or props.get("geoid") or props.get("GEOID10")
                if geoid and f.get("geometry"):
                    out[str(geoid)] = shapely.from_geojson(json.dumps(f["geometry"]))
            return out
        if suffix in (".zip", ".shp"):
            return _read_shapefile(path, *_shapefile_members(path))
    except BoundaryError:
        raise
    except (ValueError, KeyError, OSError, shapely.errors.ShapelyError) as exc:
        raise BoundaryError(f"{path}: cannot read the boundary file ({exc})") from exc
    raise BoundaryError(f"{path}: unknown boundary file type {suffix!r}; use .zip, .shp, .geojson or .json")


def shapes_from_file(tracts: pd.DataFrame, path: str | Path, bounds: Bounds | None = None) -> TractShapes:
    """Tract shapes from a boundary file; tracts the file lacks get their centroid cell (within
    ``bounds``, if given). Raises :class:`BoundaryError` if the file holds none of the region's
    tracts."""
    found = read_boundary_file(path)
    geoids = [str(g) for g in tracts["geoid"]]
    hits = [g for g in geoids if g in found]
    if not hits:
        raise BoundaryError(
            f"{path}: none of the region's {len(geoids)} tract GEOIDs (e.g. {geoids[0]}) are in the file; "
            f"is it the right state and census vintage? {vintage_note(geoids[0][:2])}"
        )
    cells = centroid_cells(tracts, bounds) if len(hits) < len(geoids) else None
    geoms = [found[g] if g in found else cells.geometry[i] for i, g in enumerate(geoids)]  # type: ignore[union-attr]
    missing = len(geoids) - len(hits)
    tracts_word = "tract" if missing == 1 else "tracts"
    source = str(path) + (f" ({missing} {tracts_word} not in the file drawn as centroid cells)" if missing else "")
    return TractShapes(geoids, [g.simplify(0.0003) for g in geoms], source, missing)


def vintage_note(state_fips: str) -> str:
    """What to tell a user whose region's tracts are not (all) in a boundary file: the Census file
    that ``abm data boundaries`` fetches holds 2010-vintage tracts, and GEOIDs of the 2020 tracts
    are not all among them."""
    return (
        f"`abm data boundaries` fetches the Census {CENSUS_YEAR} file ({census_file_name(state_fips)}), "
        "whose tracts are the 2010-vintage tracts: a region whose tracts.csv uses 2020 tract GEOIDs matches "
        "only the tracts whose GEOID did not change. For such a region give a boundary file of 2020 tracts "
        f"(e.g. {census_file_name(state_fips, 2020)}) with `abm data boundaries --from FILE` or outputs.boundaries"
    )


# ----------------------------------------------------------------------------- cache and download
def cache_dir() -> Path:
    """Where downloaded boundary files are kept: $ABM_CACHE_DIR, else $XDG_CACHE_HOME/abm,
    else ~/.cache/abm (each with a ``boundaries/`` folder)."""
    if os.environ.get("ABM_CACHE_DIR"):
        base = Path(os.environ["ABM_CACHE_DIR"])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "abm"
    return base / "boundaries"


def census_file_name(state_fips: str, year: int = CENSUS_YEAR) -> str:
    """The Census cartographic boundary file of a state's tracts, e.g. cb_2019_53_tract_500k.zip."""
    return f"cb_{year}_{state_fips}_tract_500k.zip"


def census_url(state_fips: str, year: int = CENSUS_YEAR) -> str:
    """Where the Census Bureau publishes that file."""
    return CENSUS_URL.format(year=year, state=state_fips)


def cached_boundary_file(state_fips: str) -> Path | None:
    """The cached boundary file for a state, if ``abm data boundaries`` has fetched it."""
    if not state_fips:
        return None
    path = cache_dir() / census_file_name(state_fips)
    return path if path.is_file() else None


def download_boundaries(
    state_fips: str,
    timeout: float = 30.0,
    source: str | Path | None = None,
    tracts: pd.DataFrame | None = None,
) -> Path:
    """Download (or copy from ``source``) the Census tract boundary file into the cache and
    return its path. The file is read in full first (and, given the region's ``tracts``, must
    hold some of them); one that cannot be used raises :class:`BoundaryError` naming it, and the
    cached file stays as it was. Offline, the error says how to get the file. Interrupted (Ctrl-C,
    SIGTERM) before the file is in place, it leaves the cache as it was too, without the folders
    it made for it; once the file is in place the command's output is complete
    (:func:`abm.interrupts.results_written`)."""
    target = cache_dir() / census_file_name(state_fips)
    made = missing_folders(target.parent)
    try:
        return _cache_file(state_fips, target, timeout, source, tracts)
    except BaseException:
        remove_empty(made)
        raise


def _cache_file(
    state_fips: str, target: Path, timeout: float, source: str | Path | None, tracts: pd.DataFrame | None
) -> Path:
    """:func:`download_boundaries`' work: the file fetched beside ``target`` under a name of this
    process, checked, then put in place; the copy goes, whatever ends it (an interrupt as it is
    written too)."""
    tmp = target.with_name(f".{target.stem}.{os.getpid()}.part.zip")
    label = str(source) if source is not None else census_url(state_fips)
    try:
        _fetch(state_fips, target, tmp, timeout, source, label)
        try:
            if tracts is None:
                read_boundary_file(tmp)
            else:
                shapes_from_file(tracts, tmp)
        except BoundaryError as exc:
            raise BoundaryError(str(exc).replace(str(tmp), label)) from exc
        if interrupted() is not None:  # an interrupt that a library swallowed: the file is not cached
            raise KeyboardInterrupt
        tmp.replace(target)
        results_written()
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _fetch(state_fips: str, target: Path, tmp: Path, timeout: float, source: str | Path | None, label: str) -> None:
    """Copy ``source`` (else download ``label``, the Census file's address) to ``tmp``, beside the
    cached file ``target``; :class:`BoundaryError` for a file that is not there or not a zip, or a
    download that fails."""
    if source is not None:
        src = Path(source)
        if not src.is_file():
            raise BoundaryError(f"{src}: file not found")
        if src.suffix.lower() != ".zip":  # the cache keeps the Census zip of a state's tracts
            kind = f"a {src.suffix} file" if src.suffix else "a file without the .zip extension"
            raise BoundaryError(
                f"{src}: {kind} is not allowed; the cache takes a Census tract boundary zip "
                f"({census_file_name(state_fips)}); a boundary file of your own tracts (.geojson, .json, .shp "
                "or .zip, with a GEOID for each tract) goes in the scenario's outputs.boundaries"
            )
        target.parent.mkdir(parents=True, exist_ok=True)  # only once there is a file to keep
        shutil.copyfile(src, tmp)
        return
    try:
        with urllib.request.urlopen(label, timeout=timeout) as resp:
            data = resp.read()
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise BoundaryError(
            f"cannot download {label}: {reason}. This machine looks offline. Maps keep using tract cells "
            f"built from the centroids. To use real boundaries, download that file on a machine that is "
            f"online and run `abm data boundaries --from FILE`, or give its path to the map."
        ) from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(data)


def tract_shapes(
    tracts: pd.DataFrame, boundaries: str | Path | None = None, state_fips: str = "", bounds: Bounds | None = None
) -> TractShapes:
    """The shapes a map draws: the given boundary file, else the cached Census file for the
    state (if any), else cells from the tract centroids (within the region's ``bounds``, if
    given)."""
    if boundaries is not None:
        return shapes_from_file(tracts, boundaries, bounds)
    cached = cached_boundary_file(state_fips)
    if cached is not None:
        try:
            return shapes_from_file(tracts, cached, bounds)
        except BoundaryError:
            pass
    return centroid_cells(tracts, bounds)
