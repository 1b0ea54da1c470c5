"""The lexical index's postings: the BM25 computed from them is FTS5's bm25() to the bit, for
the same rows in the same order; they follow chunk_text through every sync in its
transaction (a killed sync leaves both as they were), a sync leaves what a rebuild makes, a
row's length is FTS5's own count of its tokens, and `evidence check` finds postings that
disagree with the full-text index and a rebuild mends them."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from core.models import DOCUMENT_SOURCE_TYPE, FOLLOWUP_SOURCE_TYPE
from core.retrieval.lexical import LexicalIndex, index_path, match_expression, ranking, terms
from core.retrieval.lexical import bm25 as bm25_module
from core.retrieval.lexical import index as index_module
from core.retrieval.lexical import postings as codec
from core.retrieval.source import StoredChunk
from core.store import Where
from core.store.records import version_key
from tests.test_lexical import DOCUMENTS, followup_round, query, runner_index, write

# Words that tokenise alike or apart (case, diacritics, "-", "'", digits), words repeated
# inside a phrase, and one letter unicode61 does not count as a token character.
WORDS = ["Café", "CAFE", "cafe", "café", "Über", "uber", "naïve", "NAIVE", "straße", "Ærø",
         "AES-256", "aes", "256", "AES", "don't", "vendor's", "Backups", "backup", "keys",
         "KEYS", "MFA", "multi-factor", "CVE-2024-3094", "2024", "third-party", "party",
         "bye", "bye-bye", "bye-bye-bye", "e-mail", "email", "l'été", "ete", "data", "rest",
         "encrypted", "x", "1", "2", "1-2", "1.2", "\u19b0", "\u19b0\u19b1", "ǅ", "the", "of"]
SEPARATORS = [" ", " ", " ", ", ", ". ", "-", "'", "\n", " (", ") "]


def text_of(words: list[str], separators: list[str]) -> str:
    return "".join(w + separators[i % len(separators)] for i, w in enumerate(words)).strip()


texts = st.builds(text_of, st.lists(st.sampled_from(WORDS), max_size=20),
                  st.lists(st.sampled_from(SEPARATORS), min_size=1, max_size=4))
# A few texts drawn from a small pool, so that rows tie.
pooled = st.sampled_from(["Café keys", "AES-256 keys rotate", "bye bye bye", "",
                          "CVE-2024-3094 data at rest"])
row_text = st.one_of(texts, texts, pooled)
queries = st.builds(lambda words, extra: " ".join(words) + extra,
                    st.lists(st.sampled_from(WORDS), min_size=1, max_size=8),
                    st.one_of(st.just(""), st.text(max_size=6)))


def matches(where: Where | None, metadata: dict) -> bool:
    for condition in where.conditions if where else ():
        value = metadata.get(condition.key)
        if condition.op == "eq" and value != condition.value:
            return False
        if condition.op == "ne" and value == condition.value:
            return False
        if condition.op == "in" and value not in condition.value:
            return False
    return True


class FakeVendor:
    """A vendor's records in memory: what a sync reads of a store."""

    def __init__(self) -> None:
        self.vendor_id = "acme"
        self.collection_id = "collection-1"
        self.held: dict[str, StoredChunk] = {}
        self.versions: dict[str, str] = {}
        self._next_version = 0

    def records(self, where=None, *, page_size: int = 5000, text: bool = True):
        return [chunk for chunk in self.held.values() if matches(where, chunk.metadata)]

    def holds_any(self, where) -> bool:
        return any(matches(where, chunk.metadata) for chunk in self.held.values())

    def put_document(self, doc_key: str, chunk_texts: list[str]) -> None:
        """A new version of the document (its old version's chunks leave the store)."""
        self.drop_document(doc_key)
        self._next_version += 1
        sha = f"v{self._next_version}"
        for i, chunk_text in enumerate(chunk_texts):
            record_id = f"doc-{doc_key}-{sha}-{i}"
            self.held[record_id] = StoredChunk(record_id, chunk_text, {
                "doc_key": doc_key, "doc_sha": sha, "source_type": DOCUMENT_SOURCE_TYPE,
                "source": f"{doc_key}.md"})
        self.versions[doc_key] = sha

    def drop_document(self, doc_key: str) -> None:
        for record_id in [i for i, c in self.held.items() if c.metadata.get("doc_key") == doc_key]:
            del self.held[record_id]
        self.versions.pop(doc_key, None)

    def put_followup(self, record_id: str, answer: str) -> None:
        self.held[record_id] = StoredChunk(record_id, answer, {
            "source_type": FOLLOWUP_SOURCE_TYPE, "answer_text": answer})

    def drop_followup(self, record_id: str) -> None:
        self.held.pop(record_id, None)

    def committed(self) -> set[str]:
        return {version_key(k, v) for k, v in self.versions.items()}


