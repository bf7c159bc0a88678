"""``python -m abm`` runs the ``abm`` command."""

from abm.entry import main

main()
