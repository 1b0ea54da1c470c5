"""Which controls answer a criterion: the catalog's controls ranked for the criterion's words
by the project's embedding model and by BM25 over the catalog's own text, the two fused into
one score, and the confident few told apart from the rest.

The two rankings catch different things. The embedding meets "lock an account after a run of
wrong passwords" with AC-7's "consecutive invalid logon attempts ... lock the account"; BM25
over the title, statement and discussion holds the exact words a reviewer borrows from the
standard ("least privilege", "separation of duties"), stemmed with the Snowball English
stemmer so "passwords" meets "password". Each score is scaled to the best of its ranking for
the criterion, and the fused score weighs the embedding more: it rarely ranks an unrelated
control first, where BM25 follows a single shared rare word.

The catalog's vectors are computed once per model and catalog version and kept on disk, so
only the first use on a machine pays for them."""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import snowballstemmer

from core.controls.catalog import Catalog, Control, nist_catalog
from core.encoders.embedding import Embedder

# BM25's constants (Robertson and Zaragoza's usual values).
_K1 = 1.2
_B = 0.75
# The fused score: the embedding's share; BM25 has the rest.
EMBEDDING_WEIGHT = 0.7
# An enhancement's score is weighed down by this: a reviewer's criterion in plain words asks
# what a base control asks far more often than an enhancement's refinement of it, and an
# enhancement's narrower text matches a short criterion's words closely by chance.
ENHANCEMENT_WEIGHT = 0.9
# A proposal is confident when its fused score is at least this, and within this margin of
# the criterion's best proposal (a criterion answered by two controls keeps both).
CONFIDENT_SCORE = 0.20
CONFIDENT_MARGIN = 0.10
# Pseudo-relevance feedback: the query vector moved this far towards the mean of the
# controls it ranks first, this many of them.
FEEDBACK_WEIGHT = 0.3
FEEDBACK_CONTROLS = 10
# Confident proposals linked per criterion at most.
MAX_CONFIDENT = 3
_WORD = re.compile(r"[a-z0-9]+")
_ASSIGNMENT = re.compile(r"\[(?:Assignment|Selection)[^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*\]")
_STOP = frozenset(
    "a an and are as at be been but by can do does for from has have how i if in into is it "
    "its of on or our so than that the their them then there these they this those to was "
    "we were what when where which who will with would you your all any each other such "
    "must shall should may organization organizational defined".split())


@dataclass(frozen=True)
class Proposal:
    """One control proposed for a criterion: its fused score (0 to 1; a base control's
    raised to its best enhancement's), the two it is fused from, and whether it is confident
    enough to link until a reviewer decides."""

    control: Control
    score: float
    embedding_score: float
    lexical_score: float
    confident: bool
    # The enhancement whose match raised the base control's score (multi-factor
    # authentication for IA-2): its answers are the criterion's too.
    through: Control | None = None


def ranking_text(control: Control, catalog: Catalog) -> str:
    """What the embedding reads of a control: its title (an enhancement's after its base
    control's) and its statement without the bracketed assignments, which are the same
    boilerplate in every control."""
    title = control.title
    if control.parent:
        parent = catalog.get(control.parent)
        if parent is not None:
            title = f"{parent.title}: {control.title}"
    statement = re.sub(r"\s+", " ", _ASSIGNMENT.sub("", control.statement)).strip()
    return f"{title}. {statement}"


def _stemmer() -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer("english")


_STEMMERS = threading.local()


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    stemmer = getattr(_STEMMERS, "stemmer", None)
    if stemmer is None:
        stemmer = _STEMMERS.stemmer = _stemmer()
    return stemmer.stemWord(word)


def terms(text: str) -> list[str]:
    """A text's stemmed words, without the words that carry nothing."""
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1]


class _Bm25:
    """BM25 over the catalog's controls (title twice, statement, discussion)."""

    def __init__(self, documents: Sequence[str]) -> None:
        self.counts = [Counter(terms(d)) for d in documents]
        self.lengths = np.asarray([sum(c.values()) for c in self.counts], dtype=np.float64)
        self.average = float(self.lengths.mean()) if len(documents) else 0.0
        frequency: Counter[str] = Counter()
        for counted in self.counts:
            frequency.update(counted.keys())
        total = len(documents)
        self.idf = {term: math.log(1 + (total - n + 0.5) / (n + 0.5))
                    for term, n in frequency.items()}
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for row, counted in enumerate(self.counts):
            for term, count in counted.items():
                self.postings.setdefault(term, []).append((row, count))

    def scores(self, text: str) -> np.ndarray:
        found = np.zeros(len(self.counts), dtype=np.float64)
        norm = _K1 * (1 - _B + _B * self.lengths / max(self.average, 1e-9))
        for term in set(terms(text)):
            for row, count in self.postings.get(term, ()):
                found[row] += self.idf[term] * count * (_K1 + 1) / (count + norm[row])
        return found