def ranked_both_ways(path: Path, expression: str, committed: set[str], n: int):
    """(the postings' answer or None, FTS5's answer), each as (id, rank) pairs."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        new = ranking.best_by_postings(db, str(path), expression, committed, n)
        old = ranking.best_by_fts5(db, expression, committed, n)
    finally:
        db.close()

    def pairs(rows):
        return None if rows is None else [(i, rank.hex()) for i, _, _, rank in rows]

    return pairs(new), pairs(old)


def answers_without_postings(expression: str) -> bool:
    """Whether some phrase has no token, so that FTS5 answers the query alone."""
    return not all(terms.query_tokens(p) for p in terms.phrases_of(expression))


def assert_ranked_as_fts5(path: Path, text: str, committed: set[str]) -> None:
    expression = match_expression(text)
    if expression is None:
        return
    for n in (1, 2, 5, 50):
        new, old = ranked_both_ways(path, expression, committed, n)
        if new is None:
            assert answers_without_postings(expression), expression
        else:
            assert new == old, (expression, n)


def varint(blob: bytes) -> int:
    """The first SQLite varint of a blob (FTS5's docsize records)."""
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    raise AssertionError("truncated varint")


def postings_by_record(path: Path) -> tuple[dict, dict]:
    """(term, record id) -> offsets, and record id -> length: the postings and lengths with
    rowids read as the ids they hold (a rebuild numbers rows afresh)."""
    db = sqlite3.connect(path)
    try:
        ids = dict(db.execute("SELECT rowid, id FROM chunks"))
        postings = codec.read_blocks(db.execute(
            "SELECT term, block, rowids, tfs, positions FROM postings ORDER BY term, block"),
            positions=True)
        found = {}
        for term, held in postings.items():
            ends = np.cumsum(held.tfs)
            for rowid, tf, end in zip(held.rowids.tolist(), held.tfs.tolist(), ends.tolist(),
                                      strict=True):
                found[(term, ids[rowid])] = tuple(held.positions[end - tf:end].tolist())
        held = codec.read_blocks(db.execute(
            "SELECT 'lengths', block, rowids, lengths FROM lengths ORDER BY block"),
            positions=False).get("lengths")
        lengths = {} if held is None else {
            ids[r]: n for r, n in zip(held.rowids.tolist(), held.tfs.tolist(), strict=True)}
        return found, lengths
    finally:
        db.close()


def assert_lengths_are_fts5s(path: Path) -> None:
    db = sqlite3.connect(path)
    try:
        docsize = {rowid: varint(size) for rowid, size in db.execute(
            "SELECT id, sz FROM chunk_text_docsize")}
        held = codec.read_blocks(db.execute(
            "SELECT 'lengths', block, rowids, lengths FROM lengths ORDER BY block"),
            positions=False).get("lengths")
        lengths = {} if held is None else dict(zip(held.rowids.tolist(), held.tfs.tolist(),
                                                   strict=True))
    finally:
        db.close()
    assert lengths == docsize


def assert_packed_as_written_whole(path: Path) -> None:
    """Every stored block is what packing its rows at once gives (a block extended in place
    included), rows in rowid order, no block empty."""
    db = sqlite3.connect(path)
    try:
        for term, block, rowids, tfs, positions in db.execute("SELECT * FROM postings"):
            held = codec._unpacked(block, rowids, tfs, positions)
            assert len(held.rowids) and bool((np.diff(held.rowids) > 0).all())
            assert (codec._pack_rowids(held.rowids), codec._pack_counts(held.tfs),
                    codec._pack_counts(held.positions)) == (rowids, tfs, positions), term
    finally:
        db.close()


def file_content(path: Path) -> dict[str, list]:
    """Every row of every table of an index file, the full-text index's own terms with it."""
    db = sqlite3.connect(path)
    try:
        content = {table: sorted(db.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
                   for table in ("meta", "versions", "followups", "chunks", "postings",
                                 "lengths")}
        content["chunk_text"] = db.execute("SELECT rowid, text FROM chunk_text "
                                           "ORDER BY rowid").fetchall()
        db.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, chunk_text, row)")
        content["terms"] = db.execute("SELECT * FROM temp.terms ORDER BY term").fetchall()
        db.execute("INSERT INTO chunk_text (chunk_text) VALUES ('integrity-check')")
        return content
    finally:
        db.close()


# The ranking ----------------------------------------------------------------------------------

documents = st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]),
                            st.lists(row_text, max_size=6), max_size=4)
