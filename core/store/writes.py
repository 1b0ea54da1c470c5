"""The one door every write of the store goes through: each call here is one ChromaDB write.

The write protocol's guarantees are about what a process killed or failing at any write
leaves behind, so tests stop, fail or kill the store exactly here (and only here), never
inside ChromaDB: `apply` for the writes to a collection, `create` for a collection made."""

from __future__ import annotations

from typing import Any


def apply(collection: Any, operation: str, **arguments: Any) -> Any:
    """One write to a collection: `operation` is "upsert", "add", "update", "delete" or
    "modify", with ChromaDB's own arguments."""
    return getattr(collection, operation)(**arguments)


def create(client: Any, name: str, **options: Any) -> Any:
    """The collection of this name, made if it does not exist (a write only then)."""
    return client.get_or_create_collection(name, **options)
