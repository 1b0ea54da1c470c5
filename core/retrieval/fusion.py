"""Reciprocal rank fusion (Cormack et al. 2009), written once, and the hybrid first stage.

RRF adds 1 / (k + rank) over the lists that hold an item; it reads ranks only, so cosine
similarities and BM25 scores, which live on unrelated scales, need no normalising. With two
lists and k=60 the largest fused score is 2/61 (about 0.033)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from core.retrieval.source import CandidateSource, Neighbour, Query, Where

# Beside a ChromaDB server, the lexical search runs here while the calling thread waits for
# the server's answer. Beside an embedded store the two run in turn on the calling thread:
# the embedded search of ids and distances takes 1.7 ms at 100,000 chunks alone, and 5.0 ms
# with the lexical search holding the GIL on a thread beside it (the fused first stage, 6.6
# ms in turn against 7.6 at once).
_LEXICAL_SEARCHES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="lexical-search")


def ranks_of(ranking: Sequence[str]) -> dict[str, int]:
    """id -> its rank in one list (1 = first); an id listed twice keeps its better rank."""
    ranks: dict[str, int] = {}
    for rank, item in enumerate(ranking, start=1):
        ranks.setdefault(item, rank)
    return ranks


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int) -> dict[str, float]:
    """Fuse rankings of ids (each best first): id -> the sum, over the lists holding it, of
    1 / (k + rank), ordered best first. Ties go to the better single rank, then to the id
    met first (the first list read first). An id repeated in one list counts at its best
    rank only."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be an integer >= 0, got {k!r}")
    per_list = [ranks_of(ranking) for ranking in rankings]
    scores: dict[str, float] = {}
    best: dict[str, int] = {}
    for ranks in per_list:
        for item, rank in ranks.items():
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
            best[item] = min(rank, best.get(item, rank))
    met = {item: i for i, item in enumerate(scores)}
    order = sorted(scores, key=lambda item: (-scores[item], best[item], met[item]))
    return {item: scores[item] for item in order}


