"""How a vendor's records sit in ChromaDB: filters that cost one vendor's records, not the
whole store's, and chunk texts kept out of ChromaDB's full-text index.

ChromaDB's embedded store (and a `chroma run` server) keeps every collection's metadata in one
SQLite table and evaluates each condition of a `where` as `id IN (SELECT id FROM
embedding_metadata WHERE key = ? AND value = ?)`, over every collection of the store. A
condition on a value many vendors share (`source_type = "followup"`, `round_number = 1`, the
`doc_key` of a file every vendor sends as `policy.pdf`, the hash of a criterion asked of every
vendor) therefore reads every vendor's matching rows before the vendor's own collection is
consulted. Measured on a store of 1,000 vendors of 30 chunks: deleting a document's other
versions took 46.7 ms against 1.4 ms alone, a filtered read 11.9 against 3.2 ms.

So every record also carries, beside each of the keys filtered on (`SCOPED_KEYS`), a scoped
copy whose value names the vendor (`doc_key@vendor = "acme|s:3f2a..."`). `VendorStore` writes
the copies with every record, filters on them once the vendor's collections record schema 6
(whose migration adds them to older records), and hands back metadata without them. A
filter on any other key works as before, store-wide.

A chunk record's text is kept the same way, as a metadata value (`TEXT_KEY`) and not as
ChromaDB's document: every document is also written to ChromaDB's store-wide trigram index
for `where_document`, which nothing here asks (the lexical index is the project's own), and
which cost a third of each chunk write (1.4 against 0.9 ms a record in batches of 512, 2.4
against 1.5 ms once a collection holds 50,000). Records written before keep their document;
`read_back` takes whichever a record holds."""

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
