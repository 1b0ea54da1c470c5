"""`evidence`: ingest vendor evidence and retrieve it per criterion (see CONTRACT.md).

base.py holds the app and what the commands share; each command module registers its
commands on the app as it is imported; run.py runs the app (`main`, `entry_point`)."""

# `evidence --help` lists the commands in the order they register, which is the order these
# modules are imported in: status, check, strategies, retrieve; ask, assess, report,
# conversations; bench, models; audit (ingest, questionnaire and criteria, the sub-apps,
# come last).
# isort: off
from core.cli import ingest, read, review, measure, audit, criteria  # noqa: F401
# isort: on
from core.cli.base import app
from core.cli.run import entry_point, main

__all__ = ["app", "entry_point", "main"]
