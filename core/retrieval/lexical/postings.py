"""The index's own postings, kept in the same file and written by the same transaction as FTS5's
table, so that a killed sync leaves both as they were.

Per term and block of 4,096 rowids, one row of `postings` holds the rowids within the block,
the term's frequency in each and its token offsets (numpy arrays as blobs: 16 bits a rowid,
8, 16 or 32 a count); per block, `lengths` holds each row's length in tokens. Their terms are
FTS5's own, never a second tokenizer's."""

from __future__ import annotations

import itertools
import json
import operator
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from core.retrieval.lexical.schema import TOKENIZE

# Rows per block of postings and lengths: a row's block is rowid >> BLOCK_BITS, its place in
# the block (stored as 16 bits) rowid & _IN_BLOCK.
BLOCK_BITS = 12
_IN_BLOCK = (1 << BLOCK_BITS) - 1


class Postings(NamedTuple):
    """One term's postings in rowid order: the rows holding it, its frequency in each, and
    each row's token offsets of it (tf of them per row, concatenated; None where not read).
    `ends`: where each row's offsets end in `positions` (None where not worked out)."""

    rowids: np.ndarray
    tfs: np.ndarray
    positions: np.ndarray | None = None
    ends: np.ndarray | None = None


NO_ROWS = np.zeros(0, dtype=np.int64)


@dataclass
class Changes:
    """The rows one transaction removed (with their text as it was before it) and added (with
    the text it wrote), for their postings. `empty`: the full-text table held no row when
    the transaction began."""

    empty: bool = False
    removed: dict[int, str | None] = field(default_factory=dict)
    added: dict[int, str] = field(default_factory=dict)

    def remove(self, rowid: int, text: str | None) -> None:
        if rowid in self.added:  # written by this transaction: it never had postings
            del self.added[rowid]
        else:
            self.removed.setdefault(rowid, text)

    def add(self, rowid: int, text: str) -> None:
        self.added[rowid] = text


def write_postings(db: sqlite3.Connection, changes: Changes) -> None:
    """The postings and lengths of the rows a transaction removed and added, written in that
    transaction. A removed row's terms are its text's, tokenised by FTS5; only the blocks of
    those terms that hold it are rewritten, and of an added row's terms the blocks that take
    its rowid. Into a table that held no row, the new rows' terms are read from the
    full-text index itself, with no second tokenising."""
    if not changes.removed and not changes.added:
        return
    if changes.empty:
        db.execute("DELETE FROM postings")
        db.execute("DELETE FROM lengths")
        db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_instances "
                   "USING fts5vocab(main, chunk_text, instance)")
        new = instances(db, "temp.chunk_instances")
    else:
        new = _tokenised(changes.added)
    changed_in = _by_block(np.array(sorted(set(changes.removed) | set(changes.added)),
                                    dtype=np.int64))
    touched: dict[int, set[str]] = defaultdict(set)  # block -> terms
    old = _tokenised({r: t for r, t in changes.removed.items() if t is not None})
    for term, postings in (*old.items(), *new.items()):
        for block in np.unique(postings.rowids >> BLOCK_BITS).tolist():
            touched[block].add(term)

    writes: list[tuple[str, int, bytes, bytes, bytes]] = []
    deletes: list[tuple[str, int]] = []
    for block, terms in sorted(touched.items()):
        stored = {} if changes.empty else {
            term: (rowids, tfs, positions) for term, rowids, tfs, positions in db.execute(
                "SELECT term, rowids, tfs, positions FROM postings WHERE block = ? "
                "AND term IN (SELECT value FROM json_each(?))",
                (block, json.dumps(sorted(terms))))}
        changed = changed_in.get(block, NO_ROWS)
        for term in sorted(terms):
            part = _in_block(new.get(term), block)
            held = stored.get(term)
            blobs = None if held is None else _appended(held, block, changed, part)
            if blobs is None:
                merged = _merged(None if held is None else _unpacked(block, *held), changed,
                                 part)
                if len(merged.rowids):
                    blobs = (_pack_rowids(merged.rowids), _pack_counts(merged.tfs),
                             _pack_counts(merged.positions))
            if blobs is not None:
                writes.append((term, block, *blobs))
            elif held is not None:
                deletes.append((term, block))
    db.executemany("DELETE FROM postings WHERE term = ? AND block = ?", deletes)
    db.executemany("INSERT OR REPLACE INTO postings VALUES (?, ?, ?, ?, ?)", writes)

    # A row's length is its number of tokens: the sum of its terms' frequencies.
    added = np.array(sorted(changes.added), dtype=np.int64)
    counts = np.zeros(len(added), dtype=np.int64)
    for postings in new.values():
        counts += np.bincount(np.searchsorted(added, postings.rowids), weights=postings.tfs,
                              minlength=len(added)).astype(np.int64)
    lengths = Postings(added, counts)
    for block, in_block in changed_in.items():
        row = None if changes.empty else db.execute(
            "SELECT rowids, lengths FROM lengths WHERE block = ?", (block,)).fetchone()
        held = None if row is None else _unpacked(block, row[0], row[1])
        merged = _merged(held, in_block, _in_block(lengths, block))
        if len(merged.rowids):
            db.execute("INSERT OR REPLACE INTO lengths VALUES (?, ?, ?)",
                       (block, _pack_rowids(merged.rowids), _pack_counts(merged.tfs)))
        elif row is not None:
            db.execute("DELETE FROM lengths WHERE block = ?", (block,))


