"""A programme's store: many vendors in one store. Listing them, their counts and the state the
dashboard's caches are keyed on read the store's register of vendors, so what they cost does
not grow with the number of vendors; the register stays exact through interrupted writes and
stores written before it existed; and a process that reads every vendor keeps a bounded number
of vector indexes loaded without losing a record from the vector search."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from core.config import Settings
from core.errors import UserInputError
from core.ingest.rounds.payload import parse_payload
from core.store import SCHEMA_VERSION, VendorStore
from core.store.registry import REGISTRY_COLLECTION, status_record_by_record
from core.workbench import Workbench
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support import payloads

REPO = Path(__file__).resolve().parent.parent


class CountingClient:
    """A ChromaDB client whose calls, and those of the collections it hands out, are counted
    by name (the store's reads and writes, as ChromaDB sees them); with `filters`, the
    metadata filters its vendor collections are asked are kept there too."""

    def __init__(self, target: Any, calls: Counter[str], prefix: str = "client", *,
                 filters: list[tuple[str, dict]] | None = None, name: str = "") -> None:
        self._target, self._calls, self._prefix = target, calls, prefix
        self._filters, self._name = filters, name

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(self._target, attribute)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self._calls[f"{self._prefix}.{attribute}"] += 1
            if (self._filters is not None and kwargs.get("where")
                    and self._name.startswith("vendor__")):
                self._filters.append((self._name, kwargs["where"]))
            result = value(*args, **kwargs)
            if type(result).__name__ == "Collection":
                return CountingClient(result, self._calls, "collection",
                                      filters=self._filters, name=result.name)
            return result

        return call


def payload(vendor_id: str, answers: int = 2, round_number: int = 1) -> dict[str, Any]:
    """A round of `answers` answers, each to a control criterion of its own."""
    return payloads.round_payload(round_number, [
        payloads.response(f"Control {n}?", f"Yes, control {n} is in place (round {round_number}).",
                          f"Is control {n} in place at {vendor_id}?")
        for n in range(answers)], vendor=vendor_id, timestamp="2024-03-01T09:00:00Z")


def bench_at(store: Path, **overrides: Any) -> Workbench:
    return Workbench(Settings(store=store, reranker_cache_dir=store.parent / "none",
                              **overrides), embedder=FakeEmbedder(), reranker=FakeReranker())


def add_vendors(bench: Workbench, first: int, count: int) -> None:
    for index in range(first, first + count):
        bench.ingest_questionnaire(payload(f"vendor-{index:04d}"))


def counted(bench: Workbench, read: Any) -> Counter[str]:
    """The store calls `read()` makes, in a fresh workbench on the same store."""
    calls: Counter[str] = Counter()
    fresh = bench_at(bench.settings.store)
    fresh.store._client = CountingClient(fresh.store.client, calls)
    read(fresh)
    return calls


def slow_status(bench: Workbench) -> list[dict]:
    """Every vendor's status counted record by record from its own collections, not read
    from the register nor from the manifest's chunk counts."""
    return [status_record_by_record(bench.store.open_vendor(v))[1].model_dump()
            for v in bench.store._listed_vendor_ids()]


def test_listing_vendors_their_status_and_the_store_state_cost_the_same_at_any_count(tmp_path):
    """At 3 vendors and at 15, `status`, `vendor_ids` and the state of every vendor make
    the same store calls (one read of the register, not one or more per vendor)."""
    bench = bench_at(tmp_path / "store")
    add_vendors(bench, 0, 3)
    reads = {"status": lambda b: b.status(), "vendor_ids": lambda b: b.vendor_ids(),
             "store_state": lambda b: b.store_state()}
    few = {name: counted(bench, read) for name, read in reads.items()}
    add_vendors(bench, 3, 12)
    many = {name: counted(bench, read) for name, read in reads.items()}
    assert many == few
    assert sum(few["status"].values()) <= 3, few["status"]
    assert [s.model_dump() for s in bench_at(bench.settings.store).status()] == slow_status(bench)
    assert len(bench.vendor_ids()) == 15


def test_the_register_follows_every_ingest_and_replacement(tmp_path):
    bench = bench_at(tmp_path / "store")
    add_vendors(bench, 0, 2)
    bench.ingest_questionnaire(payload("vendor-0000", answers=4, round_number=2))
    list(bench.ingest_questionnaires([parse_payload(payload("vendor-0001", answers=1))],
                                     replace=True))
    statuses = [s.model_dump() for s in bench_at(bench.settings.store).status()]
    assert statuses == slow_status(bench)
    assert [(s["vendor_id"], s["followup_responses"], s["rounds"]) for s in statuses] == [
        ("vendor-0000", 6, [1, 2]), ("vendor-0001", 1, [1])]


def test_a_vendor_left_pending_by_a_failed_ingest_is_read_from_its_collections(tmp_path,
                                                                               monkeypatch):
    """An ingest that fails after writing (its chunks written, ChromaDB failing at its commit)
    leaves its vendor pending in the register: status and the store state read that vendor
    itself, so neither shows the store as it was."""
    bench = bench_at(tmp_path / "store")
    add_vendors(bench, 0, 2)
    before = bench_at(bench.settings.store).store_state()
    policy = tmp_path / "policy.md"
    policy.write_text("Access reviews happen quarterly.\n", encoding="utf-8")

    def failing_commit(*_: Any) -> None:
        raise RuntimeError("ChromaDB failed at the commit")

    with monkeypatch.context() as patch:
        patch.setattr(VendorStore, "write_manifest", failing_commit)
        with pytest.raises(RuntimeError, match="failed at the commit"):
            bench_at(bench.settings.store).ingest_documents("vendor-0000", [policy])
    registered = bench_at(bench.settings.store).store.registered()
    assert registered is not None and registered["vendor-0000"].pending
    assert not registered["vendor-0001"].pending
    fresh = bench_at(bench.settings.store)
    assert [s.model_dump() for s in fresh.status()] == slow_status(bench)
    assert fresh.status()[0].incomplete_chunks > 0  # what the failed ingest left is counted
    assert fresh.store_state() == before  # nothing was committed: readers see the same
    bench_at(bench.settings.store).check("vendor-0000")  # the check records it again
    assert not bench_at(bench.settings.store).store.registered()["vendor-0000"].pending
    assert [s.model_dump() for s in bench_at(bench.settings.store).status()] == slow_status(bench)
    bench_at(bench.settings.store).ingest_documents("vendor-0000", [policy])
    after = bench_at(bench.settings.store)
    assert after.store_state() != before
    assert after.status()[0].documents == 1 and after.status()[0].incomplete_chunks == 0


def test_an_ingest_records_its_vendors_counts_without_reading_every_chunk(tmp_path,
                                                                         monkeypatch):
    """The counts an ingest records are the manifest's chunk counts, the follow-ups and the
    number of records; they equal what counting every record gives, through replaced
    documents, a replaced round's withdrawn answers and an ingest that failed at its commit."""
    from core.store.registry import read_vendor_status

    bench = bench_at(tmp_path / "store")
    policy, access = tmp_path / "policy.md", tmp_path / "access.md"
    policy.write_text("# Keys\n\nKeys rotate yearly.\n\n# Backups\n\nDaily.\n",
                      encoding="utf-8")
    access.write_text("Access reviews happen quarterly.\n", encoding="utf-8")
    bench.ingest_documents("acme", [policy, access])
    bench.ingest_questionnaire(payload("acme", answers=4))
    policy.write_text("# Keys\n\nKeys rotate monthly.\n", encoding="utf-8")
    bench.ingest_documents("acme", [policy], doc_type="followup_document", round_number=1)
    list(bench.ingest_questionnaires([parse_payload(payload("acme", answers=2))], replace=True))

    def failing_commit(*_: Any) -> None:
        raise RuntimeError("ChromaDB failed at the commit")

    access.write_text("Access reviews happen monthly, by the data owner.\n", encoding="utf-8")
    with monkeypatch.context() as patch:
        patch.setattr(VendorStore, "write_manifest", failing_commit)
        with pytest.raises(RuntimeError):
            bench_at(bench.settings.store).ingest_documents("acme", [access])

    vendor = bench_at(bench.settings.store).store.open_vendor("acme")
    every_record = status_record_by_record(vendor)
    assert every_record[1].incomplete_chunks > 0 and every_record[1].followup_responses == 2
    read: list[Any] = []
    original = VendorStore.records

    def records(self: VendorStore, where: Any = None, **kwargs: Any) -> Any:
        read.append(where)
        return original(self, where, **kwargs)

    monkeypatch.setattr(VendorStore, "records", records)
    assert read_vendor_status(vendor) == every_record
    assert read and None not in read  # the follow-ups are read, not every chunk


def test_a_store_written_before_the_register_is_read_by_listing_then_registered(tmp_path):
    bench = bench_at(tmp_path / "store")
    add_vendors(bench, 0, 3)
    expected = slow_status(bench)
    bench.store.client.delete_collection(REGISTRY_COLLECTION)  # as an older version left it
    older = bench_at(bench.settings.store)
    assert older.store.registered() is None
    assert [s.model_dump() for s in older.status()] == expected
    assert older.vendor_ids() == ["vendor-0000", "vendor-0001", "vendor-0002"]
    older.ingest_questionnaire(payload("vendor-0003"))  # the first write registers every vendor
    registered = bench_at(bench.settings.store).store.registered()
    assert sorted(registered) == ["vendor-0000", "vendor-0001", "vendor-0002", "vendor-0003"]
    assert not any(entry.pending for entry in registered.values())
    assert [s.model_dump() for s in bench_at(bench.settings.store).status()] == slow_status(bench)


def test_a_vendor_id_differing_only_in_case_is_refused_through_the_register(tmp_path):
    bench = bench_at(tmp_path / "store")
    add_vendors(bench, 0, 2)
    with pytest.raises(UserInputError, match="differs only in case from the existing vendor "
                                             "'vendor-0001'"):
        bench_at(bench.settings.store).ingest_questionnaire(payload("VENDOR-0001"))
    assert bench.vendor_ids() == ["vendor-0000", "vendor-0001"]


def test_a_process_reading_every_vendor_keeps_few_indexes_and_loses_no_record(tmp_path):
    """With at most 8 vector indexes loaded, a process that searches 24 vendors twice (each
    index evicted and loaded again) finds every answer of each vendor, each time; a fresh
    process too."""
    store = tmp_path / "store"
    bench = bench_at(store)
    for index in range(24):
        bench.ingest_questionnaire(payload(f"vendor-{index:04d}", answers=3))
        bench.ingest_questionnaire(payload(f"vendor-{index:04d}", answers=2, round_number=2))

    # ChromaDB keeps one system per store and process, made by the first client: the bound
    # is that of a fresh process reading the store.
    reader = subprocess.run([sys.executable, "-c", READ_EVERY_VENDOR, str(store)],
                            env={**os.environ, "EVIDENCE_STORE_OPEN_INDEXES": "8"}, cwd=REPO,
                            capture_output=True, text=True)
    assert reader.returncode == 0, reader.stderr
    assert json.loads(reader.stdout) == {"open_indexes": 8, "searches": 48, "short": []}


READ_EVERY_VENDOR = """
import json, sys
from pathlib import Path
from core.config import Settings
from core.workbench import Workbench
from tests.fakes import FakeEmbedder
store = Path(sys.argv[1])
bench = Workbench(Settings(store=store, reranker_cache_dir=store.parent / "none"),
                  embedder=FakeEmbedder())
short, searches = [], 0
for _ in range(2):
    for index in range(24):
        vendor = f"vendor-{index:04d}"
        trace = bench.retrieve(vendor, f"Is control 0 in place at {vendor}?", "semantic")
        searches += 1
        if len({c.id for c in trace.first_stage}) != 5:
            short.append(vendor)
print(json.dumps({"open_indexes": bench.store.client._server.hnsw_cache_size,
                  "searches": searches, "short": short}))
"""


def test_a_store_of_the_schema_before_is_upgraded_to_persist_its_indexes(tmp_path):
    """A vendor written before its indexes persisted at every write (ChromaDB's default of
    1,000 records) is upgraded on opening: both collections persist at every write, and their
    index files are whole on disk, so evicting them loses nothing."""
    store = tmp_path / "store"
    bench = bench_at(store)
    bench.ingest_questionnaire(payload("acme", answers=3))
    client = bench.store.client
    for name in ("vendor__acme__chunks", "vendor__acme__manifest"):
        collection = client.get_collection(name)
        collection.modify(configuration={"hnsw": {"sync_threshold": 1000}},
                          metadata={**collection.metadata, "schema_version": 4})
    reopened = bench_at(store, store_open_indexes=8)
    reopened.status("acme")
    for name in ("vendor__acme__chunks", "vendor__acme__manifest"):
        collection = reopened.store.client.get_collection(name)
        assert collection.configuration["hnsw"]["sync_threshold"] == 1
        assert collection.metadata["schema_version"] == SCHEMA_VERSION
    chunks = reopened.store.client.get_collection("vendor__acme__chunks")
    segment = next(path for path in store.iterdir()
                   if path.is_dir() and (path / "index_metadata.pickle").exists()
                   and (path / "data_level0.bin").stat().st_size > 0)
    assert segment.exists()
    assert chunks.count() == 3
    assert json.loads(json.dumps(reopened.status("acme")[0].model_dump()))["rounds"] == [1]


class LosingIndex:
    """A chunk collection whose vector search has lost some live records (as chroma#7758
    reports after many deletes and upserts): `get` returns them, `query` does not, until
    they are written again."""

    def __init__(self, collection: Any, lost: set[str]) -> None:
        self._collection, self.lost = collection, lost

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)

    def query(self, **kwargs: Any) -> Any:
        found = self._collection.query(**kwargs)
        for row, ids in enumerate(found["ids"]):
            keep = [i for i, record_id in enumerate(ids) if record_id not in self.lost]
            for key in ("ids", "distances", "metadatas", "documents", "embeddings"):
                if found.get(key) is not None:
                    found[key][row] = [found[key][row][i] for i in keep]
        return found

    def upsert(self, **kwargs: Any) -> Any:
        self.lost -= set(kwargs["ids"])
        return self._collection.upsert(**kwargs)


