"""The ChromaDB store: batching, telemetry, compatibility checks, and the server path."""

from __future__ import annotations

import json
import os

import pytest

from core.config import Settings
from core.errors import StoreError, UserInputError
from core.store import chunks_collection_name
from core.workbench import Workbench
from tests.chroma_server import ChromaServer
from tests.conftest import AES_CRITERION, SAMPLE_DATA
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support.cli import run_process
from tests.support.payloads import numbered, round_payload


def _payload(vendor: str = "acme", round_number: int = 1, n: int = 3) -> dict:
    return round_payload(round_number, numbered(
        n, "Question number {i} about storage encryption", "Answer {i}: AES-256 with managed keys.",
        criterion={0: AES_CRITERION}), vendor=vendor, timestamp="2024-01-10T09:00:00Z")


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
    # Embedded and written a step of at most the client's maximum at a time.
    assert sum(calls) == len(stored) and max(calls) == 7 and len(calls) > 1
    assert collection.count() == len(stored)


def test_a_documents_ingest_holds_two_steps_vectors_at_a_time(workbench, tmp_path):
    """However many chunks an ingest writes, the embedder is asked for at most two write
    steps' texts before they are written (the step being written and the next, embedded
    meanwhile): never the whole ingest's."""
    embedded: list[int] = []
    written: list[int] = []
    embed, upsert = workbench.embedder.embed, workbench.store.upsert

    def embedding(texts):
        embedded.append(len(texts))
        assert sum(embedded) - sum(written) <= 2 * workbench.writer.write_step()
        return embed(texts)

    def writing(collection, records, embeddings):
        written.append(len(records))
        return upsert(collection, records, embeddings)

    workbench.embedder.embed = embedding
    workbench.store.upsert = writing
    folder = tmp_path / "policies"
    folder.mkdir()
    for n in range(4):  # 4 x 400 chunks: 1,600 in one ingest, written 512 at a time
        (folder / f"policy_{n}.md").write_text("\n\n".join(
            f"Section {n}.{i}. " + f"Control {n}-{i} keeps keys rotated yearly. " * 16
            for i in range(400)))
    report = workbench.ingest_documents("acme", [folder])
    assert report.chunks_written == sum(embedded) == sum(written) == 1600
    assert workbench.writer.write_step() == 512
    assert max(written) == 512 and len(written) == 4
    assert workbench.status("acme")[0].chunks == 1600


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
                     "vendor__northwind__chunks", "vendor__northwind__manifest",
                     "workbench__vendors"]  # the store's register of vendors


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
    on_server = ("--chroma-host", "127.0.0.1", "--chroma-port", str(server.port))
    try:
        payload = SAMPLE_DATA / "vendors/acme/questionnaires/round_1.json"
        done = run_process(*on_server, "ingest", "questionnaire", payload, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["vendor_id"] == "acme"
        status = run_process(*on_server, "status", env=env, cwd=tmp_path)
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


def test_a_retrieval_on_an_unchanged_store_reads_no_links_and_lists_no_chunks(
        workbench, monkeypatch):
    """The links each follow-up's criterion is read from live in the manifest, kept per
    generation: once read, a retrieval on an unchanged store reads the generation record
    once (after the strategy ran on the state kept from the last read) besides its search,
    and no link, no listing of either collection whatever its size, and not even the linked
    responses (kept while their links fingerprint them unchanged). A new round renews the
    generation; the next retrieval reads the links once more and finds its answers."""
    from chromadb.api.models.Collection import Collection

    workbench.ingest_documents("acme", [SAMPLE_DATA / "vendors/acme/documents/"
                                        "encryption_standard.md"])
    workbench.ingest_questionnaire(_payload())
    for strategy in ("precedence", "hybrid"):  # the first ones read the links and sync
        workbench.retrieve("acme", AES_CRITERION, strategy)
    reads: list[tuple[str, str]] = []
    real_get = Collection.get

    def get(self, *args, **kwargs):
        how = ("ids" if kwargs.get("ids") is not None
               else "where" if kwargs.get("where") else "all")
        reads.append((self.name.rsplit("__", 1)[-1], how))
        return real_get(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "get", get)
    for strategy in ("precedence", "hybrid"):
        trace = workbench.retrieve("acme", AES_CRITERION, strategy)
        assert [f.round_number for f in trace.followups] == [1]
    assert reads == [("manifest", "ids")] * 2  # the generation, once after each run

    workbench.ingest_questionnaire(_payload(round_number=2))
    reads.clear()
    trace = workbench.retrieve("acme", AES_CRITERION, "precedence")
    assert [f.round_number for f in trace.followups] == [1, 2]
    assert reads.count(("manifest", "where")) == 1  # the links, read once more
    assert ("chunks", "ids") in reads  # the new round's responses
    assert ("chunks", "where") not in reads and ("chunks", "all") not in reads


def test_a_write_between_two_retrievals_is_seen_without_a_note(workbench, tmp_path):
    """A retrieval first runs on the state kept from the last one; when the store changed
    since, it runs again on the new state. The change came before it began, so its trace says
    nothing about documents changing during retrieval, and it shows the new state."""
    workbench.ingest_questionnaire(_payload())
    first = workbench.retrieve("acme", AES_CRITERION, "precedence")
    assert [f.round_number for f in first.followups] == [1]
    doc = tmp_path / "policy.md"
    doc.write_text("Data at rest is encrypted with AES-256 across every region.\n")
    workbench.ingest_documents("acme", [doc])
    workbench.ingest_questionnaire(_payload(round_number=2))
    again = workbench.retrieve("acme", AES_CRITERION, "precedence")
    assert [f.round_number for f in again.followups] == [1, 2]
    assert "policy.md" in {c.source for c in again.evidence}
    assert not any("changed during retrieval" in note for note in again.notes)


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_a_servers_write_lease_is_renewed_by_its_owner_and_taken_over_once_it_lapses(tmp_path):
    """The lock a writer holds on a ChromaDB server: a record with an expiry. Renewed, it
    keeps others out; left to lapse (its writer died with the server), the next writer takes
    it; and a renewal never makes again a record that was taken over."""
    import chromadb

    from core.store.locking import LeaseLock

    client = chromadb.PersistentClient(path=str(tmp_path / "locks"))
    clock = _Clock()
    first, second = (LeaseLock(client, "store", lease_s=10, wait_s=0, clock=clock)
                     for _ in range(2))
    assert first.try_acquire() is None
    assert second.try_acquire()["owner"] == first.owner
    clock.now += 8
    first.renew()
    clock.now += 8  # 16 s after the claim, 8 s after the renewal: still held
    assert second.try_acquire()["owner"] == first.owner
    clock.now += 3  # the renewal has lapsed
    assert second.try_acquire() is None
    first.renew()  # the old owner, back too late, changes nothing
    assert first.try_acquire()["owner"] == second.owner
    second.release()
    assert first.try_acquire() is None
