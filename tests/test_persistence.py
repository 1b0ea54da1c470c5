"""Persistence and upgrades: what one `evidence` process writes, the next one reads; the store
records its schema version, and a store of another version is refused, never misread."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from core.config import Settings
from core.errors import StoreError
from core.store import SCHEMA_VERSION, chunks_collection_name, manifest_collection_name
from core.store.registry import REGISTRY_COLLECTION
from core.workbench import Workbench
from tests.conftest import AES_CRITERION, SAMPLE_DATA
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support.cli import environment, error_message, json_lines, run_process
from tests.support.payloads import response, round_payload
from tests.support.snapshot import assert_unchanged, collections_snapshot, database_snapshot

ACME = SAMPLE_DATA / "vendors" / "acme"
REAL_MODEL = "all-MiniLM-L6-v2"


def command_env(store: Path, cwd: Path) -> dict[str, str]:
    """The environment of the command in a new process: the store given by EVIDENCE_STORE,
    no FlashRank model."""
    return environment(EVIDENCE_STORE=str(store),
                       EVIDENCE_RERANKER_CACHE_DIR=str(cwd / "no-models"))


# Data survives restarts --------------------------------------------------------------------------

@pytest.fixture
def small_sample(tmp_path) -> Path:
    """One vendor of the sample layout: a policy, a follow-up document, all five rounds."""
    root = tmp_path / "small-sample"
    vendor = root / "vendors" / "acme"
    (vendor / "documents").mkdir(parents=True)
    shutil.copy(ACME / "documents" / "encryption_standard.md", vendor / "documents")
    shutil.copytree(ACME / "followup_documents" / "round_2",
                    vendor / "followup_documents" / "round_2")
    shutil.copytree(ACME / "questionnaires", vendor / "questionnaires")
    return root


@pytest.mark.model
def test_what_one_process_ingests_the_next_ones_read(small_sample, tmp_path):
    env = command_env(tmp_path / "store", tmp_path)
    ingest = run_process("ingest", "sample", small_sample, env=env, cwd=tmp_path)
    assert ingest.returncode == 0, ingest.stderr
    written: Counter[str] = Counter()  # what the first process reported, by type
    for report in json_lines(ingest.stdout):
        if "indexed_count" in report:
            written[f"followup_response:{report['round_number']}"] += report["indexed_count"]
        else:
            written[report["type"]] += sum(d["chunks"] for d in report["documents"])
    assert sorted(written) == ["followup_document", *(f"followup_response:{n}"
                                                      for n in range(1, 6)), "tc_files"]

    status = run_process("status", env=env, cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    (shown,) = json_lines(status.stdout)
    expected = {
        "vendor_id": "acme", "documents": 2,
        "chunks": written["tc_files"] + written["followup_document"],
        "followup_responses": 28, "rounds": [1, 2, 3, 4, 5],
        "by_type": dict(sorted(written.items())),
    }
    assert {key: shown.get(key) for key in expected} == expected

    retrieve = run_process("retrieve", "--vendor", "acme", "--criterion", AES_CRITERION,
                           env=env, cwd=tmp_path)
    assert retrieve.returncode == 0, retrieve.stderr
    (trace,) = json_lines(retrieve.stdout)
    assert [f["round_number"] for f in trace["followups"]] == [3, 4, 5]
    assert {e["source"] for e in trace["evidence"]} >= {"kms_key_configuration.md"}

    # A later process finds the manifest the first one wrote: nothing to redo. (Unchanged
    # documents need no embedding, so this run does not even load the model.)
    again = run_process("ingest", "docs", "--vendor", "acme", "--type", "followup_document",
                        "--round", "2", small_sample / "vendors/acme/followup_documents/round_2",
                        env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert [(d["source"], d["status"]) for d in json_lines(again.stdout)[0]["documents"]] == [
        ("kms_key_configuration.md", "unchanged")]
    assert json_lines(run_process("status", env=env, cwd=tmp_path).stdout) == json_lines(
        status.stdout)
    assert not (tmp_path / ".evidence").exists()  # EVIDENCE_STORE, not the default, was used


# The schema version -----------------------------------------------------------------------------

def payload(round_number: int = 1) -> dict:
    return round_payload(round_number, [response(AES_CRITERION, "Yes, AES-256.", AES_CRITERION)],
                         timestamp="2024-01-10T09:00:00Z")


def real_model_name_fake() -> FakeEmbedder:
    """A fake embedder under the real model's name, so that a CLI run on the store it wrote
    meets no other difference than the one a test makes."""
    embedder = FakeEmbedder()
    embedder.name = REAL_MODEL
    return embedder


@pytest.fixture
def written_store(tmp_path) -> Path:
    """An embedded store holding a document and a round of vendor 'acme', as written now."""
    store = tmp_path / "store"
    bench = Workbench(Settings(store=store), embedder=real_model_name_fake(),
                      reranker=FakeReranker())
    bench.ingest_documents("acme", [ACME / "documents" / "encryption_standard.md"])
    bench.ingest_questionnaire(payload())
    return store


def collection_metadata(store: Path) -> dict[str, dict]:
    """Each collection's metadata, read by a plain ChromaDB client (not the workbench's)."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(path=str(store),
                                       settings=ChromaSettings(anonymized_telemetry=False))
    return {c.name: dict(c.metadata or {}) for c in client.list_collections()}


