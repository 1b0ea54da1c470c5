"""How many examples a property tries when each example writes a real store.

Such a property costs about a second an example, so the whole suite tries a few dozen of
each, new ones every run (no example database). `EVIDENCE_PROPERTY_SCALE` multiplies them
for a deeper run, e.g. `EVIDENCE_PROPERTY_SCALE=4 .venv/bin/python -m pytest -k properties`."""

from __future__ import annotations

import os


def store_examples(default: int) -> int:
    """`default` examples, times EVIDENCE_PROPERTY_SCALE (1 when unset), at least one."""
    try:
        scale = float(os.environ.get("EVIDENCE_PROPERTY_SCALE", "1"))
    except ValueError:
        raise SystemExit("EVIDENCE_PROPERTY_SCALE must be a number, such as 4.") from None
    return max(1, round(default * scale))
