"""The ChromaDB store: batching, telemetry, compatibility checks, and the server path."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from core.config import Settings
from core.errors import StoreError, UserInputError
from core.store import chunks_collection_name
from core.workbench import Workbench
from tests.chroma_server import ChromaServer
from tests.conftest import AES_CRITERION, SAMPLE_DATA
from tests.fakes import FakeEmbedder, FakeReranker


def _payload(vendor: str = "acme", round_number: int = 1, n: int = 3) -> dict:
    return {
        "vendor_id": vendor, "round_number": round_number, "timestamp": "2024-01-10T09:00:00Z",
        "responses": [
            {"criterion_question_text": AES_CRITERION if i == 0 else None,
             "question_text": f"Question number {i} about storage encryption",
             "answer_text": f"Answer {i}: AES-256 with managed keys."}
            for i in range(n)
        ],
    }


def test_writes_are_split_under_the_clients_max_batch_size(workbench, monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(type(workbench.store), "max_batch_size", lambda self: 7)
    original = workbench.store.upsert.__func__

    def counting_upsert(self, collection, records, embeddings):
        calls.append(len(records))
        return original(self, collection, records, embeddings)

    monkeypatch.setattr(type(workbench.store), "upsert", counting_upsert)
    doc = tmp_path / "policy.md"
    doc.write_text("\n\n".join(f"Section {i}. " + "Encryption keys rotate yearly. " * 20
                               for i in range(20)))
    report = workbench.ingest_documents("acme", [doc])
    collection = workbench.store.open_vendor("acme").chunks
    stored = collection.get(where={"source_type": "document"})["ids"]
    assert report.chunks_written == len(stored) > 7
    assert calls == [len(stored)]  # one logical write...
    # ...that reached ChromaDB as batches of at most 7
    assert collection.count() == len(stored)


def test_batches_really_reach_chromadb_in_pieces(workbench, monkeypatch, tmp_path):
    monkeypatch.setattr(type(workbench.store), "max_batch_size", lambda self: 5)
    vendor = workbench.store.open_vendor("acme", create=True, embedding_model="fake-bag-of-words")
    sizes = []
    real_upsert = type(vendor.chunks).upsert

    def spy(self, *args, **kwargs):
        sizes.append(len(kwargs["ids"]))
        return real_upsert(self, *args, **kwargs)

    monkeypatch.setattr(type(vendor.chunks), "upsert", spy)
    doc = tmp_path / "long.txt"
    doc.write_text(" ".join(f"Paragraph {i} on key management and backups." for i in range(400)))
    workbench.ingest_documents("acme", [doc])
    assert sizes and max(sizes) <= 5 and sum(sizes) > 5


def test_embedded_client_sends_no_telemetry(workbench):
    assert workbench.store.client.get_settings().anonymized_telemetry is False
    assert os.environ.get("ANONYMIZED_TELEMETRY") == "False"


def test_one_collection_pair_per_vendor(workbench):
    workbench.ingest_questionnaire(_payload("acme"))
    workbench.ingest_questionnaire(_payload("northwind"))
    names = sorted(c.name for c in workbench.store.client.list_collections())
    assert names == ["vendor__acme__chunks", "vendor__acme__manifest",
                     "vendor__northwind__chunks", "vendor__northwind__manifest"]


def test_a_store_from_another_schema_version_is_refused(settings, workbench):
    """Rewritten by another version of the workbench, then opened: each vendor is checked
    when a workbench first opens it."""
    workbench.ingest_questionnaire(_payload())
    collection = workbench.store.client.get_collection(chunks_collection_name("acme"))
    collection.modify(metadata={"vendor_id": "acme", "schema_version": 99,
                                "embedding_model": "fake-bag-of-words"})
    opened = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    with pytest.raises(StoreError, match="schema version 99"):
        opened.retrieve("acme", AES_CRITERION)


def test_a_store_indexed_with_another_model_is_refused(settings, workbench):
    workbench.ingest_questionnaire(_payload())
    other = FakeEmbedder()
    other.name = "another-model"
    with pytest.raises(UserInputError, match="fake-bag-of-words"):
        Workbench(settings, embedder=other, reranker=FakeReranker()).retrieve(
            "acme", AES_CRITERION)


def test_data_survives_a_new_process(workbench, settings):
    workbench.ingest_questionnaire(_payload())
    reopened = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    assert reopened.status()[0].followup_responses == 3
    trace = reopened.retrieve("acme", AES_CRITERION)
    assert [f.answer_text for f in trace.followups] == ["Answer 0: AES-256 with managed keys."]


@pytest.mark.server
def test_workbench_against_a_real_chromadb_server(tmp_path):
    server = ChromaServer(tmp_path / "server-data")
    try:
        settings = Settings(chroma_host="127.0.0.1", chroma_port=server.port,
                            store=tmp_path / "unused", reranker_cache_dir=tmp_path / "none")
        bench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
        assert bench.ingest_questionnaire(_payload(n=5)).indexed_count == 5
        policy = SAMPLE_DATA / "vendors/acme/documents/encryption_standard.md"
        bench.ingest_documents("acme", [policy])
        trace = bench.retrieve("acme", AES_CRITERION)
        assert [f.round_number for f in trace.followups] == [1]
        assert trace.evidence and all(e.source == "encryption_standard.md" or e.is_followup
                                      for e in trace.evidence)
        assert not (tmp_path / "unused").exists()  # nothing went to an embedded store
        assert bench.store.client.get_settings().anonymized_telemetry is False
    finally:
        server.stop()


@pytest.mark.server
@pytest.mark.model
def test_cli_against_a_real_chromadb_server(tmp_path):
    server = ChromaServer(tmp_path / "server-data")
    env = {**os.environ, "EVIDENCE_RERANKER_CACHE_DIR": str(tmp_path / "none"),
           "EVIDENCE_STORE": str(tmp_path / "unused")}
    base = [sys.executable, "-m", "core.cli", "--chroma-host", "127.0.0.1",
            "--chroma-port", str(server.port)]
    try:
        payload = SAMPLE_DATA / "vendors/acme/questionnaires/round_1.json"
        done = subprocess.run(base + ["ingest", "questionnaire", str(payload)], env=env,
                              capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["vendor_id"] == "acme"
        status = subprocess.run(base + ["status"], env=env, capture_output=True, text=True,
                                cwd=tmp_path)
        assert json.loads(status.stdout)["rounds"] == [1]
        assert not (tmp_path / "unused").exists()
    finally:
        server.stop()


def test_an_unreachable_server_is_one_clear_error(tmp_path):
    from tests.chroma_server import free_port

    settings = Settings(chroma_host="127.0.0.1", chroma_port=free_port(), store=tmp_path / "s")
    bench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    with pytest.raises(StoreError, match="Cannot open the ChromaDB server 127.0.0.1"):
        bench.status()
