"""A query's best rows in a caller's committed state: ranked from the postings where they can
answer, else by FTS5 itself (a phrase with no token, a full-text table changed behind the
postings), and by FTS5 in one query when metadata filters narrow it. Only the best few rows
are read."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Collection
from typing import Any

import numpy as np

from core.retrieval.lexical.bm25 import bm25_scores
from core.retrieval.lexical.schema import snapshot
from core.retrieval.lexical.terms import phrases_of, shown_text
from core.retrieval.source import Where as WhereInput
from core.store import Where

# A metadata key a filter may name (it is written into the SQL).
_METADATA_KEY = re.compile(r"[A-Za-z0-9_]+")


def best_by_postings(db: sqlite3.Connection, path: str, expression: str, committed: Collection[str],
                     n: int, *, content: bool = True
                     ) -> list[tuple[str, str, str, float]] | list[tuple[str, float]] | None:
    """The n best rows as `best_by_fts5` finds them (the same rows, order and scores), with
    bm25() computed from the postings over the query's terms alone (`bm25_scores`), and only
    the best few read and checked against the caller's versions: the window of
    `best_by_fts5`, widened on the same terms. None when the postings cannot answer:
    `best_by_fts5` does. Without `content`: (id, rank) of each, nothing else read."""
    phrases = phrases_of(expression)
    if phrases is None:
        return None
    with snapshot(db):
        scored = bm25_scores(db, path, phrases)
        if scored is None:
            return None
        window = n + n // 4 + 1  # ties and rows of other versions widen it
        while True:
            matched, rank, whole = scored.best(window)
            exhausted = whole and len(matched) <= window
            chosen = (np.arange(len(matched)) if len(matched) <= window
                      else np.argpartition(rank, window - 1)[:window])
            if not len(chosen):
                return []
            rank_of = dict(zip(matched[chosen].tolist(), rank[chosen].tolist(),
                               strict=True))
            best = _committed_best(db, rank_of, committed, n)
            if exhausted or (len(best) == n and best[-1][0] < max(rank_of.values())):
                break
            window *= 2
        return _with_content(db, best) if content else [(i, rank) for rank, i, _ in best]


def best_by_fts5(db: sqlite3.Connection, expression: str, committed: Collection[str], n: int, *,
                 content: bool = True
                 ) -> list[tuple[str, str, str, float]] | list[tuple[str, float]]:
    """The n best rows in two steps: FTS5 ranks the matches alone (one bm25() per match,
    nothing joined), then only the best few are read and checked against the caller's
    versions. The window starts at twice n, as wide as FTS5 ranks at about the same cost:
    chunks written from common templates often tie, and ties go by id, which FTS5 does
    not order by. It widens while the n-th row ties with the last one read, or while rows
    it holds are not in the caller's state."""
    window = 2 * n + 1
    while True:
        ranked = db.execute(
            "SELECT rowid, bm25(chunk_text) AS score FROM chunk_text "
            "WHERE chunk_text MATCH ? ORDER BY score LIMIT ?", (expression, window)
        ).fetchall()
        rank_of = dict(ranked)
        best = _committed_best(db, rank_of, committed, n)
        exhausted = len(ranked) < window
        if exhausted or (len(best) == n and best[-1][0] < ranked[-1][1]):
            break
        window *= 2
    return _with_content(db, best) if content else [(i, rank) for rank, i, _ in best]


def best_filtered(db: sqlite3.Connection, expression: str, committed: Collection[str],
                  conditions: list[str], parameters: list[Any], n: int
                  ) -> list[tuple[str, str, str, float]]:
    """The n best rows that also meet metadata conditions, in one query."""
    sql = (
        "SELECT c.id, t.text, c.metadata, bm25(chunk_text) AS rank "
        "FROM chunk_text AS t JOIN chunks AS c ON c.rowid = t.rowid "
        "WHERE chunk_text MATCH ? "
        "AND (c.version_key IS NULL "
        "     OR c.version_key IN (SELECT value FROM json_each(?)))"
        + "".join(f" AND {condition}" for condition in conditions)
        + " ORDER BY rank, c.id LIMIT ?"
    )
    return [(record_id, shown_text(text), metadata, rank) for record_id, text, metadata, rank
            in db.execute(sql, (expression, json.dumps(sorted(committed)), *parameters, n))]


def of_state(version_key: str | None, committed: Collection[str]) -> bool:
    """Whether a row belongs to the state searched: a follow-up (it has no version key) or a
    chunk of one of the state's committed versions."""
    return version_key is None or version_key in committed


def _committed_best(db: sqlite3.Connection, rank_of: dict[int, float], committed: Collection[str],
                    n: int) -> list[tuple[float, str, int]]:
    """(rank, id, rowid) of the n best ranked rows that are follow-ups or of the caller's
    committed versions, in rank and id order."""
    found = db.execute(
        "SELECT rowid, id, version_key FROM chunks "
        "WHERE rowid IN (SELECT value FROM json_each(?))",
        (json.dumps(list(rank_of)),)).fetchall()
    return sorted(((rank_of[rowid], record_id, rowid)
                   for rowid, record_id, version_key in found
                   if of_state(version_key, committed)))[:n]


def _with_content(db: sqlite3.Connection, best: list[tuple[float, str, int]]
                  ) -> list[tuple[str, str, str, float]]:
    """(id, text, metadata, rank) of the chosen rows (rank, id, rowid), in their order."""
    content = {rowid: (text, metadata) for rowid, text, metadata in db.execute(
        "SELECT c.rowid, t.text, c.metadata "
        "FROM chunks AS c JOIN chunk_text AS t ON t.rowid = c.rowid "
        "WHERE c.rowid IN (SELECT value FROM json_each(?))",
        (json.dumps([rowid for _, _, rowid in best]),))}
    return [(record_id, shown_text(content[rowid][0]), content[rowid][1], rank)
            for rank, record_id, rowid in best if rowid in content]


def where_sql(where: WhereInput | None) -> tuple[list[str], list[Any]]:
    """SQL conditions for a metadata filter of equalities (the store's `Where`, or its
    mapping form)."""
    try:
        parsed = Where.of(where)
    except ValueError as exc:
        raise ValueError(f"where: the lexical index takes only equality filters on a metadata "
                         f"key, not {json.dumps(where, default=str)} ({exc})") from None
    conditions, parameters = [], []
    for condition in parsed.conditions if parsed else ():
        key, value = condition.key, condition.value
        if condition.op != "eq" or not _METADATA_KEY.fullmatch(key):
            shown = json.dumps(where, default=str) if not isinstance(where, Where) else (
                repr(condition))
            raise ValueError(f"where: the lexical index takes only equality filters on a "
                             f"metadata key, not {shown}")
        conditions.append(f"json_extract(c.metadata, '$.\"{key}\"') = ?")
        parameters.append(value)
    return conditions, parameters