followups = st.dictionaries(st.sampled_from([f"followup-{i}" for i in range(6)]), row_text,
                            max_size=4)


@hypothesis_settings(max_examples=60, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(first=st.tuples(documents, followups), later=st.lists(st.tuples(documents, followups,
       st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=2),
       st.lists(st.sampled_from([f"followup-{i}" for i in range(6)]), max_size=2)),
       min_size=1, max_size=2),
       asked=st.lists(queries, min_size=1, max_size=6), data=st.data())
def test_bm25_from_the_postings_is_fts5s_to_the_bit(first, later, asked, data):
    """Random corpora synced, then changed (versions replaced, documents and answers
    removed, answers edited or added) and synced again: every query built by
    `match_expression` returns from the postings exactly the (id, score) list FTS5 returns,
    for several n and for readers naming fewer versions; the lengths are FTS5's docsize, and
    the postings equal those a rebuild makes."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "acme.sqlite3"
        vendor = FakeVendor()
        steps = [(*first, [], []), *later]
        for put_documents, put_followups, dropped_documents, dropped_followups in steps:
            for doc_key in dropped_documents:
                vendor.drop_document(doc_key)
            for record_id in dropped_followups:
                vendor.drop_followup(record_id)
            for doc_key, chunk_texts in put_documents.items():
                vendor.put_document(doc_key, chunk_texts)
            for record_id, answer in put_followups.items():
                vendor.put_followup(record_id, answer)
            LexicalIndex(path, vendor, vendor.versions).sync()
            committed = vendor.committed()
            fewer = data.draw(st.sets(st.sampled_from(sorted(committed)))) if committed else set()
            for text in asked:
                assert_ranked_as_fts5(path, text, committed)
                assert_ranked_as_fts5(path, text, committed - fewer)
            assert_lengths_are_fts5s(path)
            assert_packed_as_written_whole(path)
        synced = postings_by_record(path)
        LexicalIndex(path, vendor, vendor.versions).rebuild()
        assert postings_by_record(path) == synced
        assert_lengths_are_fts5s(path)


def test_phrases_repeated_words_and_ties_score_as_fts5(tmp_path):
    vendor = FakeVendor()
    vendor.put_document("a", ["bye bye bye, bye-bye", "Bye BYE", "bye", "AES-256 and AES 256",
                              "aes 256 256 aes", "CVE-2024-3094 then 2024-3094 CVE 2024"])
    vendor.put_document("b", ["Café keys"] * 5 + ["cafe KEYS", "CAFE, keys!"])
    vendor.put_followup("followup-1", "The CVE-2024-3094 advisory: AES-256 keys, bye-bye.")
    path = tmp_path / "acme.sqlite3"
    LexicalIndex(path, vendor, vendor.versions).sync()
    committed = vendor.committed()
    for text in ["bye-bye", "bye-bye-bye", "AES-256", "CVE-2024-3094", "Café keys", "CAFE",
                 "keys bye-bye AES-256 2024", "256-AES", "3094-2024"]:
        expression = match_expression(text)
        for n in (1, 3, 5, 20):
            new, old = ranked_both_ways(path, expression, committed, n)
            assert new is not None and new == old, (text, n)
    assert_lengths_are_fts5s(path)


def test_a_large_index_ranks_its_best_rows_as_fts5(tmp_path, monkeypatch):
    """Over a table large enough that only the rows above a sampled bound are listed, and with
    words in one row of eight or more (their parts added whole): the same rows, order and
    scores as FTS5, also where the best rows are of versions the reader does not name (the
    window widens past the bound) and where a rare word's rows stand together."""
    rng = np.random.default_rng(7)
    common = [f"common{i}" for i in range(4)]
    middle = [f"middle{i}" for i in range(12)]
    vendor = FakeVendor()
    for doc in range(12):
        texts = []
        for row in range(80):
            words = list(rng.choice(common, size=rng.integers(1, 6)))
            words += list(rng.choice(middle, size=rng.integers(0, 3)))
            if doc == 5 and 30 <= row < 34:  # a rare word's rows, side by side
                words += ["rare"] * int(rng.integers(1, 4))
            texts.append(" ".join(words))
        vendor.put_document(f"d{doc}", texts)
    for i in range(20):
        vendor.put_followup(f"followup-{i}", f"common0 middle{i % 12} middle{(i * 5) % 12}")
    path = tmp_path / "acme.sqlite3"
    LexicalIndex(path, vendor, vendor.versions).sync()
    committed = vendor.committed()
    fewer = {key for key in committed if not key.startswith(("d1@", "d2@", "d5@"))}

    bounded, dense = [], []
    at_least, part = bm25_module._at_least, bm25_module._part

    def watched_at_least(score, best):
        rows, whole = at_least(score, best)
        bounded.append(not whole)
        return rows, whole

    def watched_part(found, state):
        made = part(found, state)
        dense.append(made[0] is None)
        return made

    monkeypatch.setattr(bm25_module, "_at_least", watched_at_least)
    monkeypatch.setattr(bm25_module, "_part", watched_part)
    for text in ["common0 middle3", "rare middle1", "middle2 middle7 common3", "rare",
                 "common1 common2", "middle11 rare common0 middle0"]:
        expression = match_expression(text)
        for reader in (committed, fewer):
            for n in (1, 2, 5, 20):
                new, old = ranked_both_ways(path, expression, reader, n)
                assert new is not None and new == old, (text, n, reader is fewer)
    assert any(bounded) and not all(bounded)
    assert any(dense) and not all(dense)


