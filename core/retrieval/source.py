"""The retrieval interface: what stages ask of storage, in the project's own types.

Stages never see a ChromaDB result dictionary. They ask a `CandidateSource` for the nearest
candidates to a query (the vector search, the lexical index in `lexical/`, or their
fusion in `fusion.py`, without a strategy changing) and a `RecordReader` for records by
metadata or by id. `core.store.VendorEvidence` is both, over one vendor's chunks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from core.hashing import canonical_criterion_hash
from core.store import Neighbour, StoredChunk
from core.store import Where as StoreWhere

# A metadata filter: the store's `Where`, or its mapping form (see core/store/filters.py).
Where = StoreWhere | Mapping[str, Any]

__all__ = ["CandidateSource", "Neighbour", "Query", "RecordReader", "StoredChunk", "Where"]


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
    # Questionnaire ids the reviewer mapped the criterion to (a criteria file's
    # questionnaire_ids): answers to them link as a hash match does.
    questionnaire_ids: tuple[str, ...] = ()
    # Controls the reviewer mapped the criterion to (a criteria file's controls column):
    # answers keyed by them link, accepted. Without them the store's mappings decide.
    control_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.linked_text:
            object.__setattr__(self, "linked_text", self.text)
        if not self.canonical_hash:
            object.__setattr__(self, "canonical_hash", canonical_criterion_hash(self.linked_text))


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