class HybridSearch:
    """The vector search and the lexical index fused by RRF, as one candidate source.

    Each neighbour keeps every part: its rank and cosine in the vector list, its rank and
    BM25 score in the lexical list (None where that list did not hold it), and the fused
    score, which is also its `score`. Ranks count committed records only; records of an
    unfinished ingest the vector search met are passed on after the fused list, so the first
    stage can report them."""

    name = "hybrid"

    def __init__(self, vector: CandidateSource, lexical: CandidateSource, *,
                 lexical_n: int, k: int, beside: bool = True) -> None:
        """`beside`: the lexical search runs on a thread of its own while the vector search
        waits (for a ChromaDB server); otherwise the two run in turn."""
        if lexical_n < 1:
            raise ValueError(f"lexical_n must be >= 1, got {lexical_n!r}")
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k!r}")
        self.vector = vector
        self.lexical = lexical
        self.lexical_n = lexical_n
        self.k = k
        self.beside = beside

    def nearest(self, query: Query, n: int, *, where: Where | None = None) -> list[Neighbour]:
        """The `n` best by fused score of the vector search's `n` and the lexical index's
        `lexical_n`, both under the same `where`."""
        if n <= 0:
            return []
        if where is None and hasattr(self.vector, "nearest_ids") and hasattr(
                self.lexical, "ranked_ids"):
            fused = self._by_ids(query, n)
            if fused is not None:
                return fused
        # Filtered, or a vector hit the lexical index does not hold as committed: both
        # searches with their records read.
        vector_hits, lexical_found = self._beside(
            lambda: self.lexical.nearest(query, self.lexical_n, where=where),
            lambda: self.vector.nearest(query, n, where=where))
        lexical_hits = [h for h in lexical_found if h.committed]
        vector_committed = [h for h in vector_hits if h.committed]
        unfinished = [h for h in vector_hits if not h.committed]
        by_id = {h.chunk.id: h for h in lexical_hits}
        by_id.update({h.chunk.id: h for h in vector_committed})  # the store's own copy wins
        vector_scores = {h.chunk.id: h.score for h in vector_committed}
        lexical_scores = {h.chunk.id: h.score for h in lexical_hits}
        vector_ids = [h.chunk.id for h in vector_committed]
        lexical_ids = [h.chunk.id for h in lexical_hits]
        vector_ranks, lexical_ranks = ranks_of(vector_ids), ranks_of(lexical_ids)
        fused = reciprocal_rank_fusion([vector_ids, lexical_ids], self.k)
        neighbours = [
            Neighbour(by_id[i].chunk, score, True,
                      vector_rank=vector_ranks.get(i), vector_score=vector_scores.get(i),
                      lexical_rank=lexical_ranks.get(i), lexical_score=lexical_scores.get(i),
                      fused_score=score)
            for i, score in list(fused.items())[:n]
        ]
        return neighbours + unfinished

    def close(self) -> None:
        """Close what the lexical index holds open (a later search opens it again)."""
        close = getattr(self.lexical, "close", None)
        if close is not None:
            close()

    def _by_ids(self, query: Query, n: int) -> list[Neighbour] | None:
        """The fused `n` from both lists found as ids and scores alone (the vector search
        without the GIL, the lexical one beside it), and the records of those `n` only, read
        from the lexical index of the same committed state: the two lists' other hits are
        never read. None when a vector hit is not in that state as committed (an unfinished
        ingest, a withdrawn answer, a round written since the index synced): the search runs
        with its records read."""
        scored, lexical_scored = self._beside(
            lambda: self.lexical.ranked_ids(query, self.lexical_n),
            lambda: self.vector.nearest_ids(query, n))
        if scored is None:
            return None
        vector_ids = [i for i, _ in scored]
        if len(self.lexical.committed_ids(vector_ids)) < len(set(vector_ids)):
            return None
        lexical_ids = [i for i, _ in lexical_scored]
        vector_scores, lexical_scores = dict(scored), dict(lexical_scored)
        vector_ranks, lexical_ranks = ranks_of(vector_ids), ranks_of(lexical_ids)
        chosen = list(reciprocal_rank_fusion([vector_ids, lexical_ids], self.k).items())[:n]
        records = self.lexical.committed_records([i for i, _ in chosen])
        if any(i not in records for i, _ in chosen):
            return None
        return [Neighbour(records[i], score, True,
                          vector_rank=vector_ranks.get(i), vector_score=vector_scores.get(i),
                          lexical_rank=lexical_ranks.get(i), lexical_score=lexical_scores.get(i),
                          fused_score=score)
                for i, score in chosen]

    def _beside(self, lexical: Callable[[], Any], vector: Callable[[], Any]
                ) -> tuple[Any, Any]:
        """(the vector search's result, the lexical search's): with `beside`, the lexical
        search runs on a thread of its own while the vector search runs on the caller's,
        otherwise the lexical search and then the vector search on the caller's; an error of
        either is raised here, and no lexical search outlives the call."""
        if not self.beside:
            found_by_words = lexical()
            return vector(), found_by_words
        lexical_search = _LEXICAL_SEARCHES.submit(lexical)
        try:
            found = vector()
        except BaseException:
            lexical_search.cancel()
            wait([lexical_search])
            raise
        return found, lexical_search.result()


def held_by_the_index(vector: CandidateSource, lexical: CandidateSource, query: Query, n: int,
                      scored: list[tuple[str, float]]) -> list[Neighbour]:
    """The vector search's `n` hits, found as ids and scores, with the text and metadata the
    lexical index holds for them at the same committed state; when the index does not hold
    every hit as committed, the vector search runs whole."""
    found = lexical.committed_records([i for i, _ in scored])
    if any(record_id not in found for record_id, _ in scored):
        return vector.nearest(query, n)
    return [Neighbour(found[record_id], score, True) for record_id, score in scored]


class IndexedVectorSearch:
    """The vector search, its hits' records read from the lexical index.

    Unfiltered, ChromaDB is asked for ids and distances alone (its search, without reading or
    converting a record), and the hits' text and metadata come from the vendor's lexical
    index synced to the same committed state: at 100,000 chunks reading and converting 100
    records in ChromaDB cost three times its search. The neighbours, their order and scores
    are the vector search's own; a filtered search, or a hit the index does not hold as
    committed, runs the vector search whole."""

    name = "vector"

    def __init__(self, vector: CandidateSource, lexical: CandidateSource) -> None:
        self.vector = vector
        self.lexical = lexical

    def nearest(self, query: Query, n: int, *, where: Where | None = None) -> list[Neighbour]:
        if n <= 0:
            return []
        scored = self.vector.nearest_ids(query, n) if where is None else None
        if scored is None:
            return self.vector.nearest(query, n, where=where)
        return held_by_the_index(self.vector, self.lexical, query, n, scored)

    def close(self) -> None:
        """Close what the lexical index holds open (a later search opens it again)."""
        close = getattr(self.lexical, "close", None)
        if close is not None:
            close()
