"""The lexical (BM25, SQLite FTS5) index beside the vectors: queries people type, the index
following the store's committed state (interrupted ingests, replaced documents, re-sent
rounds), one index per vendor, where its files live, and several syncs at once."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from core.config import Settings
from core.errors import StoreError
from core.hashing import criterion_hash
from core.ingest.writer import document_key
from core.models import FOLLOWUP_SOURCE_TYPE
from core.retrieval.lexical import (
    LexicalIndex,
    index_path,
    lexical_folder,
    match_expression,
)
from core.retrieval.lexical.connections import IDLE, IdleConnections
from core.retrieval.source import Query
from core.store import VendorStore, committed_versions
from core.store.scoping import without_scopes
from core.store.vendor import chroma_where
from core.workbench import Workbench
from tests.conftest import AES_CRITERION
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support.payloads import response, round_payload
from tests.support.store import chunk_rows, read_manifest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = {
    "encryption.md": "Data at rest is encrypted with AES-256 in every region.",
    "identity.md": "What's MFA? Multi-factor authentication (MFA) is required for admins.",
    "advisory.md": "The CVE-2024-3094 advisory: the xz backdoor was never shipped.",
    "quotes.md": 'The policy says "least privilege" (always) and * marks optional items.',
    "operators.md": "Servers NEAR the edge OR in the core are patched; NOT optional.",
    "backups.md": "Backups are copied nightly and restored quarterly in a drill.",
}
PUNCTUATION_QUERIES = {  # query -> the document it must find first
    "AES-256": "encryption.md",
    "what's MFA?": "identity.md",
    "CVE-2024-3094": "advisory.md",
    '"least privilege"': "quotes.md",
    '"least privilege': "quotes.md",
    "(always)": "quotes.md",
    "edge*": "operators.md",
    "NEAR edge": "operators.md",
    "OR": "operators.md",
    "NOT": "operators.md",
    "AND backups": "backups.md",
    "backups:nightly": "backups.md",
    "^backups": "backups.md",
    "backups -drill": "backups.md",
    "{backups} [drill]": "backups.md",
    "NEAR(backups drill, 2)": "backups.md",
    "backups + drill \\ ; ' `": "backups.md",
}


def query(text: str) -> Query:
    return Query(text=text, criterion_hash=criterion_hash(text),
                 embedding=np.zeros(4, dtype=np.float32))


def write(folder: Path, docs: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text + "\n", encoding="utf-8")
    return folder


def followup_round(vendor: str, round_number: int, answer: str, *,
                   timestamp: str = "2024-03-15T10:30:00Z") -> dict:
    return round_payload(round_number, [
        response(AES_CRITERION, answer, AES_CRITERION),
        response("Where are keys held?", "In a hardware security module."),
    ], vendor=vendor, timestamp=timestamp)


def index_at(bench: Workbench, vendor_id: str, versions: dict[str, str] | None = None,
             chunks=None) -> LexicalIndex:
    """The vendor's index at the committed state (or at `versions`)."""
    vendor = bench.store.open_vendor(vendor_id)
    if versions is None:
        versions = committed_versions(read_manifest(vendor))
    return LexicalIndex(index_path(bench.settings, vendor_id), with_chunks(vendor, chunks),
                        versions)


def sources(neighbours) -> list[str]:
    return [n.chunk.metadata["source"] for n in neighbours]


@pytest.fixture
def acme(workbench, tmp_path) -> Workbench:
    workbench.ingest_documents("acme", [write(tmp_path / "docs", DOCUMENTS)])
    workbench.ingest_questionnaire(followup_round("acme", 1, "Yes, AES-256 via a KMS."))
    return workbench


@pytest.fixture(scope="module")
def module_index(tmp_path_factory) -> LexicalIndex:
    root = tmp_path_factory.mktemp("lexical-module")
    bench = Workbench(Settings(store=root / "store", reranker_cache_dir=root / "no-models"),
                      embedder=FakeEmbedder())
    bench.ingest_documents("acme", [write(root / "docs", DOCUMENTS)])
    index = index_at(bench, "acme")
    index.sync()
    return index


# Queries -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("AES-256", '"AES 256" OR "AES" OR "256"'),
    ("what's MFA?", '"what s" OR "MFA"'),
    ("CVE-2024-3094", '"CVE 2024 3094" OR "CVE" OR "2024" OR "3094"'),
    ('say "NEAR" OR (x*)', '"say" OR "NEAR"'),  # "or" is a stop word, "x" one letter
    ("OR", '"OR"'),
    ("Keys keys KEYS", '"Keys"'),
    ("the of", '"the" OR "of"'),  # nothing but stop words: they are all there is
])
def test_every_word_is_quoted_and_or_ed(text, expected):
    assert match_expression(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "???", '"', "*", "()", "-- ''"])