def _in_block(new: Postings | None, block: int) -> Postings | None:
    """The rows of one block of postings that cover every block (their `ends` known when
    they have offsets)."""
    if new is None:
        return None
    low, high = np.searchsorted(new.rowids, [block << BLOCK_BITS, (block + 1) << BLOCK_BITS])
    if low == high:
        return None
    positions = None
    if new.positions is not None:
        start = int(new.ends[low - 1]) if low else 0
        positions = new.positions[start:int(new.ends[high - 1])]
    return Postings(new.rowids[low:high], new.tfs[low:high], positions)


def _appended(held: tuple[bytes, bytes, bytes], block: int, changed: np.ndarray,
              new: Postings | None) -> tuple[bytes, bytes, bytes] | None:
    """A stored block's blobs with new rows after its last one added to their ends, without
    reading the block back: what packing the merged block gives, since the widths of its
    counts and offsets already hold the new ones. None when that is not so (no new rows, a
    changed row not after the block's last, a value needing a wider type)."""
    rowids, tfs, positions = held
    last = (block << BLOCK_BITS) + int.from_bytes(rowids[-2:], "little")
    if new is None or int(new.rowids[0]) <= last or (len(changed) and int(changed[0]) <= last):
        return None
    tf_type = _COUNT_TYPES[len(tfs) // (len(rowids) // 2)]
    position_type = _COUNT_TYPES[len(positions) // int(
        np.frombuffer(tfs, dtype=tf_type).sum(dtype=np.int64))]
    if (int(new.tfs.max()) > np.iinfo(tf_type).max
            or int(new.positions.max()) > np.iinfo(position_type).max):
        return None
    return (rowids + _pack_rowids(new.rowids), tfs + new.tfs.astype(tf_type).tobytes(),
            positions + new.positions.astype(position_type).tobytes())


def _merged(held: Postings | None, changed: np.ndarray, new: Postings | None
            ) -> Postings:
    """One block with the changed rows taken out and the block's new rows put in, in rowid
    order."""
    parts = []
    if held is not None and (not len(changed) or changed[0] > held.rowids[-1]
                             or changed[-1] < held.rowids[0]):
        parts.append(held)  # no changed row among them (rows added after the block's last)
    elif held is not None:
        keep = ~np.isin(held.rowids, changed, assume_unique=True)
        parts.append(Postings(held.rowids[keep], held.tfs[keep],
                              None if held.positions is None
                              else held.positions[np.repeat(keep, held.tfs)]))
    if new is not None:
        parts.append(new)
    if not parts:
        return Postings(NO_ROWS, NO_ROWS, NO_ROWS)
    rowids = np.concatenate([part.rowids for part in parts]).astype(np.int64)
    tfs = np.concatenate([part.tfs for part in parts]).astype(np.int64)
    positions = (None if parts[0].positions is None
                 else np.concatenate([part.positions for part in parts]).astype(np.int64))
    if len(rowids) > 1 and bool((rowids[1:] < rowids[:-1]).any()):
        if positions is not None:  # each row's offsets move with it, in their order
            positions = positions[np.argsort(np.repeat(rowids, tfs), kind="stable")]
        order = np.argsort(rowids, kind="stable")
        rowids, tfs = rowids[order], tfs[order]
    return Postings(rowids, tfs, positions)


def _by_block(rowids: np.ndarray) -> dict[int, np.ndarray]:
    """Sorted rowids split by block."""
    if not len(rowids):
        return {}
    blocks = rowids >> BLOCK_BITS
    starts = np.flatnonzero(np.concatenate(([True], blocks[1:] != blocks[:-1])))
    return {int(blocks[start]): part
            for start, part in zip(starts, np.split(rowids, starts[1:]), strict=True)}


def instances(db: sqlite3.Connection, vocab: str) -> dict[str, Postings]:
    """term -> postings (with offsets) of every row of the full-text table behind `vocab`,
    an fts5vocab table of type `instance` (one row per token, in term, rowid and offset
    order). Each term's tokens come as one string of (rowid << 32 | offset), so that SQLite,
    not Python, steps through them."""
    found = {}
    for term, packed in db.execute(
            f"SELECT term, group_concat((doc << 32) | offset) FROM {vocab} GROUP BY term"):
        keys = np.fromstring(packed, dtype=np.int64, sep=",")
        if len(keys) > 1 and bool((keys[1:] < keys[:-1]).any()):
            keys.sort()
        found[term] = runs(keys)
    return found


