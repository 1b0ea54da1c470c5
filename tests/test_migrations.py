"""Store migrations: a store written by an older schema is upgraded in place, step by step,
and a step interrupted half-way is finished by the next open."""

from __future__ import annotations

import pytest

from core.config import Settings
from core.hashing import canonical_criterion_hash
from core.models import StoredRecord
from core.store import (
    KIND_KEY,
    LINK_KIND,
    MANIFEST_GENERATION_ID,
    SCHEMA_VERSION,
    record_fingerprint,
)
from core.store.migrations import FIRST_SCHEMA_VERSION, MIGRATIONS, upgrade
from core.workbench import Workbench
from tests.conftest import AES_CRITERION, SAMPLE_DATA
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support.store import (
    VendorCollections,
    chunk_rows,
    commit_links,
    get_all,
    manifest_generation,
    read_links,
    with_texts,
)

POLICY = SAMPLE_DATA / "vendors" / "acme" / "documents" / "encryption_standard.md"
ROUND = {
    "vendor_id": "acme", "round_number": 1, "timestamp": "2024-01-10T09:00:00Z",
    "responses": [{"criterion_question_text": AES_CRITERION,
                   "question_text": "Is data at rest encrypted with AES-256?",
                   "answer_text": "Yes, AES-256 for every volume."}],
}


def fresh(settings: Settings) -> Workbench:
    return Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())


def as_version_1(settings: Settings) -> None:
    """Rewrite a current store as schema version 1 wrote it: no manifest generation record,
    version 1 in both collections."""
    vendor = fresh(settings).store.open_vendor("acme")
    vendor.manifest.delete(ids=[MANIFEST_GENERATION_ID])
    for collection in (vendor.chunks, vendor.manifest):
        collection.modify(metadata={**collection.metadata, "schema_version": 1})


@pytest.fixture
def version_1_store(settings) -> Settings:
    bench = fresh(settings)
    bench.ingest_documents("acme", [POLICY])
    bench.ingest_questionnaire(ROUND)
    as_version_1(settings)
    return settings


def recorded(settings: Settings) -> dict[str, object]:
    vendor = fresh(settings).store.client
    return {c.name: (c.metadata or {}).get("schema_version")
            for c in vendor.list_collections() if c.name.startswith("vendor__")}


def test_the_steps_are_ordered_and_lead_to_the_current_version():
    versions = [m.version for m in MIGRATIONS]
    assert versions == list(range(FIRST_SCHEMA_VERSION + 1, SCHEMA_VERSION + 1))
    assert len({m.name for m in MIGRATIONS}) == len(MIGRATIONS)


def test_step_2_records_a_manifest_generation_and_the_store_reads_as_before(
        version_1_store, settings):
    before = fresh(settings)
    vendor = before.store.client.get_collection("vendor__acme__manifest")
    assert vendor.get(ids=[MANIFEST_GENERATION_ID])["ids"] == []

    bench = fresh(settings)
    (status,) = bench.status("acme")
    assert status.documents == 1 and status.rounds == [1]
    assert set(recorded(settings).values()) == {SCHEMA_VERSION}
    assert manifest_generation(bench.store.open_vendor("acme")) is not None
    trace = bench.retrieve("acme", AES_CRITERION)
    assert [f.round_number for f in trace.followups] == [1]
    assert "encryption_standard.md" in {c.source for c in trace.evidence}


def test_step_2_interrupted_before_its_version_was_recorded_is_finished_by_the_next_open(
        version_1_store, settings):
    # The step ran (a generation exists) but the process died before either collection
    # recorded version 2.
    vendor = fresh(settings).store.client.get_collection("vendor__acme__manifest")
    vendor.upsert(ids=[MANIFEST_GENERATION_ID], metadatas=[{"generation": "kept"}],
                  embeddings=[[1.0]], documents=["manifest generation"])
    bench = fresh(settings)
    assert bench.status("acme")[0].documents == 1
    assert set(recorded(settings).values()) == {SCHEMA_VERSION}
    # Run again, the step changed nothing it had already done.
    assert manifest_generation(bench.store.open_vendor("acme")) == "kept"