class ControlProposer:
    """Ranks the catalog's current controls for criteria; safe to share between threads.
    The embedder is given as a call, so it loads only when a proposal is first asked."""

    def __init__(self, embedder: Callable[[], Embedder], cache_dir: Path | None,
                 catalog: Catalog | None = None) -> None:
        self._embedder = embedder
        self.cache_dir = cache_dir
        self.catalog = catalog or nist_catalog()
        self.controls = self.catalog.current()
        self._enhancements = np.asarray([c.parent is not None for c in self.controls])
        rows = {c.key: row for row, c in enumerate(self.controls)}
        # An enhancement's base control's row (-1 where it has none in the current catalog).
        self._parents = np.asarray([rows.get(c.parent, -1) if c.parent else -1
                                    for c in self.controls])
        self._has_parent = self._parents >= 0
        self._lock = threading.Lock()
        self._vectors: np.ndarray | None = None
        self._bm25: _Bm25 | None = None

    def _texts(self) -> list[str]:
        return [ranking_text(c, self.catalog) for c in self.controls]

    def vectors(self) -> np.ndarray:
        """The controls' vectors, read from the cache or computed (and kept) once."""
        with self._lock:
            if self._vectors is None:
                self._vectors = self._load_vectors()
            return self._vectors

    def _load_vectors(self) -> np.ndarray:
        embedder = self._embedder()
        texts = self._texts()
        digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", embedder.name)
        path = (self.cache_dir / f"{slug}-{self.catalog.version}-{digest}.npy"
                if self.cache_dir is not None else None)
        if path is not None and path.is_file():
            try:
                kept = np.load(path)
                # An embedder of another size or model under the same name (a test's) is
                # told apart by the first control's vector, embedded again.
                probe = np.asarray(embedder.embed(texts[:1]), dtype=np.float32)
                if (kept.ndim == 2 and kept.shape == (len(texts), probe.shape[1])
                        and float(kept[0] @ probe[0]) > 0.999):
                    return kept.astype(np.float32)
            except (OSError, ValueError):
                pass  # a damaged cache is computed again
        vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                partial = path.with_suffix(".partial.npy")
                np.save(partial, vectors)
                partial.replace(path)
            except OSError:
                pass  # an unwritable cache costs the next process the same computation
        return vectors

    def bm25(self) -> _Bm25:
        with self._lock:
            if self._bm25 is None:
                self._bm25 = _Bm25([
                    f"{c.title} {c.title} {c.statement} {c.discussion}" for c in self.controls])
            return self._bm25

    def _fused(self, cosine: np.ndarray, scaled_lexical: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """(the fused score of every control, the cosine it is fused from). The embedding's
        share is its cosine as it is (comparable across criteria); BM25's is relative to the
        criterion's best, in the units of its best cosine, so a criterion of rare words is
        not favoured. An enhancement's score is weighed down (ENHANCEMENT_WEIGHT)."""
        best_cosine = float(cosine.max()) if len(cosine) else 0.0
        fused = (EMBEDDING_WEIGHT * np.clip(cosine, 0.0, None)
                 + (1 - EMBEDDING_WEIGHT) * scaled_lexical * max(best_cosine, 0.0))
        return np.where(self._enhancements, fused * ENHANCEMENT_WEIGHT, fused), cosine

    def _rolled(self, fused: np.ndarray) -> np.ndarray:
        """Each base control's score raised to its best enhancement's: an enhancement that
        matches a criterion is evidence that its base control answers it."""
        rolled = fused.copy()
        np.maximum.at(rolled, self._parents[self._has_parent], fused[self._has_parent])
        return rolled

    def _listing(self, fused: np.ndarray, top: int) -> list[int]:
        """The base controls proposed, best first by their rolled score: a criterion in a
        reviewer's words asks what a base control asks, and listing one family's enhancements
        beside it would crowd the other families out."""
        rolled = self._rolled(fused)
        order = np.argsort(-np.where(self._has_parent, -np.inf, rolled), kind="stable")
        return [int(row) for row in order[:top] if np.isfinite(rolled[row])
                and not self._has_parent[row]]

    def _driver(self, fused: np.ndarray, row: int) -> Control | None:
        """The enhancement that raised a base control's score, where one did."""
        children = np.flatnonzero(self._parents == row)
        if not len(children):
            return None
        best = int(children[np.argmax(fused[children])])
        return self.controls[best] if fused[best] > fused[row] else None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The criteria's vectors, as the proposals compare them."""
        return np.asarray(self._embedder().embed(list(texts)), dtype=np.float32)

    def propose(self, text: str, embedding: np.ndarray | None = None, *, top: int = 5
                ) -> list[Proposal]:
        """The `top` controls for a criterion, best first (`embedding`: the criterion's
        vector, when the caller has it)."""
        if embedding is None:
            embedding = self._embedder().embed([text])[0]
        vectors = self.vectors()
        lexical = self.bm25().scores(text)
        best_lexical = float(lexical.max()) if len(lexical) else 0.0
        scaled_lexical = (lexical / best_lexical if best_lexical > 0
                          else np.zeros_like(lexical))
        query = np.asarray(embedding, dtype=np.float32)
        fused, cosine = self._fused(vectors @ query, scaled_lexical)
        # Feedback (Rocchio): the query moved towards the controls it ranks first, so a
        # criterion's plain words reach the standard's words those controls share.
        first = np.argsort(-fused, kind="stable")[:FEEDBACK_CONTROLS]
        moved = (1 - FEEDBACK_WEIGHT) * query + FEEDBACK_WEIGHT * vectors[first].mean(axis=0)
        norm = float(np.linalg.norm(moved))
        if norm > 0:
            fused, cosine = self._fused(vectors @ (moved / norm), scaled_lexical)
        order = self._listing(fused, top)
        rolled = self._rolled(fused)
        best = float(rolled[order[0]]) if order else 0.0
        proposals = []
        for rank, row in enumerate(order):
            score = float(rolled[row])
            confident = (rank < MAX_CONFIDENT and score >= CONFIDENT_SCORE
                         and best - score <= CONFIDENT_MARGIN)
            proposals.append(Proposal(self.controls[int(row)], round(score, 4),
                                      round(float(cosine[row]), 4),
                                      round(float(scaled_lexical[row]), 4), confident,
                                      self._driver(fused, row)))
        return proposals
