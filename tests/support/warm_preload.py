"""What a warm process has imported before it is forked (see tests/support/warm.py): the
`evidence` command, its store room and ChromaDB's client modules. Importing only: no store is
opened and no thread started here."""

from __future__ import annotations

import os

_before = dict(os.environ)

import chromadb  # noqa: E402
import chromadb.api.rust  # noqa: E402,F401  (imported by the first client otherwise)

import core.cli.run  # noqa: E402,F401
import core.store  # noqa: E402,F401

# Settings the imported modules put into the environment as they were imported; a child
# given a new environment gets them back, as a fresh process would have them.
IMPORT_DEFAULTS = {name: value for name, value in os.environ.items()
                   if _before.get(name) != value}

del chromadb
