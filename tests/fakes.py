"""Deterministic stand-ins for the models, so unit tests are fast and assert exact values."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.bench.words import STOPWORDS, HashedWordsEmbedder, words
from core.encoders.rerank import Reranker

__all__ = ["STOPWORDS", "FakeEmbedder", "FakeReranker", "words"]


class FakeEmbedder(HashedWordsEmbedder):
    """Bag of words hashed into 256 dimensions: texts sharing words are close; counts its
    calls, and fails after `fail_after_calls` of them when given."""

    def __init__(self, dimension: int = 256, *, fail_after_calls: int | None = None) -> None:
        super().__init__(dimension)
        self.calls = 0
        self.fail_after_calls = fail_after_calls

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.fail_after_calls is not None and self.calls > self.fail_after_calls:
            raise RuntimeError("fake embedder failure")
        return super().embed(texts)


class FakeReranker(Reranker):
    """Relevance = share of the query's words that the passage contains, in 0..1."""

    name = "fake-overlap"

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        query_words = set(words(query))
        return [
            len(query_words & set(words(p))) / len(query_words) if query_words else 0.0
            for p in passages
        ]


def point_the_command_at(workbench, monkeypatch) -> None:
    """Make `evidence` commands run in process open the workbench's store, with the fake
    embedder in place of the real model."""
    monkeypatch.setattr("core.workbench.SentenceTransformerEmbedder",
                        lambda *args, **kwargs: FakeEmbedder())
    monkeypatch.setenv("EVIDENCE_STORE", str(workbench.settings.store))
    monkeypatch.setenv("EVIDENCE_LEXICAL_DIR", str(workbench.settings.store / "lexical"))
