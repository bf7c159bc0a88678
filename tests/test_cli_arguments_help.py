"""Every command's ``--help`` gives each of its arguments (FILE, RUNS, DIR, KIND) a help text."""

from __future__ import annotations

import re
from collections.abc import Iterator

import click
import typer.main
from typer.testing import CliRunner

from abm.cli import app

runner = CliRunner()


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Each command under ``group`` with the words that call it (``("data", "scenarios")``)."""
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def flat(text: str) -> str:
    """Help output without rich's box drawing and line breaks: the words in order."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_every_argument_of_every_command_has_help_in_its_help_output():
    tree = typer.main.get_command(app)
    found = {path: [p for p in cmd.params if isinstance(p, click.Argument)] for path, cmd in commands(tree)}
    assert {"run", "compare", "validate", "sweep", "calibrate", "learn"} <= {p[0] for p in found}
    assert len([a for args in found.values() for a in args]) == 8  # FILE of 5 commands, RUNS, DIR, KIND
    for path, arguments in found.items():
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
        assert result.exit_code == 0, result.output
        shown = flat(result.output)
        for argument in arguments:
            text = getattr(argument, "help", None)
            assert text, f"abm {' '.join(path)}: argument {argument.name} has no help text"
            # the argument's row: its name, its metavar, then the text
            assert re.search(rf"\b{argument.name}\b [^ ]+ {re.escape(' '.join(text.split()))}", shown), (path, shown)


def test_compare_help_names_what_its_runs_are():
    shown = flat(runner.invoke(app, ["compare", "--help"], env={"COLUMNS": "100"}).output)
    assert "runs RUNS... run folders written by `abm run`; the first is the reference [required]" in shown
