"""A vendor's relevance judgments in the store: one record per criterion, excerpt content and
judge (a person's grade is kept apart from a model's suggestion), replaced when judged again.
What a judgment means is `core.outputs.relevance`'s."""

from __future__ import annotations

from typing import Any

from core.store import writes
from core.store.vendor import get_all


class JudgmentRecords:
    """The records of one vendor's judgments collection."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection

    def all(self) -> list[dict[str, Any]]:
        """The metadata of every judgment kept."""
        return [dict(m or {}) for m in get_all(self.collection)["metadatas"]]

    def write(self, ids: list[str], metadatas: list[dict[str, Any]]) -> None:
        """One upsert: the judgments are stored all together or not at all."""
        writes.apply(self.collection, "upsert", ids=ids, documents=[""] * len(ids),
                     metadatas=metadatas, embeddings=[[1.0]] * len(ids))
