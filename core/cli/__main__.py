"""`python -m core.cli`: the `evidence` command."""

from core.cli import entry_point

entry_point()
