"""``python -m selector`` runs the ``attn-select`` command line."""

from selector.cli import run

run()