def test_nearest_ranks_from_the_postings_and_falls_back_to_fts5(tmp_path, monkeypatch):
    vendor = FakeVendor()
    vendor.put_document("a", ["Data at rest is encrypted with AES-256.", "Keys rotate yearly."])
    vendor.put_followup("followup-1", "Yes, AES-256 with keys in an HSM.")
    path = tmp_path / "acme.sqlite3"
    index = LexicalIndex(path, vendor, vendor.versions)
    expected = [(n.chunk.id, n.score) for n in index.nearest(query("AES-256 keys"), 5)]

    def no_fts5(*args, **kwargs):
        raise AssertionError("FTS5 ranked a query the postings answer")

    monkeypatch.setattr(index_module, "best_by_fts5", no_fts5)
    found = index.nearest(query("AES-256 keys"), 5)
    assert [(n.chunk.id, n.score) for n in found] == expected
    assert found[0].chunk.text == "Yes, AES-256 with keys in an HSM."  # both words
    with pytest.raises(AssertionError, match="FTS5 ranked"):  # no token for FTS5
        index.nearest(query("keys \u19b0\u19b1"), 5)
    monkeypatch.undo()
    assert [n.chunk.id for n in index.nearest(query("keys \u19b0\u19b1"), 5)] == [
        n.chunk.id for n in index.nearest(query("keys"), 5)]


def test_an_index_without_lengths_is_ranked_by_fts5(tmp_path):
    vendor = FakeVendor()
    vendor.put_document("a", ["Keys rotate yearly.", "Keys are kept in an HSM."])
    path = tmp_path / "acme.sqlite3"
    LexicalIndex(path, vendor, vendor.versions).sync()
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM lengths")
        db.execute("DELETE FROM meta WHERE key = 'postings_state'")
    new, old = ranked_both_ways(path, '"keys"', vendor.committed(), 5)
    assert new is None and len(old) == 2


# Following chunk_text ---------------------------------------------------------------------------