def test_a_query_without_a_word_matches_nothing(module_index, text):
    assert match_expression(text) is None
    assert module_index.nearest(query(text), 10) == []


@pytest.mark.parametrize("text", list(PUNCTUATION_QUERIES))
def test_queries_with_punctuation_and_operators_find_their_document(module_index, text):
    found = module_index.nearest(query(text), 10)
    assert found, text
    assert sources(found)[0] == PUNCTUATION_QUERIES[text]


@hypothesis_settings(max_examples=200, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=60))
def test_no_text_makes_a_query_fail(module_index, text):
    found = module_index.nearest(query(text), 5)
    assert len(found) <= 5


def test_scores_are_bm25_negated_best_first(module_index):
    found = module_index.nearest(query("AES-256 backups encrypted"), 10)
    scores = [n.score for n in found]
    assert all(s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert all(n.committed for n in found)
    assert sources(found)[0] == "encryption.md"  # holds the phrase and "encrypted"
    assert len(module_index.nearest(query("AES-256 backups encrypted"), 1)) == 1


def test_stop_words_do_not_make_every_chunk_match(module_index):
    found = module_index.nearest(query("what is the policy?"), 10)
    assert sources(found) == ["quotes.md"]


def test_neighbours_carry_the_stored_text_and_metadata(acme):
    index = index_at(acme, "acme")
    [hit] = index.nearest(query("xz backdoor"), 10)
    stored = chunk_rows(acme.store.open_vendor("acme").chunks, ids=[hit.chunk.id])
    assert hit.chunk.text == stored["documents"][0]
    assert hit.chunk.metadata == without_scopes(stored["metadatas"][0])


# where filters ---------------------------------------------------------------------------------

def test_where_filters_on_the_criterion_hash_and_the_source_type(acme):
    index = index_at(acme, "acme")
    linked = index.nearest(query("AES-256"), 10,
                           where={"criterion_question_hash": criterion_hash(AES_CRITERION)})
    assert [n.chunk.metadata["question_text"] for n in linked] == [AES_CRITERION]
    followups = index.nearest(query("AES-256 keys"), 10,
                              where={"source_type": FOLLOWUP_SOURCE_TYPE})
    assert len(followups) == 2
    assert {n.chunk.metadata["source_type"] for n in followups} == {FOLLOWUP_SOURCE_TYPE}
    documents = index.nearest(query("AES-256"), 10, where={"source_type": {"$eq": "document"}})
    assert sources(documents) == ["encryption.md"]
    both = index.nearest(query("AES-256"), 10, where={"$and": [
        {"source_type": FOLLOWUP_SOURCE_TYPE}, {"round_number": 1}]})
    assert len(both) == 1
    assert index.nearest(query("AES-256"), 10, where={"round_number": 2}) == []


@pytest.mark.parametrize("where", [
    {"round_number": {"$gt": 1}},
    {"source_type": {"$in": ["document"]}},
    {"$or": [{"round_number": 1}, {"round_number": 2}]},
    {"bad key'": "x"},
    {"source_type": ["document"]},
])
def test_where_refuses_what_it_does_not_take(acme, where):
    with pytest.raises(ValueError, match="only equality filters"):
        index_at(acme, "acme").nearest(query("AES-256"), 10, where=where)


# Following the store ----------------------------------------------------------------------------

def with_chunks(vendor: VendorStore, chunks=None) -> VendorStore:
    """The vendor, its chunk collection replaced by `chunks` when given."""
    return VendorStore(vendor.vendor_id, chunks, vendor.manifest) if chunks else vendor


class CountingChunks:
    """A chunk collection that records the `where` of every read."""

    def __init__(self, chunks) -> None:
        self._chunks = chunks
        self.reads: list[dict | None] = []

    def __getattr__(self, name):
        return getattr(self._chunks, name)

    def get(self, *args, **kwargs):
        self.reads.append(kwargs.get("where"))
        return self._chunks.get(*args, **kwargs)


def asked(bench: Workbench, where: dict) -> dict:
    """The filter as the vendor's collection is asked it (on its scoped keys)."""
    return chroma_where(bench.store.open_vendor("acme").scope_filter(where))


def test_a_sync_with_nothing_to_do_reads_only_the_followups_and_writes_nothing(acme):
    first = index_at(acme, "acme").sync()
    assert first.rebuilt and first.versions_added == len(DOCUMENTS)
    assert first.chunks_added == len(DOCUMENTS) + 2 and first.followups_added == 2
    path = index_path(acme.settings, "acme")
    before = path.stat().st_mtime_ns, path.stat().st_size
    counting = CountingChunks(acme.store.open_vendor("acme").chunks)
    again = index_at(acme, "acme", chunks=counting).sync()
    assert not again.changed
    assert counting.reads == [asked(acme, {"source_type": FOLLOWUP_SOURCE_TYPE})]
    assert (path.stat().st_mtime_ns, path.stat().st_size) == before


def test_a_new_document_is_added_alone(acme, tmp_path):
    index_at(acme, "acme").sync()
    acme.ingest_documents("acme", [write(tmp_path / "more", {"vpn.md": "The VPN uses WireGuard."})])
    counting = CountingChunks(acme.store.open_vendor("acme").chunks)
    report = index_at(acme, "acme", chunks=counting).sync()
    assert (report.versions_added, report.chunks_added, report.chunks_removed) == (1, 1, 0)
    key = document_key("vpn.md", "tc_files", None)
    version = committed_versions(read_manifest(acme.store.open_vendor("acme")))[key]
    assert counting.reads == [asked(acme, where) for where in (  # the first look, then
        {"source_type": FOLLOWUP_SOURCE_TYPE},                     # under the write lock
        {"$and": [{"source_type": "document"}, {"doc_key": {"$in": [key]}},
                  {"doc_sha": {"$in": [version]}}]},
        {"source_type": FOLLOWUP_SOURCE_TYPE})]
    assert sources(index_at(acme, "acme").nearest(query("WireGuard"), 5)) == ["vpn.md"]


def test_a_replaced_document_replaces_its_rows(acme, tmp_path):
    index_at(acme, "acme").sync()
    folder = write(tmp_path / "v2", {"backups.md": "Backups go to cold storage in Iceland."})
    acme.ingest_documents("acme", [folder])
    index = index_at(acme, "acme")
    report = index.sync()
    # The new version added, the old one's rows moved to its archive (kept as superseded).
    assert (report.versions_added, report.versions_removed) == (2, 1)
    assert (report.chunks_added, report.chunks_removed) == (2, 1)
    key = document_key("backups.md", "tc_files", None)
    [old] = index.nearest(query("nightly drill"), 5)
    assert old.chunk.metadata["doc_key"] != key
    [new] = index.nearest(query("Iceland"), 5)
    assert (new.chunk.metadata["source"], new.chunk.metadata["doc_key"]) == ("backups.md", key)
    manifest = committed_versions(read_manifest(acme.store.open_vendor("acme")))
    state = index.indexed()
    assert state.versions == set(manifest.items())
    assert state.chunks == len(DOCUMENTS) + 3


def test_a_resent_round_with_new_answers_replaces_the_old_answers(acme):
    index = index_at(acme, "acme")
    index.sync()
    assert len(index.nearest(query("KMS"), 5)) == 1
    acme.ingest_questionnaire(followup_round("acme", 1, "Yes, AES-256 with keys in an HSM."))
    report = index_at(acme, "acme").sync()
    assert (report.followups_added, report.followups_removed) == (1, 0)
    assert (report.chunks_added, report.chunks_removed) == (1, 1)
    index = index_at(acme, "acme")
    assert index.nearest(query("KMS"), 5) == []
    [hit] = index.nearest(query("HSM"), 5)
    assert hit.chunk.metadata["answer_text"] == "Yes, AES-256 with keys in an HSM."
    assert index.indexed().chunks == len(DOCUMENTS) + 2


class FirstReadFrom:
    """A chunk collection whose first read answers from an earlier snapshot, as a read that
    ran just before another process's write would."""

    def __init__(self, chunks, snapshot: dict) -> None:
        self._chunks = chunks
        self._snapshot = snapshot

    def __getattr__(self, name):
        return getattr(self._chunks, name)

    def get(self, *args, **kwargs):
        if self._snapshot is not None:
            snapshot, self._snapshot = self._snapshot, None
            return snapshot
        return self._chunks.get(*args, **kwargs)


def test_a_sync_that_read_the_followups_before_a_resend_never_puts_old_answers_back(acme):
    chunks = acme.store.open_vendor("acme").chunks
    before = chunks.get(where={"source_type": FOLLOWUP_SOURCE_TYPE},
                        include=["documents", "metadatas"], limit=5000, offset=0)
    acme.ingest_questionnaire(followup_round("acme", 1, "Yes, AES-256 with keys in an HSM."))
    index_at(acme, "acme").sync()  # another process indexed the new answers

    late = index_at(acme, "acme", chunks=FirstReadFrom(chunks, before))
    assert not late.sync().changed  # its first look was old; under the lock it read again
    assert late.nearest(query("KMS"), 5) == []
    assert len(late.nearest(query("HSM"), 5)) == 1


def replace_backups_killed_at(bench: Workbench, tmp_path: Path, monkeypatch,
                              step: str) -> Path:
    """A new version of backups.md ingested, killed when the writer calls `step`; its
    folder, to ingest again."""

    def killed(*args, **kwargs):
        raise KeyboardInterrupt(f"killed at {step}")

    monkeypatch.setattr(f"core.ingest.writer.{step}", killed)
    folder = write(tmp_path / "v2", {"backups.md": "Backups go to cold storage in Iceland."})
    with pytest.raises(KeyboardInterrupt):
        bench.ingest_documents("acme", [folder])
    return folder


def test_an_ingest_killed_before_its_commit_leaves_the_index_on_the_old_version(
        acme, tmp_path, monkeypatch):
    index_at(acme, "acme").sync()

    folder = replace_backups_killed_at(acme, tmp_path, monkeypatch, "commit_document")
    vendor = acme.store.open_vendor("acme")
    key = document_key("backups.md", "tc_files", None)
    written = chunk_rows(vendor.chunks, where={"doc_key": key})["documents"]
    assert any("Iceland" in text for text in written)  # the new version's chunk is stored

    index = index_at(acme, "acme")
    assert not index.sync().changed
    assert index.nearest(query("Iceland"), 5) == []
    assert sources(index.nearest(query("nightly drill"), 5)) == ["backups.md"]
    assert index.indexed().versions == set(committed_versions(read_manifest(vendor)).items())
    trace = acme.retrieve("acme", "Where do backups go, Iceland?", "hybrid")
    assert all("Iceland" not in c.text for c in trace.first_stage)

    monkeypatch.undo()
    acme.ingest_documents("acme", [folder])  # the same ingest again completes it
    index = index_at(acme, "acme")
    index.sync()
    key = document_key("backups.md", "tc_files", None)
    assert [n.chunk.metadata["doc_key"] for n in index.nearest(query("Iceland"), 5)] == [key]
    # The old version is kept, as superseded, under its archive's key.
    [old] = index.nearest(query("nightly drill"), 5)
    assert old.chunk.metadata["doc_key"] != key
    assert index.indexed().versions == set(committed_versions(read_manifest(vendor)).items())


def test_an_ingest_killed_before_removing_the_old_version_shows_only_the_new_one(
        acme, tmp_path, monkeypatch):
    index_at(acme, "acme").sync()

    folder = replace_backups_killed_at(acme, tmp_path, monkeypatch, "delete_stale")
    index = index_at(acme, "acme")
    index.sync()
    key = document_key("backups.md", "tc_files", None)
    assert sources(index.nearest(query("Iceland"), 5)) == ["backups.md"]
    # The old chunks left under the file's own key are never shown; their copy under the
    # archive's key is, as the superseded version.
    [old] = index.nearest(query("nightly drill"), 5)
    assert old.chunk.metadata["doc_key"] != key

    monkeypatch.undo()
    acme.ingest_documents("acme", [folder])  # removes the old chunks from the store
    index = index_at(acme, "acme")
    assert index.sync().versions_removed == 1
    vendor = acme.store.open_vendor("acme")
    assert index.indexed().versions == set(committed_versions(read_manifest(vendor)).items())
    assert index.indexed().chunks == len(DOCUMENTS) + 3


def test_a_reader_with_an_older_manifest_never_takes_the_new_version_away(acme, tmp_path):
    vendor = acme.store.open_vendor("acme")
    old = committed_versions(read_manifest(vendor))
    acme.ingest_documents("acme", [write(tmp_path / "v2", {
        "backups.md": "Backups go to cold storage in Iceland."})])
    new = index_at(acme, "acme")
    new.sync()
    stale = index_at(acme, "acme", versions=old)
    stale.sync()  # the old version's chunks are gone from the store: nothing to add
    assert stale.nearest(query("Iceland"), 5) == []  # not in the state this reader saw
    assert sources(new.nearest(query("Iceland"), 5)) == ["backups.md"]
    new.sync()
    assert new.indexed().versions == set(committed_versions(read_manifest(vendor)).items())


# Settling at a manifest generation ---------------------------------------------------------

def runner_index(bench: Workbench, vendor_id: str, chunks=None,
                 generation: str | None = None) -> LexicalIndex:
    """The vendor's index as a retrieval makes it: at the committed state, with the manifest
    generation it was read at and the links' fingerprints of the responses."""
    vendor = bench.store.open_vendor(vendor_id)
    read_generation, versions = bench.runner.committed_state(vendor)
    generation = generation or read_generation
    return LexicalIndex(index_path(bench.settings, vendor_id), with_chunks(vendor, chunks),
                        versions, generation=generation,
                        expected_followups=lambda: bench.runner.links.read(
                            vendor, read_generation).fingerprints)


def test_at_the_generation_it_settled_at_a_sync_reads_nothing_from_the_store(acme):
    assert runner_index(acme, "acme").sync().rebuilt
    counting = CountingChunks(acme.store.open_vendor("acme").chunks)
    assert not runner_index(acme, "acme", chunks=counting).sync().changed
    assert counting.reads == []
    # A caller at another generation reads the store, as before.
    assert not runner_index(acme, "acme", chunks=counting, generation="other").sync().changed
    assert counting.reads == [asked(acme, {"source_type": FOLLOWUP_SOURCE_TYPE})]


def test_a_sync_between_a_rounds_links_and_its_responses_does_not_settle(acme, monkeypatch):
    """A hybrid retrieval running after a round's links (and new generation) were written
    and before its responses were reads the old answers. The generation does not change
    again when the responses land, so the index must not have settled at it: the next
    retrieval reads the store and finds the new answer by its words."""
    acme.retrieve("acme", AES_CRITERION, "hybrid")
    during = []
    upsert = acme.store.upsert

    def retrieving_first(collection, records, embeddings):
        if records[0].metadata["source_type"] == FOLLOWUP_SOURCE_TYPE:
            during.append(acme.retrieve("acme", "Are keys kept in an HSM?", "hybrid"))
        return upsert(collection, records, embeddings)

    monkeypatch.setattr(acme.store, "upsert", retrieving_first)
    acme.ingest_questionnaire(followup_round("acme", 1, "Yes, AES-256 with keys in an HSM."))
    [trace] = during
    answers = {c.metadata["answer_text"] for c in trace.first_stage if c.is_followup}
    assert "Yes, AES-256 via a KMS." in answers and not any("HSM." in a for a in answers)

    trace = acme.retrieve("acme", "Are keys kept in an HSM?", "hybrid")
    [hit] = [c for c in trace.first_stage
             if c.is_followup and c.metadata["answer_text"].endswith("in an HSM.")]
    assert hit.lexical_rank is not None


def test_a_retrieval_removes_a_replaced_version_once_its_chunks_leave_the_store(
        acme, tmp_path, monkeypatch):
    """An ingest killed before the old version's chunks were deleted; the same ingest again
    deletes them without a new manifest generation. The index kept the old rows while the
    store held them, so it had not settled: the next hybrid retrieval removes them."""
    acme.retrieve("acme", AES_CRITERION, "hybrid")

    folder = replace_backups_killed_at(acme, tmp_path, monkeypatch, "delete_stale")
    acme.retrieve("acme", "Where do backups go, Iceland?", "hybrid")
    vendor = acme.store.open_vendor("acme")
    committed = set(committed_versions(read_manifest(vendor)).items())
    path = index_path(acme.settings, "acme")
    assert LexicalIndex(path, vendor, {}).indexed().versions > committed

    monkeypatch.undo()
    acme.ingest_documents("acme", [folder])  # unchanged: only the clean-up runs
    trace = acme.retrieve("acme", "Where do backups go, Iceland?", "hybrid")
    assert any(c.source == "backups.md" and c.lexical_rank for c in trace.first_stage)
    assert LexicalIndex(path, vendor, {}).indexed().versions == committed
    # Every document, the new version of backups.md and its old version kept as superseded,
    # and the two answers.
    assert LexicalIndex(path, vendor, {}).indexed().chunks == len(DOCUMENTS) + 3


def test_an_index_of_another_store_is_rebuilt(tmp_path):
    shared = tmp_path / "shared-lexical"
    benches = []
    for name, text in (("one", "Tokens expire after an hour."),
                       ("two", "Sessions expire after a day.")):
        bench = Workbench(Settings(store=tmp_path / name, lexical_dir=shared,
                                   reranker_cache_dir=tmp_path / "no-models"),
                          embedder=FakeEmbedder())
        bench.ingest_documents("acme", [write(tmp_path / f"docs-{name}", {"t.md": text})])
        benches.append(bench)
    one, two = (index_at(b, "acme") for b in benches)
    assert one.path == two.path == shared / "acme.sqlite3"
    one.sync()
    report = two.sync()
    assert report.rebuilt and report.chunks_added == 1
    assert two.nearest(query("tokens"), 5) == []
    assert len(two.nearest(query("sessions"), 5)) == 1


def test_an_index_of_another_schema_is_rebuilt(acme):
    index = index_at(acme, "acme")
    index.sync()
    with sqlite3.connect(index.path) as db:
        db.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
        db.execute("CREATE TABLE leftover (x)")
    report = index_at(acme, "acme").sync()
    assert report.rebuilt and report.chunks_added == len(DOCUMENTS) + 2
    assert sources(index_at(acme, "acme").nearest(query("xz backdoor"), 5)) == ["advisory.md"]


def test_an_index_that_cannot_be_written_is_one_store_error(acme, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    vendor = acme.store.open_vendor("acme")
    index = LexicalIndex(blocker / "acme.sqlite3", vendor, {})
    with pytest.raises(StoreError, match="lexical index .* cannot be opened"):
        index.sync()


def test_the_store_still_opens_with_its_lexical_folder_inside(acme, tmp_path):
    acme.retrieve("acme", AES_CRITERION, "hybrid")
    assert (acme.settings.store / "lexical" / "acme.sqlite3").exists()
    again = Workbench(acme.settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    assert [s.vendor_id for s in again.status()] == ["acme"]
    again.ingest_documents("acme", [write(tmp_path / "more", {"vpn.md": "WireGuard VPN."})])
    trace = again.retrieve("acme", "Which VPN, WireGuard?", "hybrid")
    assert any(c.source == "vpn.md" and c.lexical_rank == 1 for c in trace.first_stage)


# One index per vendor ---------------------------------------------------------------------------

def test_a_word_only_in_another_vendors_documents_never_comes_back(workbench, tmp_path):
    workbench.ingest_documents("acme", [write(tmp_path / "acme", DOCUMENTS)])
    workbench.ingest_documents("globex", [write(tmp_path / "globex", {
        "secrets.md": "Globex keeps its Zanzibar vault keys offline."})])
    workbench.ingest_questionnaire(followup_round("globex", 1, "Zanzibar holds the keys."))

    acme_index, globex_index = index_at(workbench, "acme"), index_at(workbench, "globex")
    assert acme_index.path != globex_index.path
    assert acme_index.nearest(query("Zanzibar vault"), 100) == []
    assert len(globex_index.nearest(query("Zanzibar vault"), 100)) == 2

    criterion = "Where does the vendor keep its Zanzibar vault keys?"
    trace = workbench.retrieve("acme", criterion, "hybrid")
    acme_ids = set(workbench.store.open_vendor("acme").chunks.get()["ids"])
    assert trace.first_stage and {c.id for c in trace.first_stage} <= acme_ids
    assert all(c.lexical_rank is None or "Zanzibar" not in c.text for c in trace.first_stage)
    dumped = json.dumps(trace.to_json_dict())
    assert "Globex" not in dumped and "holds the keys" not in dumped


# Where the files live ---------------------------------------------------------------------------

def test_the_index_lives_beside_an_embedded_store(tmp_path):
    assert lexical_folder(Settings(store=tmp_path / "s")) == tmp_path / "s" / "lexical"
    assert index_path(Settings(store=tmp_path / "s"), "acme") == (
        tmp_path / "s" / "lexical" / "acme.sqlite3")


def test_lexical_dir_wins_wherever_the_store_is(tmp_path):
    for settings in (Settings(store=tmp_path / "s", lexical_dir=tmp_path / "lex"),
                     Settings(chroma_host="db.example", lexical_dir=tmp_path / "lex")):
        assert lexical_folder(settings) == tmp_path / "lex"


def test_a_servers_index_lives_in_a_folder_of_its_own_under_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cache = tmp_path / "home" / ".cache" / "evidence-workbench" / "lexical"
    assert lexical_folder(Settings(chroma_host="db.example", chroma_port=8001)) == (
        cache / "db.example-8001")
    assert lexical_folder(Settings(chroma_host="::1", chroma_port=8000)) == cache / "__1-8000"


# Several at once --------------------------------------------------------------------------------

def assert_intact(path: Path, expected_ids: set[str]) -> None:
    with sqlite3.connect(path) as db:
        ids = [i for (i,) in db.execute("SELECT id FROM chunks")]
        texts = db.execute("SELECT count(*) FROM chunk_text").fetchone()[0]
        db.execute("INSERT INTO chunk_text (chunk_text) VALUES ('integrity-check')")
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert len(ids) == len(set(ids)) == texts
    assert set(ids) == expected_ids


def committed_ids(bench: Workbench, vendor_id: str) -> set[str]:
    vendor = bench.store.open_vendor(vendor_id)
    versions = committed_versions(read_manifest(vendor))
    found = vendor.chunks.get(include=["metadatas"])
    return {i for i, m in zip(found["ids"], found["metadatas"], strict=True)
            if m["source_type"] == FOLLOWUP_SOURCE_TYPE
            or versions.get(m["doc_key"]) == m["doc_sha"]}


def test_threads_syncing_and_querying_while_documents_change(acme, tmp_path):
    failures: list[BaseException] = []
    start = threading.Barrier(5)

    def reader() -> None:
        try:
            start.wait()
            for _ in range(8):
                index = index_at(acme, "acme")
                index.sync()
                for found in (index.nearest(query("backups nightly Iceland"), 20),
                              index.nearest(query("AES-256"), 20)):
                    assert len({n.chunk.id for n in found}) == len(found)
        except BaseException as exc:  # noqa: BLE001 (reported by the main thread)
            failures.append(exc)

    def writer() -> None:
        try:
            start.wait()
            for n in range(4):
                acme.ingest_documents("acme", [write(tmp_path / f"w{n}", {
                    "backups.md": f"Backups go to cold storage, edition {n}, in Iceland."})])
                acme.ingest_questionnaire(followup_round("acme", 1, f"Yes, edition {n}."))
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    threads.append(threading.Thread(target=writer))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    index = index_at(acme, "acme")
    index.sync()
    assert_intact(index.path, committed_ids(acme, "acme"))
    found = index.nearest(query("edition"), 5, where={"source_type": "document"})
    key = document_key("backups.md", "tc_files", None)
    [current] = [n.chunk.text for n in found if n.chunk.metadata["doc_key"] == key]
    assert "edition 3" in current
    # Editions 0 to 2 are kept, each as a superseded version of its own.
    assert sorted(n.chunk.text for n in found if n.chunk.metadata["doc_key"] != key) == [
        f"Backups go to cold storage, edition {n}, in Iceland." for n in range(3)]


SYNC_IN_A_PROCESS = """
import sys
from pathlib import Path
import numpy as np
from core.config import Settings
from core.retrieval.lexical import LexicalIndex, index_path
from core.retrieval.lexical.connections import IDLE, IdleConnections
from core.retrieval.source import Query
from core.store import EvidenceStore, committed_versions
from tests.support.store import chunk_rows, read_manifest
settings = Settings(store=Path(sys.argv[1]))
vendor = EvidenceStore(settings).open_vendor("acme")
for _ in range(5):
    index = LexicalIndex(index_path(settings, "acme"), vendor,
                         committed_versions(read_manifest(vendor)))
    index.sync()
    found = index.nearest(Query("AES-256", "0" * 16, np.zeros(4, np.float32)), 10)
    assert found, "nothing found"
print("ok")
"""


def test_processes_building_one_index_at_once(acme):
    processes = [subprocess.Popen([sys.executable, "-c", SYNC_IN_A_PROCESS,
                                   str(acme.settings.store)], cwd=REPO, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(3)]
    results = [p.communicate(timeout=300) for p in processes]
    assert [p.returncode for p in processes] == [0, 0, 0], [err for _, err in results]
    assert all(out.strip() == "ok" for out, _ in results)
    assert_intact(index_path(acme.settings, "acme"), committed_ids(acme, "acme"))


# A ChromaDB server ------------------------------------------------------------------------------

@pytest.mark.server
def test_the_hybrid_strategy_on_a_chromadb_server(tmp_path, monkeypatch):
    from tests.chroma_server import ChromaServer
    from tests.test_fusion import CVE_CRITERION, write_cve_corpus

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    server = ChromaServer(tmp_path / "server" / "store")
    try:
        settings = Settings(chroma_host="127.0.0.1", chroma_port=server.port,
                            store=tmp_path / "no-embedded-store",
                            reranker_cache_dir=tmp_path / "no-models",
                            top_first_stage_n=10, lexical_first_stage_n=10)
        bench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
        write_cve_corpus(tmp_path / "docs")
        bench.ingest_documents("acme", [tmp_path / "docs"])
        bench.ingest_questionnaire(followup_round("acme", 1, "Yes, AES-256 via a KMS."))

        trace = bench.retrieve("acme", CVE_CRITERION, "hybrid")
        [found] = [c for c in trace.first_stage if c.source == "advisory.md"]
        assert (found.vector_rank, found.lexical_rank, found.fused_score) == (None, 1, 1 / 61)
        path = (tmp_path / "home" / ".cache" / "evidence-workbench" / "lexical"
                / f"127.0.0.1-{server.port}" / "acme.sqlite3")
        assert path.exists() and not settings.store.exists()

        write(tmp_path / "docs", {"advisory.md": "Advisory: CVE-2024-3094 closed in xz 5.6.2."})
        bench.ingest_documents("acme", [tmp_path / "docs" / "advisory.md"])
        index = index_at(bench, "acme")
        report = index.sync()
        # The new version, and the old one moved to its archive (kept as superseded).
        assert (report.versions_added, report.versions_removed) == (2, 1)
        [hit, kept] = index.nearest(query("CVE-2024-3094"), 10)
        assert "5.6.2" in hit.chunk.text and "5.6.2" not in kept.chunk.text
        assert_intact(path, committed_ids(bench, "acme"))
    finally:
        server.stop()


def test_retrievals_share_one_kept_connection_left_outside_any_transaction(acme,
                                                                           monkeypatch):
    IDLE.close_all()
    path = index_path(acme.settings, "acme")
    opened: list[sqlite3.Connection] = []
    real_connect = sqlite3.connect

    def connect(where, *args, **kwargs):
        db = real_connect(where, *args, **kwargs)
        if str(where) == str(path):
            opened.append(db)
        return db

    monkeypatch.setattr(sqlite3, "connect", connect)
    for question in ("How are backups protected?", "Is data encrypted at rest?"):
        trace = acme.retrieve("acme", question, "hybrid")
        assert trace.first_stage and any(c.lexical_rank for c in trace.first_stage)
        # The retrieval is done with it: kept for the next one, no read transaction open.
        assert IDLE.count(path) >= 1
        assert opened and not any(db.in_transaction for db in opened)
    assert len(opened) <= 2  # the second retrieval opened nothing new (its search thread may)
    opened_before = len(opened)
    acme.retrieve("acme", "Who reviews access rights?", "hybrid")
    assert len(opened) == opened_before


def test_a_kept_connection_to_a_file_made_again_is_not_given_out(acme, tmp_path):
    IDLE.close_all()
    path = index_path(acme.settings, "acme")
    acme.retrieve("acme", "How are backups protected?", "hybrid")
    assert IDLE.count(path) >= 1
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    # The index is made again from the store; the connection to the deleted file is closed.
    trace = acme.retrieve("acme", "How are backups protected?", "hybrid")
    assert path.exists() and any(c.lexical_rank for c in trace.first_stage)
    assert IDLE.count(path) >= 1


def test_one_index_searched_from_several_threads_at_once_answers_each_whole(acme):
    index = index_at(acme, "acme")
    expected = [n.chunk.id for n in index.nearest(query("backups encrypted"), 5)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        found = list(pool.map(lambda _: [n.chunk.id for n in index.nearest(
            query("backups encrypted"), 5)], range(40)))
    index.close()
    assert expected and all(ids == expected for ids in found)


def test_committed_ids_answers_as_the_rows_the_index_holds(acme):
    """Ids of a committed version's chunks are told apart by their names, the rest by the
    index's rows: both give what the rows say."""
    index = index_at(acme, "acme")
    index.sync()
    vendor = acme.store.open_vendor("acme")
    rows = chunk_rows(vendor.chunks)
    chunk_ids = [i for i, m in zip(rows["ids"], rows["metadatas"], strict=True)
                 if m.get("source_type") != FOLLOWUP_SOURCE_TYPE]
    followup_ids = [i for i, m in zip(rows["ids"], rows["metadatas"], strict=True)
                    if m.get("source_type") == FOLLOWUP_SOURCE_TYPE]
    assert chunk_ids and followup_ids and all(i.startswith("doc-") for i in chunk_ids)
    doc_key, version, _ = chunk_ids[0][len("doc-"):].rsplit("-", 2)
    other_version = f"doc-{doc_key}-{'0' * len(version)}-0"  # a version no manifest names
    unknown = [other_version, "doc-nothing-here", "doc-", "not-a-record", f"{chunk_ids[0]}x"]
    asked = chunk_ids + followup_ids + unknown
    assert index.committed_ids(asked) == set(chunk_ids) | set(followup_ids)
    # A version the caller's state does not commit holds none of its chunks.
    older = LexicalIndex(index.path, vendor, {doc_key: "0" * len(version)})
    assert not set(older.committed_ids(chunk_ids)) & {
        i for i in chunk_ids if i.startswith(f"doc-{doc_key}-")}


def test_taking_a_kept_connection_leaves_the_other_kept_one_open(tmp_path):
    pool = IdleConnections()
    path = tmp_path / "index.sqlite3"
    first, second = sqlite3.connect(path), sqlite3.connect(path)
    pool.give(path, first)
    pool.give(path, second)
    taken = pool.take(path)
    assert taken in (first, second) and pool.count(path) == 1
    other = second if taken is first else first
    assert other.execute("SELECT 1").fetchone() == (1,)  # not closed
    assert pool.take(path) is other and pool.count(path) == 0
