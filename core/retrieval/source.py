"""The retrieval interface: what stages ask of storage, in the project's own types.

Stages never see a ChromaDB result dictionary. They ask a `CandidateSource` for the nearest
candidates to a query (the vector search, the lexical index in `lexical.py`, or their
fusion in `fusion.py`, without a strategy changing) and a `RecordReader` for records by
metadata or by id. `ChromaEvidence` is both, over one vendor's chunk collection."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from core.hashing import canonical_criterion_hash
from core.store import get_all, is_withdrawn, present_rows

Where = dict[str, Any]


@dataclass(frozen=True)
class Query:
    """The criterion as every stage sees it.

    `linked_text` is the text follow-ups are linked to when it is not the searched `text`
    (a reformulated question searches with other words but links by the question asked);
    `criterion_hash` is its contract hash. `canonical_hash` is computed from it unless
    given: follow-ups whose criterion differs from it only in typography share it."""

    text: str
    criterion_hash: str
    embedding: np.ndarray
    linked_text: str = ""  # empty: `text`
    canonical_hash: str = ""  # empty: computed from the linked text

    def __post_init__(self) -> None:
        if not self.linked_text:
            object.__setattr__(self, "linked_text", self.text)
        if not self.canonical_hash:
            object.__setattr__(self, "canonical_hash", canonical_criterion_hash(self.linked_text))


@dataclass(frozen=True)
class StoredChunk:
    """One stored record: its id, text, flat metadata and, when asked for, its vector."""

    id: str
    text: str
    metadata: dict[str, Any]
    embedding: np.ndarray | None = None


@dataclass(frozen=True)
class Neighbour:
    """A record a candidate source found, its score, and whether its ingest completed.

    A fusion of sources fills in the parts its score was made from; a single source leaves
    them None."""

    chunk: StoredChunk
    # The source's own score: cosine similarity for the vector search, -bm25() for the
    # lexical index, the reciprocal-rank-fusion score for the hybrid search.
    score: float
    committed: bool
    vector_rank: int | None = None
    vector_score: float | None = None  # cosine similarity
    lexical_rank: int | None = None
    lexical_score: float | None = None  # BM25, higher is better
    fused_score: float | None = None

    def score_parts(self) -> dict[str, int | float | None]:
        """The parts of a fused score, by the names a candidate gives them."""
        return {"vector_rank": self.vector_rank, "vector_score": self.vector_score,
                "lexical_rank": self.lexical_rank, "lexical_score": self.lexical_score,
                "fused_score": self.fused_score}


class CandidateSource(Protocol):
    """The first stage: the `n` records nearest the query, best first."""

    name: str

    def nearest(self, query: Query, n: int, *, where: Where | None = None) -> list[Neighbour]:
        """Up to `n` committed neighbours, with any uncommitted record ranked among them."""
        ...


class RecordReader(Protocol):
    """Records looked up, not searched: every match, whatever the collection's size."""

    def ids(self, where: Where) -> list[str]:
        """The ids of every record whose metadata matches."""
        ...

    def by_metadata(self, where: Where) -> list[StoredChunk]:
        """Every record whose metadata matches, with its text."""
        ...

    def by_ids(self, ids: Sequence[str], *, embeddings: bool = False) -> list[StoredChunk]:
        """The records of these ids that exist, in the store's order."""
        ...