def test_a_store_half_recorded_as_upgraded_is_finished(version_1_store, settings):
    """The manifest recorded version 2, the chunks collection not yet."""
    manifest = fresh(settings).store.client.get_collection("vendor__acme__manifest")
    manifest.modify(metadata={**manifest.metadata, "schema_version": 2})
    assert sorted(recorded(settings).values()) == [1, 2]
    assert fresh(settings).status("acme")[0].rounds == [1]
    assert set(recorded(settings).values()) == {SCHEMA_VERSION}


def test_upgrade_runs_only_the_steps_a_vendor_has_not_had(settings):
    bench = fresh(settings)
    bench.ingest_questionnaire(ROUND)
    assert upgrade(bench.store.open_vendor("acme")) == []


def test_a_store_written_before_conversations_existed_is_asked_not_refused(version_1_store,
                                                                           settings):
    bench = fresh(settings)
    assert bench.conversations("acme") == []
    turn = bench.ask("acme", "Is data at rest encrypted with AES-256?")
    assert [s.conversation_id for s in bench.conversations("acme")] == [turn.conversation_id]
    assert set(recorded(settings).values()) == {SCHEMA_VERSION}


# Step 3: the canonical criterion hash beside the contract's ----------------------------------

PASTED = "Does the vendor\u2019s platform encrypt data at rest using AES\u2013256?"
TYPED = "Does the vendor's platform encrypt data at rest using AES-256?"
PASTED_ROUND = {
    "vendor_id": "acme", "round_number": 2, "timestamp": "2024-02-10T09:00:00Z",
    "responses": [{"criterion_question_text": PASTED,
                   "question_text": "Which cipher protects the platform's stored data?",
                   "answer_text": "AES-256 everywhere."},
                  {"question_text": "Who is your DPO?", "answer_text": "Jane."}],
}


def followups(settings: Settings) -> dict[str, dict]:
    chunks = fresh(settings).store.client.get_collection("vendor__acme__chunks")
    found = get_all(chunks, where={"source_type": "follow_up_response"})
    return dict(zip(found["ids"], found["metadatas"], strict=True))


def as_version_2(settings: Settings) -> None:
    """Rewrite the vendor's follow-ups as schema version 2 wrote them (no canonical hash) and
    record version 2 in both collections."""
    client = fresh(settings).store.client
    chunks = client.get_collection("vendor__acme__chunks")
    found = chunks.get(where={"source_type": "follow_up_response"},
                       include=["documents", "metadatas", "embeddings"])
    chunks.delete(ids=found["ids"])
    chunks.add(ids=found["ids"], documents=found["documents"], embeddings=found["embeddings"],
               metadatas=[{k: v for k, v in m.items() if k != "criterion_canonical_hash"}
                          for m in found["metadatas"]])
    for name in ("vendor__acme__chunks", "vendor__acme__manifest"):
        collection = client.get_collection(name)
        collection.modify(metadata={**collection.metadata, "schema_version": 2})


def policy_and_two_rounds(settings: Settings) -> None:
    """A fresh store of acme: the policy, a round, and a round of pasted criteria."""
    bench = fresh(settings)
    bench.ingest_documents("acme", [POLICY])
    bench.ingest_questionnaire(ROUND)
    bench.ingest_questionnaire(PASTED_ROUND)


@pytest.fixture
def version_2_store(settings) -> Settings:
    policy_and_two_rounds(settings)
    as_version_2(settings)
    return settings


def test_step_3_adds_the_canonical_hash_and_a_pasted_criterion_links(version_2_store,
                                                                       settings):
    before = followups(settings)
    assert len(before) == 3
    assert not any("criterion_canonical_hash" in m for m in before.values())

    bench = fresh(settings)
    trace = bench.retrieve("acme", TYPED, "tiered")  # a metadata filter on the new key

    assert set(recorded(settings).values()) == {SCHEMA_VERSION}
    after = followups(settings)
    for record_id, metadata in after.items():
        linked = metadata["original_criterion_question_text"]
        if linked:
            assert metadata["criterion_canonical_hash"] == canonical_criterion_hash(linked)
        else:  # an ad-hoc question links to nothing
            assert "criterion_canonical_hash" not in metadata
        # Every other key is as it was.
        assert {k: v for k, v in metadata.items() if k != "criterion_canonical_hash"} == \
            before[record_id]
    [hit] = [h for h in trace.followups if h.hash_match]
    assert hit.round_number == 2 and hit.hash_match and hit.criterion_question_text == PASTED
    assert hit.tier_reason.startswith("hash match after typography (curly apostrophe")
    assert [h.round_number for h in bench.linked_followups("acme", TYPED)] == [2]
    assert [h.round_number for h in bench.linked_followups("acme", AES_CRITERION)] == [1]


