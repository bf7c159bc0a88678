"""abm as a user gets it from an index or `pip install .`, not from a checkout.

The wheel holds the package, the data files that ``[tool.setuptools.package-data]`` in
pyproject.toml names and the example scenarios (setup.py copies scenarios/ into it); the source
distribution adds what MANIFEST.in names. The fast tests check
the globs against the package's files and the files abm opens as it works against the globs; the
slow one builds the wheel, installs it in a folder of its own and runs abm from another one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "abm"
CODE_SUFFIXES = {".py", ".pyc"}

# Runs the steps given (JSON: an abm command line as a list, or Python code as a string) in this
# one process, from the working folder, and writes their exit codes (0 for code that ran) and every
# file below the folders given (JSON, argv[2]) that the process opened, imports included
# (io.open_code raises the same "open" audit event), to a JSON file (argv[1]). Python's own files
# are left out: a virtual environment may lie in the checkout.
DRIVER = textwrap.dedent(
    """
    import json, os, sys

    out, roots, steps = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    roots = tuple(os.path.realpath(r) + os.sep for r in roots)
    python = tuple(os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix))
    opened = set()

    def audit(event, args):
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if path.startswith(roots) and not path.startswith(python):
                opened.add(path)

    sys.addaudithook(audit)
    import abm
    from abm.entry import command

    codes = []
    for step in steps:
        if isinstance(step, str):
            exec(step, {})
            codes.append(0)
        else:
            sys.argv = ["abm", *step]
            codes.append(command())
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"abm": os.path.realpath(abm.__file__), "codes": codes, "opened": sorted(opened)}, f)
    """
)

# Steps that read every kind of data file abm bundles: the region's figures, the mobility series,
# the observed series (calibration and the private calibration's kc2020 mode) and the map's script
# assets; the scenario files are copies, as a user who downloaded them has them. The wheel's test
# runs abm run; the fast one draws the map from Python, without the run folder's plots (most of
# the run's time), which read no file of abm's.
CALIBRATE = "scenarios/king_county/calibrate_2020.yaml"  # (its calibration windows need 151 days)
VALIDATE = [["validate", CALIBRATE], ["validate", "scenarios/learning/private_calibration_kc2020.yaml"]]
RUN = ["run", CALIBRATE, "--agents", "300", "--days", "35", "--replicates", "1", "--set", "calibration=null"]
MAP = (
    f"import abm; abm.run({CALIBRATE!r}, agents=300, days=35, replicates=1, sets=['calibration=null']).map('map.html')"
)
READ = [
    "populations/regions/king_county/region.yaml",
    "populations/regions/king_county/tracts.csv",
    "interventions/data/king_county_mobility_2020.csv",
    "calibration/data/king_county_2020.csv",
    "outputs/assets/leaflet/leaflet.js",
    "outputs/assets/leaflet/leaflet.css",
]


def package_data_globs(root: Path = ROOT) -> dict[str, list[str]]:
    """``[tool.setuptools.package-data]`` of pyproject.toml: package name -> glob patterns."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    return project["tool"]["setuptools"]["package-data"]


def packaged_data(root: Path = ROOT) -> set[Path]:
    """The data files the wheel holds: each package's globs, matched in its folder as setuptools
    matches them."""
    files: set[Path] = set()
    for package, patterns in package_data_globs(root).items():
        folder = root.joinpath(*package.split("."))
        files.update(p for pattern in patterns for p in folder.glob(pattern) if p.is_file())
    return files


def data_files(package: Path = PACKAGE) -> set[Path]:
    """Every file below the package that is not Python code or its compiled form."""
    return {
        p for p in package.rglob("*") if p.is_file() and p.suffix not in CODE_SUFFIXES and "__pycache__" not in p.parts
    }


def test_package_data_names_every_data_file_of_the_package():
    """A file below abm/ that no glob names is left out of the wheel: abm finds it in a checkout and
    not once installed."""
    assert data_files()  # the region's figures, the series, the map's assets
    missing = sorted(str(p.relative_to(ROOT)) for p in data_files() - packaged_data())
    assert not missing, f"not in [tool.setuptools.package-data] of pyproject.toml, so not in the wheel: {missing}"