class ChromaEvidence:
    """One vendor's chunk collection as a candidate source and a record reader.

    `is_committed` says whether a record belongs to a completed ingest. After an
    interrupted ingest the collection holds chunks no manifest entry names yet (a new
    version) or any more (an old one). `nearest` widens its window by the number of such
    chunks until it holds n committed ones or the whole collection, then cuts it just after
    the n-th, so the caller still sees (and can report) every uncommitted chunk ranked
    among them."""

    name = "vector"

    def __init__(self, chunks: Any, is_committed: Callable[[dict[str, Any]], bool],
                 *, page_size: int = 5000, batch_size: int | None = None) -> None:
        self._chunks = chunks
        self._is_committed = is_committed
        self._page_size = page_size
        self._batch_size = batch_size

    def nearest(self, query: Query, n: int, *, where: Where | None = None) -> list[Neighbour]:
        embedding = np.asarray(query.embedding, dtype=np.float32)
        window = n
        while True:
            # No count() first: a write between the two reads would size the window for a
            # store that no longer exists; ChromaDB answers a wider window with all it has.
            result = self._chunks.query(query_embeddings=[embedding], n_results=window,
                                        where=where,
                                        include=["documents", "metadatas", "distances"])
            rows = list(zip(result["ids"][0], result["documents"][0], result["metadatas"][0],
                            result["distances"][0], strict=True))
            exhausted = len(rows) < window
            if exhausted:
                rows = self._with_unreached(rows, embedding, where)
            found: list[Neighbour] = []
            committed = 0
            for record_id, text, metadata, distance in rows:
                if metadata is None:  # deleted while the query ran (see present_rows)
                    continue
                ok = bool(self._is_committed(metadata))
                found.append(Neighbour(StoredChunk(record_id, text, dict(metadata)),
                                       1.0 - float(distance), ok))
                committed += ok
                if committed == n:
                    break
            if committed >= n or exhausted:
                return found
            # committed < n here, so the next window is strictly wider than this one. It is
            # not capped by count(): while another thread writes, a count read a moment ago
            # can be too low and would end the widening early.
            window = n + len(rows) - committed

    def _with_unreached(self, rows: list[tuple], embedding: np.ndarray,
                        where: Where | None) -> list[tuple]:
        """The rows of a query that answered fewer than asked, plus any matching record the
        approximate index did not reach, scored exactly, all in distance order.

        An HNSW search may stop short of records it holds (a poorly connected node, or an
        index whose last writes were lost to a killed process and not yet replayed), so a
        window wider than the answer is checked against the records themselves. This runs
        only when the whole (filtered) collection fits in the window."""
        returned = {row[0] for row in rows}
        if where is None and self._chunks.count() <= len(returned):
            return rows
        missing = [i for i, _ in self._pages(where, include=()) if i not in returned]
        if not missing:
            return rows
        extra = [(c.id, c.text, c.metadata, 1.0 - float(c.embedding @ embedding))
                 for c in self.by_ids(missing, embeddings=True)]
        return sorted([*rows, *extra], key=lambda row: row[3])

    # Records looked up are never the marker of an answer a replaced round withdrew: to a
    # reader that answer no longer exists.

    def ids(self, where: Where) -> list[str]:
        return [i for i, row in self._pages(where, include=("metadatas",))
                if not is_withdrawn(row["metadatas"])]

    def by_metadata(self, where: Where) -> list[StoredChunk]:
        return [StoredChunk(i, row["documents"], dict(row["metadatas"]))
                for i, row in self._pages(where, include=("documents", "metadatas"))
                if not is_withdrawn(row["metadatas"])]

    def by_ids(self, ids: Sequence[str], *, embeddings: bool = False) -> list[StoredChunk]:
        include = ["documents", "metadatas"] + (["embeddings"] if embeddings else [])
        batch = self._batch_size or len(ids) or 1
        chunks: list[StoredChunk] = []
        for start in range(0, len(ids), batch):
            page = self._chunks.get(ids=list(ids[start : start + batch]), include=include)
            for position in present_rows(page, include):
                if is_withdrawn(page["metadatas"][position]):
                    continue
                vector = (np.asarray(page["embeddings"][position], dtype=np.float32)
                          if embeddings else None)
                chunks.append(StoredChunk(page["ids"][position], page["documents"][position],
                                          dict(page["metadatas"][position]), vector))
        return chunks

    def _pages(self, where: Where | None, include: Sequence[str]
               ) -> list[tuple[str, dict[str, Any]]]:
        found = get_all(self._chunks, where=where, include=include, page_size=self._page_size)
        return [(record_id, {name: found[name][i] for name in include})
                for i, record_id in enumerate(found["ids"])]