def set_chunks_metadata(store: Path, **changes: object) -> None:
    """Rewrite the chunk collection's metadata as another version would have left it;
    a value of None removes the key."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(path=str(store),
                                       settings=ChromaSettings(anonymized_telemetry=False))
    collection = client.get_collection(chunks_collection_name("acme"))
    metadata = {**collection.metadata, **changes}
    collection.modify(metadata={k: v for k, v in metadata.items() if v is not None})
    if "schema_version" in changes:  # as that version records it in the register of vendors
        set_registered_schema(client, changes["schema_version"])


def set_registered_schema(client, version: object) -> None:
    register = client.get_collection(REGISTRY_COLLECTION)
    entry = register.get(ids=["acme"], include=["metadatas"])["metadatas"][0]
    entry = {k: v for k, v in {**entry, "schema_version": version}.items() if v is not None}
    register.delete(ids=["acme"])  # an upsert would keep a key the entry no longer has
    register.add(ids=["acme"], metadatas=[entry], embeddings=[[1.0]], documents=["vendor acme"])


def snapshot(store: Path) -> dict:
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(path=str(store),
                                       settings=ChromaSettings(anonymized_telemetry=False))
    return {"database": database_snapshot(store), "collections": collections_snapshot(client)}


def test_a_new_store_records_its_schema_version_in_both_collections(written_store):
    metadata = collection_metadata(written_store)
    assert metadata[chunks_collection_name("acme")]["schema_version"] == SCHEMA_VERSION
    assert metadata[manifest_collection_name("acme")]["schema_version"] == SCHEMA_VERSION
    assert metadata[chunks_collection_name("acme")]["embedding_model"] == REAL_MODEL


OTHER_VERSIONS = {
    "newer": {"schema_version": SCHEMA_VERSION + 1},
    "zero": {"schema_version": 0},
    "unrecorded": {"schema_version": None},
    "as text": {"schema_version": str(SCHEMA_VERSION)},
}


@pytest.mark.parametrize("version", list(OTHER_VERSIONS))
def test_a_store_of_another_schema_version_is_refused_by_every_command(written_store,
                                                                      tmp_path, version):
    set_chunks_metadata(written_store, **OTHER_VERSIONS[version])
    before = snapshot(written_store)
    bench = Workbench(Settings(store=written_store), embedder=real_model_name_fake(),
                      reranker=FakeReranker())
    policy = ACME / "documents" / "data_retention_policy.md"
    attempts = {
        "status": lambda: bench.status(),
        "status of the vendor": lambda: bench.status("acme"),
        "retrieve": lambda: bench.retrieve("acme", AES_CRITERION),
        "ingest a round": lambda: bench.ingest_questionnaire(payload(2)),
        "ingest a document": lambda: bench.ingest_documents("acme", [policy]),
    }
    for name, attempt in attempts.items():
        with pytest.raises(StoreError, match="schema version") as raised:
            attempt()
        assert "\n" not in str(raised.value), name
    assert_unchanged(before, snapshot(written_store))


@pytest.mark.parametrize("version", ["newer", "unrecorded"])
def test_the_cli_refuses_it_in_one_line_with_exit_1(written_store, tmp_path, version):
    """Exit 1, not 2: the command and its input are right; this program cannot read the
    store, which no change to the command line fixes."""
    set_chunks_metadata(written_store, **OTHER_VERSIONS[version])
    before = snapshot(written_store)
    round_file = tmp_path / "round_2.json"
    round_file.write_text(json.dumps(payload(2)))
    commands = [
        ("status",),
        ("retrieve", "--vendor", "acme", "--criterion", AES_CRITERION),
        ("ingest", "questionnaire", str(round_file)),
        ("ingest", "docs", "--vendor", "acme", str(ACME / "documents" / "encryption_standard.md")),
    ]
    if version != "newer":
        commands = commands[:1]  # the library test above covers every command for each case
    env = command_env(written_store, tmp_path)
    for command in commands:
        done = run_process(*command, env=env, cwd=tmp_path)
        assert done.returncode == 1, (command, done.stderr)
        assert done.stdout == ""
        assert "schema version" in error_message(done.stderr), command
    assert_unchanged(before, snapshot(written_store))


def test_the_same_store_reopened_unchanged_is_read_as_before(written_store):
    """Control for the refusals: the untouched store opens, in a fresh workbench."""
    bench = Workbench(Settings(store=written_store), embedder=real_model_name_fake(),
                      reranker=FakeReranker())
    (status,) = bench.status()
    assert status.rounds == [1] and status.documents == 1
    assert [f.round_number for f in bench.retrieve("acme", AES_CRITERION).followups] == [1]


def test_a_manifest_of_another_schema_version_is_refused(written_store):
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(path=str(written_store),
                                       settings=ChromaSettings(anonymized_telemetry=False))
    manifest = client.get_collection(manifest_collection_name("acme"))
    manifest.modify(metadata={**manifest.metadata, "schema_version": SCHEMA_VERSION + 1})
    set_registered_schema(client, SCHEMA_VERSION + 1)
    bench = Workbench(Settings(store=written_store), embedder=real_model_name_fake(),
                      reranker=FakeReranker())
    with pytest.raises(StoreError, match="schema version"):
        bench.status()
