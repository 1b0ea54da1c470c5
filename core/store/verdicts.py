"""A vendor's language-model verdicts in the store: one record per verdict id, its raw answer as
the text and the verdict's fields as metadata. What a verdict means is `core.review.verdicts`'s."""

from __future__ import annotations

from typing import Any

from core.store import writes
from core.store.filters import Where
from core.store.vendor import get_all


class VerdictRecords:
    """The records of one vendor's verdicts collection."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection

    def by_id(self, record_id: str) -> list[dict[str, Any]]:
        """The metadata of the record of this id (none or one)."""
        found = self.collection.get(ids=[record_id], include=["metadatas"])
        return [dict(m) for m in found.get("metadatas") or [] if m]

    def matching(self, where: Where) -> list[dict[str, Any]]:
        """The metadata of every record that matches."""
        return [dict(m) for m in get_all(self.collection, where=where)["metadatas"]]

    def write(self, record_id: str, raw: str, metadata: dict[str, Any]) -> None:
        """One upsert: the record is stored whole or not at all."""
        writes.apply(self.collection, "upsert", ids=[record_id], documents=[raw],
                     metadatas=[metadata],
                                embeddings=[[1.0]])
