"""The import package is called `core`, a name other distributions use too. Installed beside
one of them in the same environment, their files and ours share one `core` folder and Python
imports whichever was written last, without a word. This check names the distribution that
clashes, so the user hears of it in one sentence instead of a stray ImportError."""

from __future__ import annotations

from functools import cache
from importlib import metadata

DISTRIBUTION = "evidence-workbench"
PACKAGE = "core"


def _normal(name: str) -> str:
    return name.lower().replace("_", "-")


def clashing_distributions() -> list[str]:
    """Other installed distributions that also provide a top-level `core` package: named in
    their top_level.txt where they have one, else holding files under core/ in their RECORD.
    Each file is searched as text, not parsed: every command runs this check, and parsing
    every RECORD of an environment with torch in it takes most of a second."""
    owners = set()
    for dist in metadata.distributions():
        top_level = dist.read_text("top_level.txt")
        if top_level is not None:
            provides = PACKAGE in top_level.split()
        else:
            record = dist.read_text("RECORD") or ""
            provides = record.startswith(f"{PACKAGE}/") or f"\n{PACKAGE}/" in record
        if provides:
            owners.add(dist.metadata["Name"])
    return sorted({name for name in owners if name and _normal(name) != DISTRIBUTION})


@cache
def installation_problem() -> str | None:
    """One sentence when another distribution provides a `core` package too; None when the
    workbench has the name to itself (checked once per process)."""
    others = clashing_distributions()
    if not others:
        return None
    names = ", ".join(others)
    return (f"Another installed distribution ({names}) also provides a top-level 'core' "
            "package, which can overwrite the workbench's files or be imported in their "
            f"place; install the workbench in its own virtual environment (make install "
            f"does) or uninstall {names}.")
