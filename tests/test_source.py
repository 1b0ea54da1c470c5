"""The vector source over a collection whose approximate index answers short: every record
that fits in the window is still found, scored exactly."""

from __future__ import annotations

import numpy as np

from core.retrieval.source import Query
from core.store import VendorEvidence, VendorStore

VECTORS = {"a": [1.0, 0.0], "b": [0.6, 0.8], "c": [0.0, 1.0]}


class ShortIndex:
    """A collection whose nearest-neighbour index lost record `lost` (as after a killed
    write), while its records are all there."""

    def __init__(self, lost: str) -> None:
        self.lost = lost

    def count(self) -> int:
        return len(VECTORS)

    def query(self, *, query_embeddings, n_results, where, include):
        q = np.asarray(query_embeddings[0])
        ranked = sorted((i for i in VECTORS if i != self.lost),
                        key=lambda i: -float(np.dot(VECTORS[i], q)))[:n_results]
        return {"ids": [ranked], "documents": [[f"text {i}" for i in ranked]],
                "metadatas": [[{"source": i} for i in ranked]],
                "distances": [[1.0 - float(np.dot(VECTORS[i], q)) for i in ranked]]}

    def get(self, *, ids=None, where=None, include=(), limit=None, offset=0):
        chosen = list(VECTORS) if ids is None else [i for i in ids if i in VECTORS]
        chosen = chosen[offset: offset + limit] if limit else chosen
        page = {"ids": chosen}
        if "documents" in include:
            page["documents"] = [f"text {i}" for i in chosen]
        if "metadatas" in include:
            page["metadatas"] = [{"source": i} for i in chosen]
        if "embeddings" in include:
            page["embeddings"] = [VECTORS[i] for i in chosen]
        return page


def query(vector) -> Query:
    return Query(text="q", criterion_hash="h", embedding=np.asarray(vector, dtype=np.float32))


def test_a_record_the_index_does_not_reach_is_found_and_ranked_in_place():
    source = VendorEvidence(VendorStore("v", ShortIndex(lost="b"), None), lambda meta: True)
    found = source.nearest(query([0.8, 0.6]), 10)
    assert [nb.chunk.id for nb in found] == ["b", "a", "c"]
    assert round(found[0].score, 6) == round(0.6 * 0.8 + 0.8 * 0.6, 6)


def test_a_full_answer_reads_nothing_more():
    class Counting(ShortIndex):
        gets = 0

        def get(self, **kwargs):
            Counting.gets += 1
            return super().get(**kwargs)

    source = VendorEvidence(VendorStore("v", Counting(lost="none"), None), lambda meta: True)
    assert [nb.chunk.id for nb in source.nearest(query([1.0, 0.0]), 10)] == ["a", "b", "c"]
    assert Counting.gets == 0
