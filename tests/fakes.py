"""Deterministic stand-ins for the models, so unit tests are fast and assert exact values."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

from core.encoders.embedding import Embedder
from core.encoders.rerank import Reranker

_WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    "a an and are as at be by do does for from has have in is it of on or our the this to "
    "we with you your".split()
)


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


class FakeEmbedder(Embedder):
    """Bag of words hashed into 256 dimensions: texts sharing words are close."""

    def __init__(self, dimension: int = 256, *, fail_after_calls: int | None = None) -> None:
        self.name = "fake-bag-of-words"
        self.dimension = dimension
        self.calls = 0
        self.fail_after_calls = fail_after_calls

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.fail_after_calls is not None and self.calls > self.fail_after_calls:
            raise RuntimeError("fake embedder failure")
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row, 0] = 0.05  # never a zero vector
            for word in words(text):
                vectors[row, 1 + zlib.crc32(word.encode()) % (self.dimension - 1)] += 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


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