def test_check_finds_records_the_vector_search_lost_and_writes_them_again(tmp_path):
    bench = bench_at(tmp_path / "store")
    bench.ingest_questionnaire(payload("acme", answers=4))
    vendor = bench.store.open_vendor("acme")
    lost_id = sorted(vendor.record_ids())[1]
    vendor.chunks = LosingIndex(vendor.chunks, {lost_id})

    found = bench.check("acme", repair=False)
    assert not found.ok and found.search.unreachable == 1 and found.search.records == 4
    assert found.remaining == {"unreachable_by_search": 1}
    assert "does not find 1 record(s) by their own vector" in found.to_complete[0]
    assert vendor.chunks.lost == {lost_id}  # a dry run writes nothing

    mended = bench.check("acme")
    assert mended.ok and mended.repaired.written_again == 1 and mended.remaining == {}
    assert vendor.chunks.lost == set()
    assert "1 record the vector search missed written again" in mended.text()
    assert bench.check("acme", repair=False).search.unreachable == 0


def conditions(where: dict) -> list[tuple[str, list]]:
    """(key, values) of every condition of a ChromaDB filter."""
    if "$and" in where:
        return [c for part in where["$and"] for c in conditions(part)]
    [(key, value)] = where.items()
    if isinstance(value, dict):
        [(_, operand)] = value.items()
        return [(key, list(operand) if isinstance(operand, list) else [operand])]
    return [(key, [value])]


