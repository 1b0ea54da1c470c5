"""A question searched with words carried from the conversation is also searched as asked:
the two rankings fused by weighted reciprocal rank."""

from __future__ import annotations

import numpy as np
import pytest

from core.retrieval.source import Query
from core.review.conversation.anchoring import WithQuestionAsAsked
from core.store import Neighbour, StoredChunk


class Ranked:
    """A candidate source that answers each query text with a fixed ranking."""

    name = "ranked"

    def __init__(self, rankings: dict[str, list[tuple[str, bool]]]) -> None:
        self.rankings = rankings
        self.asked: list[tuple[str, int]] = []

    def nearest(self, query, n, *, where=None):
        self.asked.append((query.text, n))
        return [Neighbour(chunk=StoredChunk(id=i, text=i, metadata={"source": i[0]}),
                          score=1.0 - place / 100, committed=committed)
                for place, (i, committed) in enumerate(self.rankings[query.text][:n])]


def query(text: str) -> Query:
    return Query(text=text, criterion_hash="h", embedding=np.zeros(3, dtype=np.float32))


def test_the_two_rankings_are_fused_with_the_questions_weight():
    inner = Ranked({"expanded": [("a1", True), ("b1", True), ("c1", True)],
                    "asked": [("c1", True), ("d1", True), ("a1", True)]})
    found = WithQuestionAsAsked(inner, query("asked"), 0.25, 60).nearest(query("expanded"), 3)
    scores = {nb.chunk.id: nb.score for nb in found}
    assert scores["a1"] == pytest.approx(1 / 61 + 0.25 / 63)
    assert scores["c1"] == pytest.approx(1 / 63 + 0.25 / 61)
    assert scores["b1"] == pytest.approx(1 / 62)
    assert all(nb.fused_score == nb.score for nb in found)  # what the page shows as fused
    # c1, third for the carried words but first as asked, passes b1.
    assert [nb.chunk.id for nb in found] == ["a1", "c1", "b1"]
    assert inner.asked == [("expanded", 3), ("asked", 3)]


def test_a_record_only_the_question_finds_can_rise_above_the_carried_words_matches():
    inner = Ranked({"expanded": [("a1", True), ("a2", True), ("a3", True), ("d1", True)],
                    "asked": [("d1", True), ("e1", True)]})
    found = WithQuestionAsAsked(inner, query("asked"), 1.0, 60).nearest(query("expanded"), 4)
    assert [nb.chunk.id for nb in found][:2] == ["d1", "a1"]


def test_uncommitted_records_are_ranked_among_them_but_not_counted():
    inner = Ranked({"expanded": [("a1", False), ("b1", True), ("c1", True)],
                    "asked": [("a1", False), ("c1", True)]})
    found = WithQuestionAsAsked(inner, query("asked"), 0.25, 60).nearest(query("expanded"), 2)
    assert [nb.chunk.id for nb in found] == ["a1", "b1", "c1"]
    assert [nb.committed for nb in found] == [False, True, True]
