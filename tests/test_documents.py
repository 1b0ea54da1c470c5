"""Vendor documents: chunking, PDF pages, folders, re-ingest, types, refusals, atomicity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pypdf import PdfReader

from core.config import Settings
from core.errors import UserInputError
from core.ingest.writer import document_key
from core.models import StoredRecord
from core.workbench import Workbench
from tests.conftest import SAMPLE_DATA
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support.sentences import assert_one_sentence
from tests.support.store import chunk_rows

SAMPLE_PDF = SAMPLE_DATA / "vendors" / "acme" / "documents" / "soc2_type2_excerpt.pdf"
STRATEGIES = ("semantic", "hash_extraction", "doc_boost", "tiered", "precedence")


def long_text(lines: int = 60, topic: str = "encryption keys") -> str:
    """Distinct lines of about 60 characters: several chunks at chunk_size 1000."""
    return "\n".join(f"Line {i:03d}: the vendor rotates {topic} for service {i}."
                     for i in range(lines)) + "\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def chunks(wb: Workbench, vendor_id: str) -> list[dict[str, Any]]:
    """Every stored chunk as {id, text, **metadata}, in chunk order per source."""
    got = chunk_rows(wb.store.open_vendor(vendor_id).chunks)
    rows = [{"id": i, "text": doc, **meta} for i, doc, meta in
            zip(got["ids"], got["documents"], got["metadatas"], strict=True)]
    return sorted(rows, key=lambda r: (r.get("source", ""), r.get("chunk_index", -1)))


def raw_records(wb: Workbench, vendor_id: str) -> dict[str, Any]:
    got = chunk_rows(wb.store.open_vendor(vendor_id).chunks, include=["embeddings"])
    return {"ids": got["ids"], "documents": got["documents"], "metadatas": got["metadatas"],
            "embeddings": np.asarray(got["embeddings"])}


def snapshot(wb: Workbench) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    status = [s.model_dump() for s in wb.status()]
    return status, {v: chunks(wb, v) for v in wb.vendor_ids()}


# Chunking ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["policy.md", "policy.txt"])
def test_long_text_is_split_into_overlapping_chunks(workbench, tmp_path, name):
    path = write(tmp_path / name, long_text())
    report = workbench.ingest_documents("acme", [path])
    stored = chunks(workbench, "acme")
    assert len(stored) > 1
    assert report.documents[0].chunks == len(stored)
    assert report.documents[0].status == "added"
    assert report.chunks_written == len(stored)
    assert [c["chunk_index"] for c in stored] == list(range(len(stored)))
    for before, after in zip(stored, stored[1:], strict=False):
        last_line = before["text"].strip().splitlines()[-1]
        assert last_line in after["text"], "consecutive chunks do not overlap"
    every_line = long_text().strip().splitlines()
    joined = "\n".join(c["text"] for c in stored)
    assert all(line in joined for line in every_line), "text lost in chunking"


def test_chunk_metadata(workbench, tmp_path):
    path = write(tmp_path / "policy.md", long_text())
    workbench.ingest_documents("acme", [path])
    for c in chunks(workbench, "acme"):
        assert c["type"] == "tc_files"
        assert c["source"] == "policy.md"
        assert c["vendor_id"] == "acme"
        assert "page" not in c
        assert "round_number" not in c
    [status] = workbench.status()
    assert status.documents == 1
    assert status.chunks == len(chunks(workbench, "acme"))
    assert status.by_type == {"tc_files": status.chunks}
    assert status.followup_responses == 0


def test_short_text_is_one_chunk(workbench, tmp_path):
    path = write(tmp_path / "note.txt", "We encrypt backups with AES-256.\n")
    workbench.ingest_documents("acme", [path])
    assert [c["text"] for c in chunks(workbench, "acme")] == ["We encrypt backups with AES-256."]


# PDF --------------------------------------------------------------------------------------

def _unique_lines_by_page() -> dict[int, str]:
    """For every page of the sample PDF, its longest line found on no other page."""
    pages = [page.extract_text() or "" for page in PdfReader(SAMPLE_PDF).pages]
    found = {}
    for number, text in enumerate(pages, start=1):
        others = "\n".join(t for n, t in enumerate(pages, start=1) if n != number)
        lines = [ln.strip() for ln in text.splitlines()
                 if len(ln.strip()) > 30 and ln.strip() not in others]
        if lines:
            found[number] = max(lines, key=len)
    return found


def test_pdf_chunks_carry_their_real_page(workbench):
    report = workbench.ingest_documents("acme", [SAMPLE_PDF])
    assert report.documents[0].pages == len(PdfReader(SAMPLE_PDF).pages) == 8
    stored = chunks(workbench, "acme")
    assert len(stored) > 8
    assert {c["page"] for c in stored} == set(range(1, 9))
    phrases = _unique_lines_by_page()
    assert len(phrases) == 8
    for page, phrase in phrases.items():
        holding = [c for c in stored if phrase in c["text"]]
        assert holding, f"page {page} phrase {phrase!r} not in any chunk"
        assert {c["page"] for c in holding} == {page}


def test_pdf_source_is_file_name(workbench):
    workbench.ingest_documents("acme", [SAMPLE_PDF])
    assert {c["source"] for c in chunks(workbench, "acme")} == {"soc2_type2_excerpt.pdf"}


# Folders ----------------------------------------------------------------------------------

def test_folders_are_walked_recursively_and_unsupported_files_skipped(workbench, tmp_path):
    root = tmp_path / "docs"
    write(root / "a.md", "Access reviews happen quarterly.\n")
    write(root / "sub" / "b.txt", "Backups are encrypted.\n")
    write(root / "sub" / "deeper" / "c.md", "Incident response is tested annually.\n")
    write(root / "notes.odt", "not a supported format")
    (root / "sub" / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    report = workbench.ingest_documents("acme", [root])
    assert sorted(d.source for d in report.documents) == ["a.md", "sub/b.txt", "sub/deeper/c.md"]
    assert {c["source"] for c in chunks(workbench, "acme")} == {
        "a.md", "sub/b.txt", "sub/deeper/c.md"}
    assert workbench.status()[0].documents == 3


def test_explicit_unsupported_file_refused(workbench, tmp_path):
    path = write(tmp_path / "notes.odt", "text")
    with pytest.raises(UserInputError) as exc:
        workbench.ingest_documents("acme", [path])
    assert_one_sentence(str(exc.value), str(path))
    assert workbench.vendor_ids() == []


def test_folder_without_documents_refused(workbench, tmp_path):
    write(tmp_path / "docs" / "notes.odt", "text")
    with pytest.raises(UserInputError):
        workbench.ingest_documents("acme", [tmp_path / "docs"])
    assert workbench.vendor_ids() == []


# Re-ingest --------------------------------------------------------------------------------

def test_reingesting_unchanged_file_changes_nothing(workbench, tmp_path):
    path = write(tmp_path / "policy.md", long_text())
    workbench.ingest_documents("acme", [path])
    before = snapshot(workbench)
    report = workbench.ingest_documents("acme", [path])
    assert [d.status for d in report.documents] == ["unchanged"]
    assert report.chunks_written == 0
    assert snapshot(workbench) == before


def test_the_same_name_sent_again_as_a_followup_document_keeps_the_original(workbench,
                                                                          tmp_path):
    original = write(tmp_path / "docs" / "policy.md", long_text(topic="encryption keys"))
    resent = write(tmp_path / "round2" / "policy.md", long_text(topic="database passwords"))
    workbench.ingest_documents("acme", [original])
    report = workbench.ingest_documents("acme", [resent], doc_type="followup_document",
                                        round_number=2)
    assert [d.status for d in report.documents] == ["added"]
    [status] = workbench.status()
    assert status.documents == 2
    assert set(status.by_type) == {"tc_files", "followup_document"}
    texts = {c["type"]: c["text"] for c in chunks(workbench, "acme")}
    assert "encryption keys" in texts["tc_files"]
    assert "database passwords" in texts["followup_document"]


def test_changed_file_replaces_its_old_chunks(workbench, tmp_path):
    path = write(tmp_path / "policy.md", long_text(topic="encryption keys"))
    other = write(tmp_path / "other.txt", "Unrelated vendor text about badges.\n")
    workbench.ingest_documents("acme", [path, other])
    old_ids = {c["id"] for c in chunks(workbench, "acme") if c["source"] == "policy.md"}
    write(path, long_text(lines=80, topic="database passwords"))
    report = workbench.ingest_documents("acme", [path, other])
    assert {d.source: d.status for d in report.documents} == {
        "policy.md": "replaced", "other.txt": "unchanged"}
    key = document_key("policy.md", "tc_files", None)
    named = [c for c in chunks(workbench, "acme") if c["source"] == "policy.md"]
    stored = [c for c in named if c["doc_key"] == key]
    assert not old_ids & {c["id"] for c in stored}
    assert all("encryption keys" not in c["text"] for c in stored)
    assert all("database passwords" in c["text"] for c in stored)
    assert len({c["text"] for c in stored}) == len(stored)
    # The earlier version stays readable, as superseded, under its archive's key.
    earlier = [c for c in named if c["doc_key"] != key]
    assert len(earlier) == len(old_ids)
    assert all("encryption keys" in c["text"] for c in earlier)
    [before, now] = sorted((v for v in workbench.catalog.document_versions("acme")
                            if v.source == "policy.md"), key=lambda v: v.current)
    assert now.current and now.doc_key == key
    assert before.superseded_by.source == "policy.md" and before.later_version is not None
    [status] = workbench.status()
    assert status.documents == 2
    assert status.earlier_versions == 1
    assert status.chunks == len(stored) + 1
    assert status.incomplete_chunks == 0


# Types ------------------------------------------------------------------------------------

def test_followup_document_needs_round(workbench, tmp_path):
    path = write(tmp_path / "kms.md", "KMS keys use AES-256-GCM.\n")
    with pytest.raises(UserInputError) as exc:
        workbench.ingest_documents("acme", [path], doc_type="followup_document")
    assert_one_sentence(str(exc.value), "round")
    assert workbench.vendor_ids() == []


def test_followup_document_with_round(workbench, tmp_path):
    path = write(tmp_path / "kms.md", "KMS keys use AES-256-GCM.\n")
    report = workbench.ingest_documents("acme", [path], doc_type="followup_document",
                                        round_number=2)
    assert report.type == "followup_document"
    assert report.round_number == 2
    [c] = chunks(workbench, "acme")
    assert c["type"] == "followup_document"
    assert c["round_number"] == 2
    assert workbench.status()[0].by_type == {"followup_document": 1}
    assert workbench.status()[0].rounds == []


@pytest.mark.parametrize("doc_type", ["tc_files", "soc2_summary:overview"])
def test_round_with_other_types_refused(workbench, tmp_path, doc_type):
    path = write(tmp_path / "policy.md", "Text.\n")
    with pytest.raises(UserInputError) as exc:
        workbench.ingest_documents("acme", [path], doc_type=doc_type, round_number=2)
    assert_one_sentence(str(exc.value), "round")
    assert workbench.vendor_ids() == []


def test_soc2_summary_track_accepted(workbench, tmp_path):
    path = write(tmp_path / "overview.md", "The SOC 2 report has no exceptions.\n")
    workbench.ingest_documents("acme", [path], doc_type="soc2_summary:overview")
    assert [c["type"] for c in chunks(workbench, "acme")] == ["soc2_summary:overview"]
    assert workbench.status()[0].by_type == {"soc2_summary:overview": 1}


@pytest.mark.parametrize("doc_type", ["policy", "soc2_summary:", "soc2_summary:a b",
                                      "followup_response:1", "TC_FILES", ""])
def test_bad_type_refused(workbench, tmp_path, doc_type):
    path = write(tmp_path / "policy.md", "Text.\n")
    with pytest.raises(UserInputError) as exc:
        workbench.ingest_documents("acme", [path], doc_type=doc_type)
    assert_one_sentence(str(exc.value))
    assert workbench.vendor_ids() == []


@pytest.mark.parametrize("round_number", [0, -1])
def test_round_below_one_refused(workbench, tmp_path, round_number):
    path = write(tmp_path / "kms.md", "KMS.\n")
    with pytest.raises(UserInputError):
        workbench.ingest_documents("acme", [path], doc_type="followup_document",
                                   round_number=round_number)
    assert workbench.vendor_ids() == []


@pytest.mark.parametrize("vendor_id", ["a/b", "", "a" * 64, "ümlaut", "-acme"])
def test_bad_vendor_refused(workbench, tmp_path, vendor_id):
    path = write(tmp_path / "policy.md", "Text.\n")
    with pytest.raises(UserInputError):
        workbench.ingest_documents(vendor_id, [path])
    assert workbench.vendor_ids() == []


# Refused inputs ---------------------------------------------------------------------------

def _missing(tmp_path: Path) -> list[Path]:
    return [tmp_path / "bad" / "absent.md"]


def _empty(tmp_path: Path) -> list[Path]:
    return [write(tmp_path / "bad" / "empty.md", "")]


def _blank(tmp_path: Path) -> list[Path]:
    return [write(tmp_path / "bad" / "blank.txt", "  \n\n\t\n")]


def _not_utf8(tmp_path: Path) -> list[Path]:
    path = tmp_path / "bad" / "latin1.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("Caf\u00e9 policy: data is encrypted.\n".encode("latin-1"))
    return [path]


def _nul(tmp_path: Path) -> list[Path]:
    path = tmp_path / "bad" / "nul.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"Policy text\x00\x00 with NUL bytes.\n")
    return [path]


def _fake_pdf(tmp_path: Path) -> list[Path]:
    return [write(tmp_path / "bad" / "report.pdf", "This is plain text, not a PDF.\n")]


def _corrupt_pdf(tmp_path: Path) -> list[Path]:
    path = tmp_path / "bad" / "truncated.pdf"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = SAMPLE_PDF.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return [path]


def _same_name(tmp_path: Path) -> list[Path]:
    return [write(tmp_path / "bad" / "x" / "policy.md", "Version X.\n"),
            write(tmp_path / "bad" / "y" / "policy.md", "Version Y.\n")]


def _same_name_in_folders(tmp_path: Path) -> list[Path]:
    write(tmp_path / "bad" / "x" / "policy.md", "Version X.\n")
    write(tmp_path / "bad" / "y" / "policy.md", "Version Y.\n")
    return [tmp_path / "bad" / "x", tmp_path / "bad" / "y"]


BAD_INPUTS = {
    "missing path": (_missing, "absent.md"),
    "empty file": (_empty, "empty.md"),
    "blank file": (_blank, "blank.txt"),
    "invalid utf-8": (_not_utf8, "latin1.md"),
    "NUL bytes": (_nul, "nul.md"),
    "fake pdf": (_fake_pdf, "report.pdf"),
    "corrupt pdf": (_corrupt_pdf, "truncated.pdf"),
    "same stored name": (_same_name, "policy.md"),
    "same stored name in folders": (_same_name_in_folders, "policy.md"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_refused_input_writes_nothing_for_new_vendor(workbench, tmp_path, case):
    make, name = BAD_INPUTS[case]
    good = write(tmp_path / "good" / "fine.md", long_text())
    with pytest.raises(UserInputError) as exc:
        workbench.ingest_documents("acme", [good, *make(tmp_path)])
    assert_one_sentence(str(exc.value), name)
    assert workbench.status() == []
    assert workbench.vendor_ids() == []


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_refused_input_leaves_existing_vendor_unchanged(workbench, tmp_path, case):
    make, name = BAD_INPUTS[case]
    good = write(tmp_path / "good" / "fine.md", long_text())
    workbench.ingest_documents("acme", [good])
    before = snapshot(workbench)
    write(good, long_text(topic="changed text that must not be written"))
    with pytest.raises(UserInputError) as exc:
        workbench.ingest_documents("acme", [good, *make(tmp_path)])
    assert_one_sentence(str(exc.value), name)
    assert snapshot(workbench) == before


# Atomicity --------------------------------------------------------------------------------

def _batch1_workbench(tmp_path: Path, store: Path, embedder: FakeEmbedder) -> Workbench:
    settings = Settings(store=store, reranker_cache_dir=tmp_path / "flashrank-cache",
                        embed_batch_size=1)
    return Workbench(settings, embedder=embedder, reranker=FakeReranker())


def test_embedder_failing_midway_writes_nothing(tmp_path):
    path = write(tmp_path / "policy.md", long_text(lines=150))
    embedder = FakeEmbedder(fail_after_calls=1)
    wb = _batch1_workbench(tmp_path, tmp_path / "store", embedder)
    with pytest.raises(RuntimeError):
        wb.ingest_documents("acme", [path])
    assert embedder.calls == 2, "the file should need more than one embed call"
    assert wb.status() == []
    assert wb.vendor_ids() == []


def test_embedder_failing_midway_leaves_existing_documents(workbench, tmp_path, settings):
    path = write(tmp_path / "policy.md", long_text())
    workbench.ingest_documents("acme", [path])
    before = snapshot(workbench)
    write(path, long_text(lines=150, topic="rewritten controls"))
    extra = write(tmp_path / "extra.md", long_text(topic="a new document"))
    embedder = FakeEmbedder(fail_after_calls=1)
    failing = _batch1_workbench(tmp_path, settings.store, embedder)
    with pytest.raises(RuntimeError):
        failing.ingest_documents("acme", [path, extra])
    assert embedder.calls == 2
    assert snapshot(failing) == before


# Interrupted ingest -----------------------------------------------------------------------

def _chunks_of(tmp_path: Path, name: str, paths: list[Path]) -> dict[str, Any]:
    """The chunk records an ingest of `paths` writes, made in a scratch store."""
    scratch = Workbench(Settings(store=tmp_path / name,
                                 reranker_cache_dir=tmp_path / "flashrank-cache"),
                        embedder=FakeEmbedder(), reranker=FakeReranker())
    scratch.ingest_documents("acme", paths)
    return raw_records(scratch, "acme")


def _write_chunks_only(wb: Workbench, found: dict[str, Any]) -> None:
    """What a process killed after writing chunks, before its manifest entry, leaves."""
    vendor = wb.store.open_vendor("acme", create=True, embedding_model="fake-bag-of-words")
    records = [StoredRecord(id=i, text=t, metadata=m) for i, t, m in
               zip(found["ids"], found["documents"], found["metadatas"], strict=True)]
    wb.store.upsert(vendor, records, found["embeddings"])


NEW_TOPIC = "quantum resistant lattice ciphers"
NEW_QUERY = "Does the vendor rotate quantum resistant lattice ciphers?"


def test_interrupted_replacement_keeps_old_version_until_rerun(workbench, tmp_path):
    path = write(tmp_path / "docs" / "policy.md", long_text(topic="encryption keys"))
    workbench.ingest_documents("acme", [path])
    old = chunks(workbench, "acme")
    write(path, long_text(lines=70, topic=NEW_TOPIC))
    unfinished = _chunks_of(tmp_path, "scratch", [path])
    new_ids = set(unfinished["ids"])
    assert new_ids and not new_ids & {c["id"] for c in old}
    _write_chunks_only(workbench, unfinished)

    [status] = workbench.status()
    assert status.documents == 1
    assert status.chunks == len(old)
    assert status.incomplete_chunks == len(new_ids)
    assert status.by_type == {"tc_files": len(old)}
    for strategy in STRATEGIES:
        trace = workbench.retrieve("acme", NEW_QUERY, strategy=strategy)
        seen = {c.id for c in trace.evidence} | {c.id for c in trace.first_stage}
        assert not seen & new_ids, strategy
        assert NEW_TOPIC not in trace.context, strategy

    report = workbench.ingest_documents("acme", [path])
    assert [d.status for d in report.documents] == ["replaced"]
    [status] = workbench.status()
    assert status.incomplete_chunks == 0
    assert status.chunks == len(new_ids)
    key = document_key("policy.md", "tc_files", None)
    stored = [c for c in chunks(workbench, "acme") if c["doc_key"] == key]
    assert {c["id"] for c in stored} == new_ids
    assert len({c["text"] for c in stored}) == len(stored)
    kept = [c for c in chunks(workbench, "acme") if c["doc_key"] != key]
    assert sorted(c["text"] for c in kept) == sorted(c["text"] for c in old)
    trace = workbench.retrieve("acme", NEW_QUERY, strategy="semantic")
    assert NEW_TOPIC in trace.evidence[0].text


def test_interrupted_first_ingest_is_invisible_until_rerun(workbench, tmp_path):
    existing = write(tmp_path / "docs" / "other.md", "Badges are required on site.\n")
    workbench.ingest_documents("acme", [existing])
    path = write(tmp_path / "docs" / "policy.md", long_text(topic=NEW_TOPIC))
    unfinished = _chunks_of(tmp_path, "scratch", [path])
    _write_chunks_only(workbench, unfinished)

    [status] = workbench.status()
    assert status.documents == 1
    assert status.chunks == 1
    assert status.incomplete_chunks == len(unfinished["ids"])
    trace = workbench.retrieve("acme", NEW_QUERY, strategy="semantic")
    assert [c.source for c in trace.first_stage] == ["other.md"]

    report = workbench.ingest_documents("acme", [path])
    assert [d.status for d in report.documents] == ["added"]
    [status] = workbench.status()
    assert status.documents == 2
    assert status.incomplete_chunks == 0
    assert status.chunks == len(unfinished["ids"]) + 1
    trace = workbench.retrieve("acme", NEW_QUERY, strategy="semantic")
    assert NEW_TOPIC in trace.evidence[0].text


def test_interrupted_cleanup_of_old_chunks_is_finished_by_rerun(workbench, tmp_path):
    """Killed after the manifest named the new version, before the old chunks were deleted."""
    path = write(tmp_path / "docs" / "policy.md", long_text(topic="encryption keys"))
    old = _chunks_of(tmp_path, "scratch-old", [path])
    write(path, long_text(lines=70, topic=NEW_TOPIC))
    workbench.ingest_documents("acme", [path])
    new_ids = {c["id"] for c in chunks(workbench, "acme")}
    _write_chunks_only(workbench, old)

    [status] = workbench.status()
    assert status.chunks == len(new_ids)
    assert status.incomplete_chunks == len(old["ids"])
    trace = workbench.retrieve("acme", "Does the vendor rotate encryption keys?",
                               strategy="semantic")
    assert not {c.id for c in trace.first_stage} & set(old["ids"])

    report = workbench.ingest_documents("acme", [path])
    assert [d.status for d in report.documents] == ["unchanged"]
    [status] = workbench.status()
    assert status.incomplete_chunks == 0
    assert {c["id"] for c in chunks(workbench, "acme")} == new_ids