def collections_matching(store: Path, key: str, values: list) -> set[str]:
    """The names of the collections holding a record whose metadata `key` has one of `values`
    (what ChromaDB's SQL reads for that condition, store-wide)."""
    import sqlite3

    column = {str: "string_value", bool: "bool_value", int: "int_value", float: "float_value"}
    found: set[str] = set()
    with sqlite3.connect(store / "chroma.sqlite3") as db:
        for value in values:
            rows = db.execute(
                "SELECT DISTINCT c.name FROM embedding_metadata AS m "
                "JOIN embeddings AS e ON e.id = m.id JOIN segments AS s ON s.id = e.segment_id "
                f"JOIN collections AS c ON c.id = s.collection "
                f"WHERE m.key = ? AND m.{column[type(value)]} = ?", (key, value)).fetchall()
            found |= {name for (name,) in rows}
    return found


def test_every_filter_an_ingest_a_replacement_and_a_retrieve_send_reads_one_vendor(tmp_path):
    # Two vendors who send the same file and are asked the same criteria: every value a
    # filter could share between them.
    store = tmp_path / "store"
    bench = bench_at(store)
    policy = tmp_path / "policy.md"
    policy.write_text("# Access\n\nAccess is reviewed quarterly.\n", encoding="utf-8")
    for vendor in ("acme", "globex"):
        bench.ingest_documents(vendor, [policy])
        bench.ingest_questionnaire({**payload("shared"), "vendor_id": vendor})

    filters: list[tuple[str, dict]] = []
    spied = bench_at(store)
    spied.store._client = CountingClient(spied.store.client, Counter(), filters=filters)
    policy.write_text("# Access\n\nAccess is reviewed monthly.\n", encoding="utf-8")
    spied.ingest_documents("acme", [policy])
    spied.ingest_questionnaire({**payload("shared", round_number=1), "vendor_id": "acme",
                                "responses": payload("shared")["responses"][:1]})
    criterion = payload("shared")["responses"][0]["criterion_question_text"]
    for strategy in ("precedence", "tiered", "hybrid"):
        spied.retrieve("acme", criterion, strategy)
    spied.store_state("acme")

    assert filters, "the ingest, the replacement and the retrieves filter on metadata"
    for collection, where in filters:
        assert collection.startswith("vendor__acme__")
        for key, values in conditions(where):
            matching = collections_matching(store, key, values)
            assert matching <= {"vendor__acme__chunks", "vendor__acme__manifest"}, (
                f"{key} in {where} reads {sorted(matching)}")


