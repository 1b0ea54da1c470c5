"""An embedder with no model: each text's words hashed into a fixed number of dimensions, so
texts sharing words are close. The scale benchmark writes and searches through it, so that
what it times is the store's work and none of a model's; the tests use it for exact values."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

from core.encoders.embedding import Embedder

_WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    "a an and are as at be by do does for from has have in is it of on or our the this to "
    "we with you your".split()
)


def words(text: str) -> list[str]:
    """The text's lower-cased words, stop words left out."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


class HashedWordsEmbedder(Embedder):
    """Bag of words hashed into `dimension` dimensions, normalised; never a zero vector."""

    runtime = None

    def __init__(self, dimension: int = 256) -> None:
        self.name = "fake-bag-of-words"
        self.dimension = dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row, 0] = 0.05
            for word in words(text):
                vectors[row, 1 + zlib.crc32(word.encode()) % (self.dimension - 1)] += 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