def changed_vendor() -> tuple[FakeVendor, dict[str, str]]:
    vendor = FakeVendor()
    vendor.put_document("a", ["Data at rest is encrypted with AES-256.", "Keys rotate yearly."])
    vendor.put_document("b", ["Backups are copied nightly."] * 3)
    vendor.put_followup("followup-1", "Yes, AES-256 with keys in an HSM.")
    vendor.put_followup("followup-2", "Backups are restored quarterly.")
    return vendor, dict(vendor.versions)


def change(vendor: FakeVendor) -> None:
    vendor.put_document("a", ["Data at rest uses AES-256-GCM.", "Keys rotate every month."])
    vendor.drop_document("b")
    vendor.put_followup("followup-1", "Keys are held in a KMS.")
    vendor.drop_followup("followup-2")
    vendor.put_followup("followup-3", "Eight new answers arrive; café keys.")


def test_a_replacing_and_removing_sync_leaves_what_a_rebuild_makes(tmp_path):
    vendor, _ = changed_vendor()
    path = tmp_path / "acme.sqlite3"
    LexicalIndex(path, vendor, vendor.versions).sync()
    change(vendor)
    report = LexicalIndex(path, vendor, vendor.versions).sync()
    assert report.chunks_removed == 7 and report.chunks_added == 4
    synced = postings_by_record(path)
    assert_lengths_are_fts5s(path)
    assert synced[1] and {record_id for _, record_id in synced[0]} == set(vendor.held)
    LexicalIndex(path, vendor, vendor.versions).rebuild()
    assert postings_by_record(path) == synced
    for text in ("AES-256 keys", "backups nightly", "KMS café"):
        assert_ranked_as_fts5(path, text, vendor.committed())


@pytest.mark.parametrize("where", ["after the postings", "before the lengths"])
def test_a_sync_killed_after_writing_postings_leaves_the_file_as_it_was(tmp_path, monkeypatch,
                                                                         where):
    vendor, _ = changed_vendor()
    path = tmp_path / "acme.sqlite3"
    LexicalIndex(path, vendor, vendor.versions).sync()
    before = file_content(path)
    change(vendor)
    write_postings, merged = codec.write_postings, codec._merged

    def killed_after(db, changes):
        write_postings(db, changes)
        assert db.execute("SELECT count(*) FROM postings").fetchone()[0]
        raise KeyboardInterrupt("killed after the postings")

    def killed_at_lengths(held, changed, new):
        if new is not None and new.positions is None:  # the lengths, after every posting
            raise KeyboardInterrupt("killed before the lengths")
        return merged(held, changed, new)

    if where == "after the postings":
        monkeypatch.setattr(index_module, "write_postings", killed_after)
    else:
        monkeypatch.setattr(codec, "_merged", killed_at_lengths)
    with pytest.raises(KeyboardInterrupt, match="killed"):
        LexicalIndex(path, vendor, vendor.versions).sync()
    assert file_content(path) == before

    monkeypatch.undo()
    assert LexicalIndex(path, vendor, vendor.versions).sync().changed
    synced = postings_by_record(path)
    LexicalIndex(path, vendor, vendor.versions).rebuild()
    assert postings_by_record(path) == synced
    assert_ranked_as_fts5(path, "AES-256 keys KMS backups", vendor.committed())


def test_a_process_never_takes_the_lengths_of_another_state(tmp_path):
    """The lengths worked out once per state are kept by a token every changing sync draws
    afresh: after a sync, the next query ranks with the new lengths."""
    vendor, _ = changed_vendor()
    path = tmp_path / "acme.sqlite3"
    LexicalIndex(path, vendor, vendor.versions).sync()
    assert_ranked_as_fts5(path, "AES-256 keys", vendor.committed())
    with sqlite3.connect(path) as db:
        token = db.execute("SELECT value FROM meta WHERE key = 'postings_state'").fetchone()
    vendor.put_followup("followup-4", "Keys keys keys, and many more words than the others "
                                      "hold, to move the average length.")
    LexicalIndex(path, vendor, vendor.versions).sync()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'postings_state'"
                          ).fetchone() != token
    assert_ranked_as_fts5(path, "AES-256 keys", vendor.committed())