def test_a_store_of_schema_5_gets_its_scoped_filter_keys_and_answers_the_same(tmp_path):
    from core.store.scoping import SCOPED_KEYS, SUFFIX, scoped_key

    store = tmp_path / "store"
    bench = bench_at(store)
    policy = tmp_path / "policy.md"
    policy.write_text("# Access\n\nAccess is reviewed quarterly.\n", encoding="utf-8")
    bench.ingest_documents("acme", [policy])
    bench.ingest_questionnaire(payload("acme"))
    criterion = payload("acme")["responses"][1]["criterion_question_text"]
    before = bench.retrieve("acme", criterion, "tiered")

    # As schema 5 wrote it: no scoped copies, version 5 recorded.
    client = bench.store.client
    for name in ("vendor__acme__chunks", "vendor__acme__manifest"):
        collection = client.get_collection(name)
        found = collection.get(include=["metadatas", "documents", "embeddings"])
        collection.delete(ids=found["ids"])
        collection.add(ids=found["ids"], documents=found["documents"],
                       embeddings=found["embeddings"],
                       metadatas=[{k: v for k, v in m.items() if not k.endswith(SUFFIX)}
                                  for m in found["metadatas"]])
        collection.modify(metadata={**collection.metadata, "schema_version": 5})

    reopened = bench_at(store)
    after = reopened.retrieve("acme", criterion, "tiered")
    assert [h.id for h in after.hash_path] == [h.id for h in before.hash_path]
    assert len(after.hash_path) == 1
    for name in ("vendor__acme__chunks", "vendor__acme__manifest"):
        collection = reopened.store.client.get_collection(name)
        assert collection.metadata["schema_version"] == SCHEMA_VERSION
        metadatas = collection.get(include=["metadatas"])["metadatas"]
        assert any(SCOPED_KEYS & set(m) for m in metadatas)
        for metadata in metadatas:
            assert all(scoped_key(k) in metadata for k in SCOPED_KEYS & set(metadata)), metadata
    # What readers are handed carries no scoped copy.
    vendor = reopened.store.open_vendor("acme")
    assert not any(k.endswith(SUFFIX) for c in vendor.records() for k in c.metadata)
    assert not any(k.endswith(SUFFIX) for _, m in vendor.manifest_records() for k in m)


