"""How a vendor's records sit in ChromaDB: filters that cost one vendor's records, not the
whole store's, and chunk texts kept out of ChromaDB's full-text index.

ChromaDB evaluates a `where` condition over every collection of the store, so a condition on a
value many vendors share would read every vendor's rows. Each record therefore also carries,
beside each key filtered on (`SCOPED_KEYS`), a scoped copy whose value names the vendor, and a
chunk's text is kept as a metadata value (`TEXT_KEY`), not as a ChromaDB document, which would
also feed a store-wide trigram index nothing here asks. The measurements behind both are in
benchmarks/README.md, "Where a vendor's records sit"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.store.filters import Condition, Scalar, Where

# The schema version from which every record of a vendor carries its scoped copies.
SCOPED_SINCE = 6
# Keys the project filters on whose values vendors share.
SCOPED_KEYS = frozenset({
    "source_type", "type", "doc_key", "doc_sha", "round_number",
    "criterion_canonical_hash", "questionnaire_id", "kind", "withdrawn",
})
SUFFIX = "@vendor"
TEXT_KEY = "text@record"


def scoped_key(key: str) -> str:
    return f"{key}{SUFFIX}"


def scoped_value(vendor_id: str, value: Scalar) -> str:
    """The value with its vendor and its type (so 3 and "3" stay apart)."""
    tag = ("b" if isinstance(value, bool) else "i" if isinstance(value, int)
           else "f" if isinstance(value, float) else "s")
    return f"{vendor_id}|{tag}:{value}"


def with_scopes(vendor_id: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata and the scoped copy of each of its filtered keys."""
    found = dict(metadata)
    for key in SCOPED_KEYS.intersection(metadata):
        value = metadata[key]
        if isinstance(value, str | int | float | bool):
            found[scoped_key(key)] = scoped_value(vendor_id, value)
    return found


def without_scopes(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata as it was written, without the scoped copies (nor a chunk's text)."""
    return {k: v for k, v in metadata.items() if not k.endswith(SUFFIX) and k != TEXT_KEY}


def stored_metadata(vendor_id: str, text: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A chunk record's metadata as ChromaDB keeps it: its scoped copies and its text."""
    return {**with_scopes(vendor_id, metadata), TEXT_KEY: text}


def read_back(document: str | None, metadata: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A chunk record's text and metadata as they were written, from what ChromaDB returns:
    the text kept in its metadata, or the document of a record written before."""
    text = metadata.get(TEXT_KEY)
    return (text if isinstance(text, str) else document or ""), without_scopes(metadata)


def scoped_where(vendor_id: str, where: Where) -> Where:
    """The same filter, each condition on a scoped key asked of the vendor's copy."""
    conditions = []
    for condition in where.conditions:
        if condition.key not in SCOPED_KEYS:
            conditions.append(condition)
            continue
        value: Scalar | tuple[Scalar, ...]
        if condition.op == "in":
            value = tuple(scoped_value(vendor_id, v) for v in condition.value)  # type: ignore[union-attr]
        else:
            value = scoped_value(vendor_id, condition.value)  # type: ignore[arg-type]
        conditions.append(Condition(scoped_key(condition.key), condition.op, value))
    return Where(tuple(conditions))
