"""``python -m abm`` runs the ``abm`` command."""

from abm.cli import main

main()
