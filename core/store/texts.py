"""A collection of records without vectors of their own: each record a text (a decision's
note, a criteria list's JSON) and its metadata, read whole."""

from __future__ import annotations

from typing import Any

from core.store import writes
from core.store.vendor import get_all


class TextRecords:
    """The records of one such collection."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection

    def all(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(id, text, metadata) of every record kept."""
        found = get_all(self.collection, include=["documents", "metadatas"])
        return [(record_id, text or "", dict(meta or {}))
                for record_id, text, meta in zip(found["ids"], found["documents"],
                                                 found["metadatas"], strict=True)]

    def metadata(self) -> list[tuple[str, dict[str, Any]]]:
        """(id, metadata) of every record kept, without its text."""
        found = get_all(self.collection, include=["metadatas"])
        return [(record_id, dict(meta or {}))
                for record_id, meta in zip(found["ids"], found["metadatas"], strict=True)]

    def add(self, record_id: str, text: str, metadata: dict[str, Any]) -> None:
        """One add: the record is kept whole or not at all, beside every earlier one."""
        writes.apply(self.collection, "add", ids=[record_id], documents=[text],
                     metadatas=[metadata], embeddings=[[1.0]])

    def upsert(self, record_id: str, text: str, metadata: dict[str, Any]) -> None:
        """One upsert: the record is stored whole or not at all, replacing its id's."""
        writes.apply(self.collection, "upsert", ids=[record_id], documents=[text],
                     metadatas=[metadata], embeddings=[[1.0]])