def test_a_servers_operator_adds_the_lookup_indexes_once_and_bad_folders_change_nothing(
        tmp_path):
    import sqlite3

    import chromadb

    def lookups(folder: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "core.store.lookups", str(folder)],
                              capture_output=True, text=True, cwd=REPO)

    def indexes(database: Path) -> set[str]:
        with sqlite3.connect(database) as db:
            return {name for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' "
                "AND name LIKE 'evidence_%'")}

    # A store ChromaDB made itself, as `chroma run --path` does: without the indexes.
    served = tmp_path / "served"
    chromadb.PersistentClient(path=str(served)).get_or_create_collection("vendor__a__chunks")
    assert indexes(served / "chroma.sqlite3") == set()

    done = lookups(served)
    assert done.returncode == 0, done.stderr
    assert "added evidence_segments_by_collection, evidence_queue_by_topic" in done.stdout
    assert indexes(served / "chroma.sqlite3") == {"evidence_segments_by_collection",
                                                  "evidence_queue_by_topic"}
    again = lookups(served)
    assert again.returncode == 0 and "already there" in again.stdout

    missing = lookups(tmp_path / "nowhere")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr
    other = tmp_path / "other"
    other.mkdir()
    with sqlite3.connect(other / "chroma.sqlite3") as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    refused = lookups(other)
    assert refused.returncode == 2 and "not a ChromaDB store" in refused.stderr
    assert indexes(other / "chroma.sqlite3") == set()