def runs(keys: np.ndarray) -> Postings:
    """Postings from sorted (rowid << 32 | offset) keys, one per token."""
    rows = keys >> 32
    starts = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
    ends = np.append(starts[1:], len(keys))
    return Postings(rows[starts], ends - starts, (keys & 0xFFFFFFFF).astype(np.uint32), ends)


def _tokenised(texts: Mapping[int, str]) -> dict[str, Postings]:
    """term -> postings (with offsets) of these texts (rowid -> text), as the full-text table
    tokenises them: they are put into a scratch FTS5 table with the same tokenizer."""
    if not texts:
        return {}
    scratch = sqlite3.connect(":memory:", isolation_level=None)
    try:
        scratch.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize = '{TOKENIZE}')")
        scratch.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        scratch.execute("BEGIN")
        scratch.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", texts.items())
        return instances(scratch, "v")
    finally:
        scratch.close()


def _pack_rowids(rowids: np.ndarray) -> bytes:
    """A block's sorted rowids, by their place in the block (16 bits each)."""
    return (rowids & _IN_BLOCK).astype("<u2").tobytes()


def _pack_counts(counts: np.ndarray) -> bytes:
    """Frequencies, lengths or offsets: 8, 16 or 32 bits each, the fewest that hold the
    largest (the width is the blob's length over the number of values)."""
    largest = int(counts.max()) if len(counts) else 0
    dtype = "u1" if largest <= 0xFF else "<u2" if largest <= 0xFFFF else "<u4"
    return counts.astype(dtype).tobytes()


_COUNT_TYPES = {1: "u1", 2: "<u2", 4: "<u4"}


def _unpacked(block: int, rowids: bytes, tfs: bytes, positions: bytes | None = None
              ) -> Postings:
    """One stored block (postings, or lengths with `tfs` the lengths)."""
    return _decoded([block], [rowids], [tfs], None if positions is None else [positions])


def _decoded(blocks: list[int], rowids: list[bytes], counts: list[bytes],
             positions: list[bytes] | None) -> Postings:
    """Stored blocks of one term (or of the lengths), in block order, as one postings, with
    numpy reading the blobs of a kind joined rather than block by block."""
    sizes = np.array([len(blob) // 2 for blob in rowids], dtype=np.int64)
    every = (np.frombuffer(b"".join(rowids), dtype="<u2").astype(np.int64)
             + np.repeat(np.array(blocks, dtype=np.int64) << BLOCK_BITS, sizes))
    tfs = _joined_counts(counts, sizes.tolist())
    held = None
    if positions is not None:
        ends = np.cumsum(tfs, dtype=np.int64)
        bounds = np.concatenate(([0], ends[np.cumsum(sizes) - 1]))
        held = _joined_counts(positions, np.diff(bounds).tolist())
    return Postings(every, tfs, held)


def _joined_counts(blobs: list[bytes], sizes: list[int]) -> np.ndarray:
    """Blocks of counts (8, 16 or 32 bits each) as one array."""
    widths = {len(blob) // size for blob, size in zip(blobs, sizes, strict=True)}
    if len(widths) == 1:
        return np.frombuffer(b"".join(blobs), dtype=_COUNT_TYPES[widths.pop()])
    return np.concatenate([
        np.frombuffer(blob, dtype=_COUNT_TYPES[len(blob) // size]).astype(np.int64)
        for blob, size in zip(blobs, sizes, strict=True)])


def read_postings(db: sqlite3.Connection, terms: list[str], *, positions: bool
                  ) -> dict[str, Postings]:
    """term -> postings, in rowid order, of these terms (with offsets if `positions`)."""
    if not terms:
        return {}
    columns = "rowids, tfs, positions" if positions else "rowids, tfs"
    return read_blocks(db.execute(
        f"SELECT term, block, {columns} FROM postings "
        "WHERE term IN (SELECT value FROM json_each(?)) ORDER BY term, block",
        (json.dumps(terms),)), positions=positions)


def read_blocks(rows: Iterable[tuple[Any, ...]], *, positions: bool) -> dict[str, Postings]:
    """Stored blocks (term, block, rowids, counts[, offsets]) in term and block order, as one
    postings per term."""
    found = {}
    for term, group in itertools.groupby(rows, key=operator.itemgetter(0)):
        parts = list(group)
        found[term] = _decoded([part[1] for part in parts], [part[2] for part in parts],
                               [part[3] for part in parts],
                               [part[4] for part in parts] if positions else None)
    return found
