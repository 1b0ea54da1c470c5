"""A vendor's conversation messages in the store: one record per message, with a vector so that
earlier messages can be found by similarity. What a turn means is `core.review.conversation`'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.store import writes
from core.store.filters import Where
from core.store.vendor import chroma_where, get_all


@dataclass(frozen=True)
class MessageRecord:
    """One stored message: its text and its metadata (conversation, turn, role, ...), and
    its vector where the read asked for it."""

    text: str
    metadata: dict[str, Any]
    vector: np.ndarray | None = None


class ConversationRecords:
    """The messages of one vendor's conversations collection."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection

    def count(self, where: Where) -> int:
        """How many messages match."""
        return len(self.collection.get(where=chroma_where(where), include=[])["ids"])

    def messages(self, where: Where, *, text: bool = True) -> list[MessageRecord]:
        """Every message that matches, with its metadata (and text)."""
        include = ("documents", "metadatas") if text else ("metadatas",)
        found = get_all(self.collection, where=where, include=include)
        texts = found.get("documents") or [""] * len(found["ids"])
        return [MessageRecord(t, dict(m)) for t, m in zip(texts, found["metadatas"], strict=True)]

    def with_vectors(self, where: Where) -> list[MessageRecord]:
        """Every message that matches, with its text, metadata and vector."""
        return [message for _, message in self._with_ids(where)]

    def every_message(self) -> list[tuple[str, MessageRecord]]:
        """(id, message) of every message, with its vector."""
        return self._with_ids(None)

    def _with_ids(self, where: Where | None) -> list[tuple[str, MessageRecord]]:
        found = get_all(self.collection, where=where,
                        include=("documents", "metadatas", "embeddings"))
        return [(i, MessageRecord(t or "", dict(m), np.asarray(v, dtype=np.float32)))
                for i, t, m, v in zip(found["ids"], found["documents"], found["metadatas"],
                                      found["embeddings"], strict=True)]

    def write(self, ids: Sequence[str], texts: Sequence[str],
              metadatas: Sequence[dict[str, Any]], vectors: Sequence[np.ndarray]) -> None:
        """These messages, in one write."""
        writes.apply(self.collection, "upsert", ids=list(ids), documents=list(texts),
                                metadatas=list(metadatas),
                                embeddings=np.asarray(vectors, dtype=np.float32))
