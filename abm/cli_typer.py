"""The Typer application class of the ``abm`` command line: its commands show the help text of
their arguments (FILE, RUNS, DIR) in ``--help``.

Typer keeps an argument's help on its click parameter, set before click's own constructor runs;
click 8.5 added a ``help`` parameter to ``click.Argument``, whose constructor sets it to None
again (Typer passes it nothing), and every argument's row in ``--help`` came out blank.
:class:`ArgumentHelpCommand` puts the declared text back once the command is built."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand
from typer.models import ArgumentInfo
from typer.utils import get_params_from_function


class ArgumentHelpCommand(TyperCommand):
    """A Typer command whose arguments keep the help text declared with ``typer.Argument``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.callback is None:
            return
        declared = {
            name: meta.default.help
            for name, meta in get_params_from_function(self.callback).items()
            if isinstance(meta.default, ArgumentInfo)
        }
        for param in self.params:
            if isinstance(param, TyperArgument) and not param.help:
                param.help = declared.get(param.name or "")


class Typer(typer.Typer):
    """``typer.Typer`` whose commands are :class:`ArgumentHelpCommand` unless a command names its
    own class."""

    def command(self, *args: Any, cls: type[TyperCommand] | None = None, **kwargs: Any) -> Any:
        """As ``typer.Typer.command``, with :class:`ArgumentHelpCommand` as the default class."""
        return super().command(*args, cls=cls or ArgumentHelpCommand, **kwargs)