def test_step_3_interrupted_half_way_is_finished_and_safe_to_run_again(version_2_store,
                                                                        settings):
    # The step wrote one record's key, then the process died before version 3 was recorded.
    chunks = fresh(settings).store.client.get_collection("vendor__acme__chunks")
    first = next(i for i, m in followups(settings).items()
                 if m["original_criterion_question_text"] == AES_CRITERION)
    chunks.update(ids=[first], metadatas=[{
        "criterion_canonical_hash": canonical_criterion_hash(AES_CRITERION)}])

    bench = fresh(settings)
    assert bench.status("acme")[0].rounds == [1, 2]
    finished = followups(settings)
    assert sum("criterion_canonical_hash" in m for m in finished.values()) == 2
    [step] = [m for m in MIGRATIONS if m.version == 3]
    step.upgrade(bench.store.open_vendor("acme"))
    assert followups(settings) == finished
    linked = [f for f in bench.retrieve("acme", PASTED, "tiered").followups if f.hash_match]
    assert [f.round_number for f in linked] == [2]


# Step 4: each follow-up's link as a record of the manifest ------------------------------------

def raw_collections(settings: Settings) -> VendorCollections:
    """The vendor's collections as stored, not opened (so not upgraded) by the workbench."""
    client = fresh(settings).store.client
    return VendorCollections(vendor_id="acme",
                             chunks=client.get_collection("vendor__acme__chunks"),
                             manifest=client.get_collection("vendor__acme__manifest"))


def as_version_3(settings: Settings) -> None:
    """Rewrite the store as schema version 3 wrote it: no link records in the manifest, and
    version 3 recorded in both collections."""
    vendor = raw_collections(settings)
    found = vendor.manifest.get(where={KIND_KEY: LINK_KIND}, include=[])
    vendor.manifest.delete(ids=found["ids"])
    for collection in (vendor.chunks, vendor.manifest):
        collection.modify(metadata={**collection.metadata, "schema_version": 3})


@pytest.fixture
def version_3_store(settings) -> Settings:
    policy_and_two_rounds(settings)
    as_version_3(settings)
    return settings


def stored_links(settings: Settings) -> dict[str, tuple]:
    """follow-up id -> what its stored record links to and its fingerprint, from the chunks."""
    found = with_texts(get_all(raw_collections(settings).chunks,
                               where={"source_type": "follow_up_response"},
                               include=("documents", "metadatas")))
    return {i: (m.get("criterion_question_hash"), m.get("criterion_canonical_hash"),
                m["original_criterion_question_text"],
                record_fingerprint(text, m))
            for i, text, m in zip(found["ids"], found["documents"], found["metadatas"],
                                  strict=True)}


def manifest_links(settings: Settings) -> dict[str, tuple]:
    return {i: (m.get("criterion_question_hash"), m.get("criterion_canonical_hash"),
                m["original_criterion_question_text"], m["fingerprint"])
            for i, m in read_links(raw_collections(settings)).items()}


def test_step_4_writes_every_followups_link_and_the_links_are_read_from_them(
        version_3_store, settings):
    assert manifest_links(settings) == {}
    generation = manifest_generation(raw_collections(settings))

    bench = fresh(settings)
    (status,) = bench.status("acme")
    assert status.documents == 1 and status.rounds == [1, 2]  # link records are no documents
    assert set(recorded(settings).values()) == {SCHEMA_VERSION}
    expected = stored_links(settings)
    assert len(expected) == 3 and manifest_links(settings) == expected
    # Readers that kept the links of the old generation read them again.
    assert manifest_generation(raw_collections(settings)) != generation
    [hit] = [h for h in bench.retrieve("acme", TYPED, "precedence").followups if h.hash_match]
    assert hit.round_number == 2 and hit.tier_reason.startswith("hash match after typography")
    linked = bench.retrieve("acme", AES_CRITERION, "precedence").hash_path
    assert [h.round_number for h in linked] == [1]


