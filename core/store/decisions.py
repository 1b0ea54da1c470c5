"""A vendor's reviewer decisions in the store: one record per decision, added and never
replaced, its note as the text and its fields as metadata. What a decision means is
`core.review.decisions`'s."""

from __future__ import annotations

from typing import Any

from core.store import writes
from core.store.vendor import get_all


class DecisionRecords:
    """The records of one vendor's decisions collection."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection

    def all(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(id, note, metadata) of every decision kept."""
        found = get_all(self.collection, include=["documents", "metadatas"])
        return [(record_id, text or "", dict(meta or {}))
                for record_id, text, meta in zip(found["ids"], found["documents"],
                                                 found["metadatas"], strict=True)]

    def add(self, record_id: str, note: str, metadata: dict[str, Any]) -> None:
        """One add: the decision is kept whole or not at all, beside every earlier one."""
        writes.apply(self.collection, "add", ids=[record_id], documents=[note],
                     metadatas=[metadata], embeddings=[[1.0]])