def test_every_package_data_glob_names_a_file():
    """A glob that matches nothing names a file that was moved or renamed (it would no longer be
    shipped) or a package that is not there."""
    dead = [
        f"{package}: {pattern}"
        for package, patterns in package_data_globs().items()
        for pattern in patterns
        if not any(p.is_file() for p in ROOT.joinpath(*package.split(".")).glob(pattern))
    ]
    assert not dead


def copy_scenarios(user: Path) -> None:
    """The repository's scenarios/ in ``user``, as a user who downloaded them has them."""
    shutil.copytree(ROOT / "scenarios", user / "scenarios")


def run_steps(steps: list, user: Path, pythonpath: Path, roots: list[Path], tmp_path: Path) -> dict:
    """``steps`` (:data:`DRIVER`'s) run from ``user`` with abm imported from ``pythonpath`` (alone);
    what :data:`DRIVER` wrote, with the files opened below ``roots``."""
    out = tmp_path / "opened.json"
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    folders = json.dumps([str(r) for r in roots])
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(out), folders, json.dumps(steps)],
        cwd=user,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and out.is_file(), done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["codes"] == [0] * len(steps), done.stdout[-3000:] + done.stderr[-3000:]
    return result


def test_abm_reads_only_packaged_files_from_the_checkout(tmp_path):
    """Run from a folder outside the checkout on copies of its scenarios, abm opens no file of the
    checkout but its code and the data files the wheel holds: a path built from the repository's
    root (``Path(__file__).parents[1] / "scenarios"``) or a data file that no glob names would work
    here and fail once abm is installed from a wheel."""
    user = tmp_path / "user"
    user.mkdir()
    copy_scenarios(user)
    result = run_steps([*VALIDATE, MAP], user, ROOT, [ROOT], tmp_path)
    opened = {Path(p) for p in result["opened"]}
    assert Path(result["abm"]) == (PACKAGE / "__init__.py").resolve()
    packaged = {p.resolve() for p in packaged_data()}
    metadata = {p for p in opened if any(part.endswith((".egg-info", ".dist-info")) for part in p.parts)}
    outside = sorted(str(p) for p in opened - metadata if p.suffix not in CODE_SUFFIXES and p not in packaged)
    assert not outside, f"opened from the checkout, and not in the wheel: {outside}"
    assert {(PACKAGE / name).resolve() for name in READ} <= opened  # the steps read what they are for


def build(source: Path, kind: str, out: Path) -> Path:
    """Build ``kind`` (wheel, sdist) of a copy of ``source`` into ``out`` with setuptools' build
    backend, in a process of its own (setuptools writes its build folders beside the source)."""
    pytest.importorskip("setuptools", reason="building needs setuptools, the build backend")
    copy = out / "source"
    ignore = shutil.ignore_patterns(".git", ".venv", "runs", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")
    shutil.copytree(source, copy, ignore=ignore)
    code = f"import sys; from setuptools import build_meta; print(build_meta.build_{kind}(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", code, str(out)], cwd=copy, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out / done.stdout.split()[-1]


def test_the_sdist_carries_the_scenarios_docs_and_tests(tmp_path):
    """The source distribution holds what README's commands and the tests use beyond the package:
    without MANIFEST.in it had none of scenarios/ or docs/, and of tests/ only the top folder's
    test_*.py files, without the conftest.py they need."""
    sdist = build(ROOT, "sdist", tmp_path)
    with tarfile.open(sdist) as tar:
        names = {Path(*Path(n).parts[1:]) for n in tar.getnames()}
    wanted = {
        p.relative_to(ROOT)
        for folder in ("scenarios", "docs", "tests", "examples")
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and p.suffix != ".pyc" and "__pycache__" not in p.parts
    }
    assert Path("tests/conftest.py") in wanted and Path("scenarios/king_county/base.yaml") in wanted
    assert Path("setup.py") in names  # its build step puts scenarios/ in a wheel built from the sdist
    missing = sorted(str(p) for p in wanted - names)
    assert not missing, f"not in the sdist: {missing[:10]} ({len(missing)} in all)"
    assert not [n for n in names if n.suffix == ".pyc" or "__pycache__" in n.parts]


