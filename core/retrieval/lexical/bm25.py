"""BM25 from the postings, FTS5's bm25() to the bit: a query reads the blocks of its terms only
and scores the rows holding them with numpy, in fts5Bm25Function's order of operations and in
doubles, so the rows, their order and their ties are FTS5's. A process keeps, per index state,
each row's part of the denominator and the phrases' parts of the score; every transaction that
changes the postings draws a new token for the state, so nothing kept is taken for another."""

from __future__ import annotations

import math
import sqlite3
import threading
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from core.retrieval.lexical.postings import (
    NO_ROWS,
    Postings,
    read_blocks,
    read_postings,
    runs,
)
from core.retrieval.lexical.schema import meta
from core.retrieval.lexical.terms import query_tokens

# The constants of FTS5's bm25() (SQLite's fts5_aux.c), and its least IDF.
_K1 = 1.2
_B = 0.75
_LEAST_IDF = 1e-6
# A phrase's part of the score: (its rows, their values), or (None, a value for every row).
Part = tuple[np.ndarray | None, np.ndarray]
# A phrase in at least one row of this many keeps its part as one value per row: adding a
# whole array is cheaper than gathering and scattering that many rows of it.
_DENSE_SHARE = 8
# The bound of a query's best rows is read off every this many rows (`_at_least`).
_SAMPLE_STRIDE = 16
# Bytes of phrases' parts of the score kept per process (`_Parts`).
_PARTS_BYTES = 64 << 20


def bm25_scores(db: sqlite3.Connection, path: str, phrases: list[str]) -> Scores | None:
    """bm25() of every row for the OR of the phrases, as FTS5's bm25() gives it: per phrase,
    idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * D / avgdl)) with tf its instances in the
    row, D the row's tokens, avgdl the table's tokens over its rows and idf log((N - hits +
    0.5) / (hits + 0.5)) (1e-6 where not above 0), summed in the query's order from 0.0 and
    negated, each operation in FTS5's order and in doubles, so that the values are FTS5's to
    the bit. None when the postings cannot answer (a phrase with no token, postings or
    lengths missing rows)."""
    tokens = [query_tokens(phrase) for phrase in phrases]
    if not all(tokens):
        return None
    state = _row_state(db, path)
    if state is None:  # no lengths: an empty table matches nothing, any other is FTS5's
        if db.execute("SELECT 1 FROM chunk_text LIMIT 1").fetchone() is None:
            return Scores(np.zeros(0))
        return None
    if _fts5_totals(db) != (state.rows, state.tokens):  # changed behind the postings' back
        return None
    parts = {t: _PARTS.get((path, state.token, t)) for t in tokens} if state.token else {}
    missing = [t for t in dict.fromkeys(tokens) if parts.get(t) is None]
    singles = read_postings(db, sorted({t[0] for t in missing if len(t) == 1}),
                            positions=False)
    within = read_postings(db, sorted({t for ts in missing if len(ts) > 1 for t in ts}),
                           positions=True)
    for phrase_tokens in missing:
        if len(phrase_tokens) == 1:
            found = singles.get(phrase_tokens[0])
        elif all(t in within for t in phrase_tokens):
            found = _phrase_postings([within[t] for t in phrase_tokens])
        else:
            found = None
        if found is not None and len(found.rowids) and int(found.rowids[-1]) >= len(state.norm):
            return None  # postings of a row the lengths do not hold
        parts[phrase_tokens] = part = _part(found, state)
        if state.token:
            _PARTS.put((path, state.token, phrase_tokens), part)

    # Every part is above 0 (idf >= 1e-6, tf >= 1): a row is matched where its sum is not 0.
    score, summed = _workspace(len(state.norm))
    for phrase_tokens in tokens:
        rowids, part = parts[phrase_tokens]
        if rowids is None:  # a dense part: one value per row, 0.0 where the phrase is not
            np.add(score, part, out=score)  # x + 0.0 is x: the other rows keep their sums
            continue
        total = summed[:len(rowids)]  # score += part, in a buffer the thread keeps
        np.take(score, rowids, out=total)
        np.add(total, part, out=total)
        score[rowids] = total
    return Scores(score)


