"""A query's terms: the FTS5 expression for the text a person typed, its phrases, and each
phrase's tokens as the full-text table's tokenizer makes them."""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Mapping
from typing import Any

from core.controls.answers import catalog_words
from core.retrieval.lexical.schema import TOKENIZE

# Words that carry no evidence; kept only when a query has nothing else. FTS5 scores every
# row that holds any query term, so one "the" makes a query several times slower.
STOP_WORDS = frozenset(
    "a an and are as at be been but by can do does did for from had has have how i if in "
    "into is it its of on or our so than that the their them then there these they this "
    "those to was we were what when where which who why will with would you your".split()
)
# unicode61's word characters: letters and digits ("_" separates, as do "-", "'" and ".").
_WORD = re.compile(r"[^\W_]+")
# One quoted phrase of the expression `match_expression` builds (its words hold no quote).
_PHRASE = re.compile(r'"([^"]*)"')
# Phrases whose tokens are kept per process (the tokens of a phrase never change).
_TOKENS_KEPT = 20_000


# Between a record's own text and the words it is searched by besides (an answer keyed by a
# control: the catalog's words on it); the index returns the text before it.
SEARCH_ONLY = "\n\u2063"


def indexed_text(text: str, metadata: Mapping[str, Any]) -> str:
    """What the full-text index holds of a record: its text, then the catalog's words on the
    control an answer is keyed by, which the text shown never includes."""
    words = catalog_words(metadata)
    return f"{text}{SEARCH_ONLY}{words}" if words else text


def shown_text(indexed: str) -> str:
    """A record's own text, from what the index holds of it."""
    return indexed.split(SEARCH_ONLY, 1)[0]


def match_expression(text: str) -> str | None:
    """The FTS5 query for user text: every word quoted (so `AES-256`, `what's`, `NEAR`, `*` or
    a stray quote are plain words), a word joined by punctuation also as a phrase (so
    `CVE-2024-3094` counts most where it is written whole), all OR-ed; None when no word."""
    terms: dict[str, str] = {}
    fallback: dict[str, str] = {}
    for token in text.split():
        parts = _WORD.findall(token)
        if len(parts) > 1:
            phrase = " ".join(parts)
            terms.setdefault(phrase.casefold(), f'"{phrase}"')
        for part in parts:
            quoted = f'"{part}"'
            fallback.setdefault(part.casefold(), quoted)
            if len(part) > 1 and part.casefold() not in STOP_WORDS:
                terms.setdefault(part.casefold(), quoted)
    chosen = terms or fallback
    return " OR ".join(chosen.values()) if chosen else None


def phrases_of(expression: str) -> list[str] | None:
    """The quoted phrases of an expression `match_expression` built, in order; None for any
    other expression."""
    phrases = _PHRASE.findall(expression)
    return phrases if " OR ".join(f'"{p}"' for p in phrases) == expression else None


class _QueryTokens:
    """A phrase of a query as FTS5 tokenises it, from a scratch FTS5 table with the full-text
    table's tokenizer (one per process), remembered per phrase."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._pid = 0
        self._known: dict[str, tuple[str, ...]] = {}

    def __call__(self, phrase: str) -> tuple[str, ...]:
        known = self._known.get(phrase)
        if known is not None:
            return known
        with self._lock:
            if self._db is None or self._pid != os.getpid():  # a forked child makes its own
                self._db = sqlite3.connect(":memory:", isolation_level=None,
                                           check_same_thread=False)
                self._db.execute(
                    f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize = '{TOKENIZE}')")
                self._db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
                self._pid = os.getpid()
            self._db.execute("BEGIN")
            try:
                self._db.execute("INSERT INTO t (rowid, text) VALUES (1, ?)", (phrase,))
                tokens = tuple(term for (term,) in self._db.execute(
                    "SELECT term FROM v ORDER BY offset"))
            finally:
                self._db.execute("ROLLBACK")
            if len(self._known) >= _TOKENS_KEPT:
                self._known.clear()
            self._known[phrase] = tokens
        return tokens


query_tokens = _QueryTokens()