def test_step_4_interrupted_half_way_is_finished_and_safe_to_run_again(version_3_store,
                                                                        settings):
    # The step wrote one follow-up's link, then the process died before version 4 was recorded.
    vendor = raw_collections(settings)
    found = chunk_rows(vendor.chunks, where={"source_type": "follow_up_response"}, limit=1)
    commit_links(vendor, [StoredRecord(id=found["ids"][0], text=found["documents"][0],
                                       metadata=found["metadatas"][0])])
    assert len(manifest_links(settings)) == 1

    bench = fresh(settings)
    assert bench.status("acme")[0].rounds == [1, 2]
    finished = manifest_links(settings)
    assert finished == stored_links(settings)
    generation = manifest_generation(raw_collections(settings))
    [step] = [m for m in MIGRATIONS if m.version == 4]
    step.upgrade(raw_collections(settings))
    # Run again, the step wrote nothing: the same links, the same generation.
    assert manifest_links(settings) == finished
    assert manifest_generation(raw_collections(settings)) == generation
    assert [h.round_number for h in bench.retrieve("acme", PASTED, "precedence").followups
            if h.hash_match] == [2]


def full_text_rows(settings: Settings) -> list[str]:
    """What ChromaDB's own full-text index of documents holds, read with sqlite3 itself."""
    import sqlite3

    with sqlite3.connect(settings.store / "chroma.sqlite3") as db:
        return [row[0] for row in db.execute("SELECT string_value FROM embedding_fulltext_search")]


def test_a_chunks_text_is_kept_in_its_record_and_not_in_chromas_full_text_index(settings):
    bench = fresh(settings)
    bench.ingest_documents("acme", [POLICY])
    bench.ingest_questionnaire(ROUND)

    texts = [c.text for c in bench.store.open_vendor("acme").records()]
    assert any("AES-256 for every volume" in t for t in texts) and len(texts) > 2
    # Nothing of a chunk or an answer went to the index no reader of the project searches.
    indexed = "\n".join(full_text_rows(settings))
    assert not [t for t in texts if t and t in indexed]
    hits = bench.browse_chunks("acme", contains="aes-256")
    assert hits and all("aes-256" in h["text"].lower() for h in hits)


def seen(bench: Workbench) -> tuple:
    """What a reviewer reads of acme: a retrieval's evidence and a search of the chunks."""
    result = bench.retrieve("acme", AES_CRITERION, "precedence")
    return (result.context, [(c.id, c.text, c.source) for c in result.first_stage],
            sorted((h["id"], h["text"]) for h in bench.browse_chunks("acme", contains="AES")))


def test_records_written_with_their_text_as_a_document_read_as_before(settings):
    """A store written before chunk texts moved into the records keeps them as documents."""
    bench = fresh(settings)
    bench.ingest_documents("acme", [POLICY])
    bench.ingest_questionnaire(ROUND)
    before = seen(bench)

    chunks = raw_collections(settings).chunks
    found = chunk_rows(chunks, include=["embeddings"])
    chunks.delete(ids=found["ids"])
    chunks.add(ids=found["ids"], documents=found["documents"], embeddings=found["embeddings"],
               metadatas=found["metadatas"])
    assert full_text_rows(settings)  # the texts are ChromaDB's documents again

    assert seen(fresh(settings)) == before


def test_step_7_reads_what_each_stored_document_states_of_itself(settings):
    """A document stored before facts were read has them read from its stored chunks at the
    next open, as an ingest reads them from the file; an entry that has them is left alone."""
    from core.store.migrations import upgrade
    from core.timeline.series import FACTS_KEY

    bench = fresh(settings)
    bench.ingest_documents("acme", [POLICY])
    vendor = bench.store.open_vendor("acme")
    [(key, entry)] = vendor.documents().items()
    read_at_ingest = entry[FACTS_KEY]
    vendor.write_manifest([(key, {**entry, FACTS_KEY: None})])  # as schema 6 wrote it
    for collection in (vendor.chunks, vendor.manifest):
        collection.modify(metadata={**collection.metadata, "schema_version": 6})
    assert FACTS_KEY not in fresh(settings).store.client.get_collection(
        vendor.manifest.name).get(ids=[key])["metadatas"][0]

    assert upgrade(vendor) == ["record_document_facts"]
    [(_, upgraded)] = vendor.documents().items()
    assert upgraded[FACTS_KEY] == read_at_ingest  # the policy's version and dates, as read
    [version] = fresh(settings).catalog.document_versions("acme")
    assert (version.kind, version.version, version.reviewed_on) == ("policy", "2.3",
                                                                    "2023-05-15")