class Scores(NamedTuple):
    """A query's score of every row, 0.0 where no phrase matches it. It is the scoring
    thread's own array (`_workspace`): read it before that thread scores again."""

    score: np.ndarray

    def best(self, at_least: int | None = None) -> tuple[np.ndarray, np.ndarray, bool]:
        """(rowids, bm25(), whether every match is there) of the matching rows; with
        `at_least`, they may be fewer: at least that many, and every row scoring as well as
        the `at_least`-th (ties too)."""
        rows, whole = _at_least(self.score, at_least)
        return rows, -self.score[rows], whole


def _at_least(score: np.ndarray, best: int | None) -> tuple[np.ndarray, bool]:
    """(rows, whether they are every matched row): the rows whose score is not 0 or, given
    `best`, those at or above a bound when at least `best` are (then every row scoring as
    well as the `best`-th is among them). The bound is a score a sample of every
    `_SAMPLE_STRIDE`-th row puts about four times `best` rows above: listing every matched
    row of a large table costs more than the arithmetic that scored it."""
    if best is not None and best * _SAMPLE_STRIDE * 4 < len(score):
        sample = score[::_SAMPLE_STRIDE]
        above = len(sample) - max(1, 4 * best // _SAMPLE_STRIDE)
        bound = np.partition(sample, above)[above]
        if bound > 0.0:
            rows = np.flatnonzero(score >= bound)
            if len(rows) >= best:
                return rows, False
    return np.flatnonzero(score), True


def _part(found: Postings | None, state: _RowState) -> Part:
    """(rowids, idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * D / avgdl))) of a phrase's
    rows, in fts5Bm25Function's order of operations; for a phrase in one row of
    `_DENSE_SHARE` or more, (None, that value of every row, 0.0 where it is not)."""
    if found is None or not len(found.rowids):
        return NO_ROWS, np.zeros(0)
    hits = len(found.rowids)
    idf = math.log((state.rows - hits + 0.5) / (hits + 0.5))
    if idf <= 0.0:
        idf = _LEAST_IDF
    denominator = np.take(state.norm, found.rowids)
    tf = found.tfs.astype(np.float64)
    np.add(tf, denominator, out=denominator)
    np.multiply(tf, _K1 + 1.0, out=tf)
    np.divide(tf, denominator, out=tf)
    np.multiply(tf, idf, out=tf)
    if len(found.rowids) * _DENSE_SHARE >= len(state.norm):
        dense = np.zeros(len(state.norm))
        dense[found.rowids] = tf
        return None, dense
    return found.rowids, tf


class _Parts:
    """Phrases' parts of the score (`_part`) by (file, state token, phrase tokens), kept up to
    a number of bytes in all, the least recently used dropped first. A token names one
    content of the postings and lengths (every transaction that changes them draws a new
    one), and a part depends on nothing else."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._held: OrderedDict[tuple[str, str, tuple[str, ...]],
                                Part] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, tuple[str, ...]]
            ) -> Part | None:
        with self._lock:
            held = self._held.get(key)
            if held is not None:
                self._held.move_to_end(key)
            return held

    def put(self, key: tuple[str, str, tuple[str, ...]],
            part: Part) -> None:
        size = _nbytes(part)
        if size > self._limit:
            return
        with self._lock:
            if key in self._held:
                return
            self._held[key] = part
            self._bytes += size
            while self._bytes > self._limit:
                _, dropped = self._held.popitem(last=False)
                self._bytes -= _nbytes(dropped)


def _nbytes(part: Part) -> int:
    rowids, values = part
    return values.nbytes + (rowids.nbytes if rowids is not None else 0)


_PARTS = _Parts(_PARTS_BYTES)


_WORK = threading.local()


def _workspace(size: int) -> tuple[np.ndarray, np.ndarray]:
    """This thread's score array (zeroed) and a work array, each of `size` doubles: fresh
    arrays of this size cost more than the arithmetic on them."""
    held = getattr(_WORK, "arrays", None)
    if held is None or len(held[0]) < size:
        held = _WORK.arrays = (np.empty(size + size // 4), np.empty(size + size // 4))
    score = held[0][:size]
    score.fill(0.0)
    return score, held[1]


def _phrase_postings(parts: list[Postings]) -> Postings:
    """The postings of a phrase from its tokens' (with offsets): its instances in a row are
    the offsets at which its first token stands and each next token one further on."""
    def keys(postings: Postings) -> np.ndarray:
        return ((np.repeat(postings.rowids, postings.tfs) << 32)
                | postings.positions.astype(np.int64))

    starts = keys(parts[0])
    for step, part in enumerate(parts[1:], start=1):
        if not len(starts):
            break
        following = keys(part)
        wanted = starts + step
        at = np.minimum(np.searchsorted(following, wanted), max(len(following) - 1, 0))
        starts = starts[following[at] == wanted] if len(following) else starts[:0]
    if not len(starts):
        return Postings(NO_ROWS, NO_ROWS)
    phrase = runs(starts)
    return Postings(phrase.rowids, phrase.tfs)


class _RowState(NamedTuple):
    """What bm25() needs of every row, worked out once per state of the lengths: k1 * (1 - b +
    b * D / avgdl) indexed by rowid (as fts5Bm25Function computes it for a row of D tokens),
    the number of rows and their tokens in all, and the state's token (None: not kept)."""

    norm: np.ndarray
    rows: int
    tokens: int
    token: str | None


# Row states of the last few index states read in this process, by (file, state token): a
# token is drawn afresh by every transaction that changes the lengths, so one names one
# content of the lengths table.
_ROW_STATES: dict[tuple[str, str], _RowState] = {}
_ROW_STATES_KEPT = 8
_ROW_STATES_LOCK = threading.Lock()


def _row_state(db: sqlite3.Connection, path: str) -> _RowState | None:
    """The row state of the lengths the snapshot holds; None when they hold no row."""
    token = meta(db, "postings_state")
    key = (path, token) if token is not None else None
    if key is not None:
        with _ROW_STATES_LOCK:
            known = _ROW_STATES.get(key)
        if known is not None:
            return known
    lengths = read_blocks(db.execute(
        "SELECT 'lengths', block, rowids, lengths FROM lengths ORDER BY block"),
        positions=False).get("lengths")
    if lengths is None:
        return None
    total = int(lengths.tfs.sum(dtype=np.int64))
    dense = np.zeros(int(lengths.rowids[-1]) + 1)
    dense[lengths.rowids] = lengths.tfs
    avgdl = float(total) / float(len(lengths.rowids))
    with np.errstate(divide="ignore", invalid="ignore"):  # no token at all: nothing matches
        state = _RowState(_K1 * ((1 - _B) + _B * dense / avgdl), len(lengths.rowids), total,
                          token)
    if key is not None:
        with _ROW_STATES_LOCK:
            if len(_ROW_STATES) >= _ROW_STATES_KEPT:
                del _ROW_STATES[next(iter(_ROW_STATES))]
            _ROW_STATES[key] = state
    return state


def _fts5_totals(db: sqlite3.Connection) -> tuple[int, int]:
    """(rows, tokens) of the full-text table as FTS5 keeps them for bm25(): its averages
    record (rowid 1 of chunk_text_data: the number of rows, then each column's tokens, as
    SQLite varints)."""
    row = db.execute("SELECT block FROM chunk_text_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return 0, 0
    values, at = [], 0
    while len(values) < 2 and at < len(row[0]):
        value, at = _varint(row[0], at)
        values.append(value)
    return (values[0], values[1]) if len(values) == 2 else (values[0], 0)


def _varint(blob: bytes, at: int) -> tuple[int, int]:
    """The SQLite varint at `at` (7 bits a byte, high bit set on all but the last; a ninth
    byte gives 8), and where the next one starts."""
    value = 0
    for i in range(9):
        byte = blob[at + i]
        if i == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    raise AssertionError("unreachable")