def repository_examples() -> list[str]:
    """Every file of the repository's scenarios/, as a path relative to it with ``/``, sorted."""
    folder = ROOT / "scenarios"
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def installed(kind: str, tmp_path: Path) -> Path:
    """abm built as ``kind`` (wheel, editable) and installed into a folder of its own, as
    `pip install --target` does (a wheel of pure Python is a zip of the installed files); the folder."""
    wheel = build(ROOT, kind, tmp_path)
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    return site


def examples_seen(site: Path, user: Path) -> tuple[Path, list[str]]:
    """The folder of example scenarios, and its files, that abm installed in ``site`` finds, run
    from ``user`` by a Python that sees only ``site`` (-S: not the environment's site-packages,
    whose abm may be the checkout's; ``site.addsitedir`` reads an editable install's .pth file)."""
    code = (
        "import json, site, sys; site.addsitedir(sys.argv[1]); from abm import examples as e; "
        "f = e.examples_folder(); print(json.dumps([str(f), e.example_files(f)]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-S", "-c", code, str(site)], cwd=user, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-3000:]
    folder, files = json.loads(done.stdout)
    return Path(folder), files


def test_the_wheel_carries_the_example_scenarios(tmp_path):
    """The wheel holds every file of scenarios/ as abm/example_scenarios/ (setup.py's build
    step), and abm installed from it finds them there: before, it held none, and a user of the
    wheel had no scenario to run."""
    site = installed("wheel", tmp_path)
    (tmp_path / "user").mkdir()
    folder, files = examples_seen(site, tmp_path / "user")
    assert folder == (site / "abm" / "example_scenarios").resolve()
    assert files == repository_examples()
    assert all((folder / f).read_bytes() == (ROOT / "scenarios" / f).read_bytes() for f in files)


def test_an_editable_install_finds_the_examples_in_the_checkout(tmp_path):
    """`pip install -e .` builds an editable wheel through the same build step, which copies
    nothing there: abm finds the examples in the checkout's scenarios/, where they are edited."""
    site = installed("editable", tmp_path)
    assert not list(site.rglob("*.yaml"))
    (tmp_path / "user").mkdir()
    folder, files = examples_seen(site, tmp_path / "user")
    assert folder == (tmp_path / "source" / "scenarios").resolve()  # the checkout build() installed from
    assert files == repository_examples()


@pytest.mark.slow  # builds the wheel (about 2 s) and runs abm on it (about 15 s on 2 cores)
def test_the_installed_wheel_runs_outside_the_checkout(tmp_path):
    """abm installed from its wheel into a folder of its own copies its example scenarios to
    another folder (`abm data scenarios`, README's step for a user of the wheel), and validates and
    runs them there, opening nothing of the checkout."""
    site = installed("wheel", tmp_path)
    with zipfile.ZipFile(next(tmp_path.glob("*.whl"))) as z:
        names = set(z.namelist())
    assert {f"abm/{p.relative_to(PACKAGE).as_posix()}" for p in data_files()} <= names
    user = tmp_path / "user"
    user.mkdir()
    result = run_steps([["data", "scenarios"], *VALIDATE, RUN], user, site, [ROOT, site], tmp_path)
    assert Path(result["abm"]) == (site / "abm" / "__init__.py").resolve()
    opened = {Path(p) for p in result["opened"]}
    assert {(site / "abm" / name).resolve() for name in READ} <= opened
    assert (site / "abm" / "example_scenarios" / "king_county" / "base.yaml").resolve() in opened
    assert not [str(p) for p in opened if p.is_relative_to(ROOT.resolve())]  # nothing of the checkout
    copied = sorted(
        p.relative_to(user / "scenarios").as_posix() for p in (user / "scenarios").rglob("*") if p.is_file()
    )
    assert copied == repository_examples()
    assert (user / "runs" / "calibrate_2020" / "map.html").is_file()
