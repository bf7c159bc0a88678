"""The error of an installed plug-in that cannot be loaded, in a module of its own so that the
command line can catch it without importing the engine's libraries."""

from __future__ import annotations


class PluginError(ImportError):
    """A plug-in (an ``abm.interventions`` entry point) cannot be loaded or is not an
    intervention. The message is meant for the user as is."""