def test_an_index_of_the_first_layout_is_rebuilt_with_postings(tmp_path):
    vendor, _ = changed_vendor()
    path = tmp_path / "acme.sqlite3"
    with sqlite3.connect(path) as db:  # the layout before the postings
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        db.execute("CREATE VIRTUAL TABLE chunk_text USING fts5(text)")
    report = LexicalIndex(path, vendor, vendor.versions).sync()
    assert report.rebuilt and report.chunks_added == len(vendor.held)
    assert_lengths_are_fts5s(path)
    assert_ranked_as_fts5(path, "AES-256 keys backups", vendor.committed())


# `evidence check` -------------------------------------------------------------------------------

@pytest.fixture
def settled(workbench, tmp_path):
    workbench.ingest_documents("acme", [write(tmp_path / "docs", DOCUMENTS)])
    workbench.ingest_questionnaire(followup_round("acme", 1, "Yes, AES-256 via a KMS."))
    workbench.retrieve("acme", "Where are keys held?", "hybrid")  # builds and settles it
    return workbench


def damage(path: Path, kind: str) -> None:
    with sqlite3.connect(path) as db:
        if kind == "postings_lost":  # "backdoor" is in one chunk only
            db.execute("DELETE FROM postings WHERE term = 'backdoor'")
        elif kind == "length_altered":
            (block, rowids, lengths) = db.execute("SELECT * FROM lengths").fetchone()
            altered = bytearray(lengths)  # the first row's length (little-endian), one more
            assert altered[0] < 0xFF
            altered[0] += 1
            db.execute("UPDATE lengths SET lengths = ? WHERE block = ?",
                       (bytes(altered), block))
        elif kind == "postings_planted":  # a row no table holds, in the postings
            db.execute("INSERT INTO postings VALUES ('planted', 0, ?, ?, ?)", (
                np.array([4000], dtype="<u2").tobytes(), np.array([1], dtype="<u2").tobytes(),
                np.array([0], dtype="<u2").tobytes()))
        elif kind == "postings_of_a_lost_row":  # a row gone from both tables, not its postings
            rowid = db.execute("SELECT c.rowid FROM chunks AS c JOIN chunk_text AS t "
                               "ON t.rowid = c.rowid WHERE t.text LIKE '%backdoor%'"
                               ).fetchone()[0]
            db.execute("DELETE FROM chunk_text WHERE rowid = ?", (rowid,))
            db.execute("DELETE FROM chunks WHERE rowid = ?", (rowid,))


@pytest.mark.parametrize(("kind", "mismatches"), [
    ("postings_lost", 1), ("length_altered", 1), ("postings_planted", 1)])
def test_check_finds_postings_that_disagree_and_a_rebuild_mends_them(settled, kind,
                                                                     mismatches):
    path = index_path(settled.settings, "acme")
    clean = settled.check("acme", repair=False)
    assert clean.ok and clean.lexical.differences == 0
    reference = [(n.chunk.id, n.score) for n in runner_index(settled, "acme").nearest(
        query("xz backdoor shipped nightly"), 10)]
    damage(path, kind)

    found = settled.check("acme", repair=False)
    assert not found.ok
    assert found.lexical.fts_mismatch == found.lexical.drift == mismatches
    assert found.lexical.differences == mismatches

    repaired = settled.check("acme")
    assert repaired.ok and repaired.repaired.lexical == "rebuilt"
    again = settled.check("acme", repair=False)
    assert again.ok and again.lexical.differences == 0 and again.lexical.settled
    assert [(n.chunk.id, n.score) for n in runner_index(settled, "acme").nearest(
        query("xz backdoor shipped nightly"), 10)] == reference
    assert_lengths_are_fts5s(path)


def test_postings_of_a_row_lost_from_both_tables_count_once(settled):
    """A row lost from the rows and full-text tables, its postings left: the lost row is
    counted (missing), its postings not again; a rebuild mends both."""
    path = index_path(settled.settings, "acme")
    damage(path, "postings_of_a_lost_row")
    found = settled.check("acme", repair=False)
    assert (found.lexical.missing, found.lexical.fts_mismatch) == (1, 0)
    assert found.lexical.drift == 1
    repaired = settled.check("acme")
    assert repaired.ok and repaired.repaired.lexical == "rebuilt"
    assert settled.check("acme", repair=False).lexical.differences == 0
