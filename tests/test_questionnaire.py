"""The seed-003 bulk questionnaire payload: stored exactly, refused whole, idempotent, atomic."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from core.errors import UserInputError
from core.hashing import content_hash, criterion_hash
from core.ingest.rounds.payload import load_payload_file
from core.workbench import Workbench
from tests.conftest import AES_CRITERION
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support.payloads import response, round_payload
from tests.support.sentences import assert_one_sentence
from tests.support.store import chunk_rows

LINKED_QUESTION = "Please describe your encryption practices"
LINKED_ANSWER = "We use AES-256 for all data at rest with AWS KMS."
ADHOC_QUESTION = "Do you have a business continuity plan?"
ADHOC_ANSWER = "Yes, we have a BCP reviewed annually."


def seed_payload(vendor_id: str = "vendor_123", round_number: int = 2) -> dict[str, Any]:
    """The request of seed 003's Bulk Ingestion API."""
    return round_payload(round_number, [response(LINKED_QUESTION, LINKED_ANSWER, AES_CRITERION),
                                        response(ADHOC_QUESTION, ADHOC_ANSWER)],
                         vendor=vendor_id, timestamp="2024-01-15T10:30:00Z")


def records(wb: Workbench, vendor_id: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """id -> (embedded text, metadata) of every chunk stored for the vendor."""
    got = chunk_rows(wb.store.open_vendor(vendor_id).chunks)
    return {i: (doc, meta) for i, doc, meta in
            zip(got["ids"], got["documents"], got["metadatas"], strict=True)}


def snapshot(wb: Workbench) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Everything a user could observe in the store: status and every record."""
    status = [s.model_dump() for s in wb.status()]
    stored = {v: records(wb, v) for v in wb.vendor_ids()}
    return status, stored


# Valid payloads ---------------------------------------------------------------------------

def test_seed_payload_returns_seed_003_response(workbench):
    report = workbench.ingest_questionnaire(seed_payload())
    assert report.model_dump() == {
        "indexed_count": 2, "round_number": 2, "vendor_id": "vendor_123"}


def test_seed_payload_status_counts_exactly_its_responses(workbench):
    workbench.ingest_questionnaire(seed_payload())
    [status] = workbench.status()
    assert status.vendor_id == "vendor_123"
    assert status.followup_responses == 2
    assert status.rounds == [2]
    assert status.by_type == {"followup_response:2": 2}
    assert status.documents == 0
    assert status.chunks == 0
    assert status.incomplete_chunks == 0


def test_linked_response_metadata(workbench):
    workbench.ingest_questionnaire(seed_payload())
    stored = records(workbench, "vendor_123")
    assert len(stored) == 2
    [(text, meta)] = [v for v in stored.values() if v[1]["question_text"] == LINKED_QUESTION]
    assert text == f"Question: {LINKED_QUESTION} Answer: {LINKED_ANSWER}"
    assert meta["content_hash"] == content_hash(AES_CRITERION, LINKED_QUESTION)
    assert meta["criterion_question_hash"] == criterion_hash(AES_CRITERION)
    assert meta["original_criterion_question_text"] == AES_CRITERION
    assert meta["answer_text"] == LINKED_ANSWER
    assert meta["round_number"] == 2
    assert meta["timestamp"] == "2024-01-15T10:30:00Z"
    assert meta["vendor_id"] == "vendor_123"
    assert meta["type"] == "followup_response:2"


def test_ad_hoc_response_metadata_has_no_criterion_hash(workbench):
    workbench.ingest_questionnaire(seed_payload())
    stored = records(workbench, "vendor_123")
    [(text, meta)] = [v for v in stored.values() if v[1]["question_text"] == ADHOC_QUESTION]
    assert text == f"Question: {ADHOC_QUESTION} Answer: {ADHOC_ANSWER}"
    assert "criterion_question_hash" not in meta
    assert meta["original_criterion_question_text"] == ""
    assert meta["content_hash"] == content_hash(None, ADHOC_QUESTION)
    assert meta["answer_text"] == ADHOC_ANSWER
    assert meta["round_number"] == 2
    assert meta["type"] == "followup_response:2"
    assert meta["vendor_id"] == "vendor_123"


def test_omitted_criterion_is_ad_hoc(workbench):
    payload = seed_payload()
    del payload["responses"][1]["criterion_question_text"]
    workbench.ingest_questionnaire(payload)
    metas = [m for _, m in records(workbench, "vendor_123").values()]
    assert sum("criterion_question_hash" in m for m in metas) == 1


def test_payload_file_round_trip(workbench, tmp_path):
    path = tmp_path / "round_2.json"
    path.write_text(json.dumps(seed_payload()), encoding="utf-8")
    payload = load_payload_file(path)
    assert payload.vendor_id == "vendor_123"
    assert payload.round_number == 2
    assert len(payload.responses) == 2
    report = workbench.ingest_questionnaire(payload)
    assert report.indexed_count == 2
    assert workbench.status()[0].followup_responses == 2
    questions = {m["question_text"] for _, m in records(workbench, "vendor_123").values()}
    assert questions == {LINKED_QUESTION, ADHOC_QUESTION}


def test_exactly_100_responses_accepted(workbench):
    payload = seed_payload()
    payload["responses"] = [{"question_text": f"Question {i}?", "answer_text": f"Answer {i}."}
                            for i in range(100)]
    assert workbench.ingest_questionnaire(payload).indexed_count == 100
    assert workbench.status()[0].followup_responses == 100


# Refusals ---------------------------------------------------------------------------------

def _mutate(change) -> dict[str, Any]:
    payload = seed_payload()
    change(payload)
    return payload


def _set(key, value):
    return lambda p: p.update({key: value})


def _set_response(index, key, value):
    return lambda p: p["responses"][index].update({key: value})


def _pop(key):
    return lambda p: p.pop(key)


def _pop_response(index, key):
    return lambda p: p["responses"][index].pop(key)


def _append_duplicate(criterion, question):
    return lambda p: p["responses"].append(
        {"criterion_question_text": criterion, "question_text": question,
         "answer_text": "A different answer."})


def _many(n):
    return lambda p: p.update(responses=[
        {"question_text": f"Question {i}?", "answer_text": "Answer."} for i in range(n)])


REFUSALS = [
    ("missing vendor_id", _pop("vendor_id"), ["vendor_id"]),
    ("missing round_number", _pop("round_number"), ["round_number"]),
    ("missing timestamp", _pop("timestamp"), ["timestamp"]),
    ("missing responses", _pop("responses"), ["responses"]),
    ("missing question_text", _pop_response(1, "question_text"),
     ["responses[1]", "question_text"]),
    ("missing answer_text", _pop_response(0, "answer_text"), ["responses[0]", "answer_text"]),
    ("round_number string", _set("round_number", "2"), ["round_number"]),
    ("round_number boolean", _set("round_number", True), ["round_number"]),
    ("round_number float", _set("round_number", 2.5), ["round_number"]),
    ("question_text number", _set_response(1, "question_text", 5),
     ["responses[1]", "question_text"]),
    ("answer_text null", _set_response(0, "answer_text", None), ["responses[0]", "answer_text"]),
    ("criterion number", _set_response(0, "criterion_question_text", 5),
     ["responses[0]", "criterion_question_text"]),
    ("responses object", _set("responses", {"question_text": "Q"}), ["responses"]),
    ("responses string", _set("responses", "Q and A"), ["responses"]),
    ("response not an object", _set("responses", ["Q and A"]), ["responses[0]"]),
    ("empty responses", _set("responses", []), ["responses"]),
    ("101 responses", _many(101), ["responses", "101"]),
    ("duplicate pair", _append_duplicate(AES_CRITERION, LINKED_QUESTION),
     ["responses", "2", "0"]),
    ("duplicate pair by case and spacing",
     _append_duplicate(AES_CRITERION.upper(), "please  describe your ENCRYPTION practices"),
     ["responses", "2", "0"]),
    ("duplicate ad-hoc pair", _append_duplicate(None, ADHOC_QUESTION), ["responses", "2", "1"]),
    ("blank question", _set_response(1, "question_text", "   "),
     ["responses[1]", "question_text"]),
    ("empty question", _set_response(0, "question_text", ""), ["responses[0]", "question_text"]),
    ("blank answer", _set_response(1, "answer_text", "\n\t "), ["responses[1]", "answer_text"]),
    ("round_number 0", _set("round_number", 0), ["round_number"]),
    ("round_number -1", _set("round_number", -1), ["round_number"]),
    ("vendor_id with slash", _set("vendor_id", "a/b"), ["vendor_id"]),
    ("vendor_id empty", _set("vendor_id", ""), ["vendor_id"]),
    ("vendor_id 64 chars", _set("vendor_id", "a" * 64), ["vendor_id"]),
    ("vendor_id non-ascii", _set("vendor_id", "ümlaut"), ["vendor_id"]),
    ("vendor_id leading dash", _set("vendor_id", "-acme"), ["vendor_id"]),
    ("vendor_id number", _set("vendor_id", 123), ["vendor_id"]),
    ("timestamp word", _set("timestamp", "yesterday"), ["timestamp"]),
    ("timestamp impossible date", _set("timestamp", "2024-13-45"), ["timestamp"]),
    ("timestamp number", _set("timestamp", 1705314600), ["timestamp"]),
]


@pytest.mark.parametrize(("change", "names"), [r[1:] for r in REFUSALS],
                         ids=[r[0] for r in REFUSALS])
def test_refused_first_payload_creates_no_vendor(workbench, change, names):
    payload = _mutate(change)
    with pytest.raises(UserInputError) as exc:
        workbench.ingest_questionnaire(payload)
    assert_one_sentence(str(exc.value), *names)
    assert workbench.status() == []
    assert workbench.vendor_ids() == []


@pytest.mark.parametrize(("change", "names"), [r[1:] for r in REFUSALS],
                         ids=[r[0] for r in REFUSALS])
def test_refused_payload_leaves_existing_vendor_unchanged(workbench, change, names):
    workbench.ingest_questionnaire(seed_payload(round_number=1))
    before = snapshot(workbench)
    payload = _mutate(change)
    with pytest.raises(UserInputError) as exc:
        workbench.ingest_questionnaire(payload)
    assert_one_sentence(str(exc.value), *names)
    assert snapshot(workbench) == before


@pytest.mark.parametrize("data", [[seed_payload()], "payload", 2, None],
                         ids=["list", "string", "number", "null"])
def test_payload_not_an_object_refused(workbench, data):
    with pytest.raises(UserInputError) as exc:
        workbench.ingest_questionnaire(data)
    assert_one_sentence(str(exc.value), "object")
    assert workbench.status() == []


def test_file_not_json_refused(workbench, tmp_path):
    path = tmp_path / "round.json"
    path.write_text('{"vendor_id": "acme", "round_number": 2,', encoding="utf-8")
    with pytest.raises(UserInputError) as exc:
        load_payload_file(path)
    assert_one_sentence(str(exc.value), str(path), "JSON")
    assert workbench.status() == []


def test_file_not_utf8_refused(tmp_path):
    path = tmp_path / "round.json"
    path.write_bytes(b'{"vendor_id": "\xff\xfe"}')
    with pytest.raises(UserInputError) as exc:
        load_payload_file(path)
    assert_one_sentence(str(exc.value), str(path))


def test_file_missing_refused(tmp_path):
    path = tmp_path / "absent.json"
    with pytest.raises(UserInputError) as exc:
        load_payload_file(path)
    assert_one_sentence(str(exc.value), str(path))


def test_file_holding_a_list_refused(tmp_path):
    path = tmp_path / "round.json"
    path.write_text(json.dumps([seed_payload()]), encoding="utf-8")
    with pytest.raises(UserInputError) as exc:
        load_payload_file(path)
    assert_one_sentence(str(exc.value), str(path), "object")


@pytest.mark.parametrize(("change", "names"), [
    (_pop("timestamp"), ["timestamp"]),
    (_set("round_number", "2"), ["round_number"]),
    (_set_response(1, "answer_text", " "), ["responses[1]", "answer_text"]),
    (_many(101), ["responses", "101"]),
])
def test_file_with_bad_field_names_file_and_field(tmp_path, change, names):
    path = tmp_path / "round.json"
    path.write_text(json.dumps(_mutate(change)), encoding="utf-8")
    with pytest.raises(UserInputError) as exc:
        load_payload_file(path)
    assert_one_sentence(str(exc.value), str(path), *names)


# Idempotency ------------------------------------------------------------------------------

def test_same_payload_twice_does_not_duplicate(workbench):
    workbench.ingest_questionnaire(seed_payload())
    first = records(workbench, "vendor_123")
    report = workbench.ingest_questionnaire(seed_payload())
    assert report.indexed_count == 2
    assert records(workbench, "vendor_123") == first
    assert workbench.status()[0].followup_responses == 2


def test_changed_answer_replaces(workbench):
    workbench.ingest_questionnaire(seed_payload())
    changed = seed_payload()
    changed["responses"][0]["answer_text"] = "We moved to AES-256-GCM with customer managed keys."
    workbench.ingest_questionnaire(changed)
    stored = records(workbench, "vendor_123")
    assert len(stored) == 2
    assert workbench.status()[0].followup_responses == 2
    [(text, meta)] = [v for v in stored.values() if v[1]["question_text"] == LINKED_QUESTION]
    assert meta["answer_text"] == "We moved to AES-256-GCM with customer managed keys."
    assert text.endswith("Answer: We moved to AES-256-GCM with customer managed keys.")
    assert LINKED_ANSWER not in {m["answer_text"] for _, m in stored.values()}


def test_same_content_in_another_round_adds(workbench):
    workbench.ingest_questionnaire(seed_payload(round_number=2))
    workbench.ingest_questionnaire(seed_payload(round_number=3))
    [status] = workbench.status()
    assert status.followup_responses == 4
    assert status.rounds == [2, 3]
    assert status.by_type == {"followup_response:2": 2, "followup_response:3": 2}


def test_vendors_are_kept_apart(workbench):
    workbench.ingest_questionnaire(seed_payload(vendor_id="alpha"))
    workbench.ingest_questionnaire(seed_payload(vendor_id="beta"))
    assert [s.vendor_id for s in workbench.status()] == ["alpha", "beta"]
    assert {m["vendor_id"] for _, m in records(workbench, "alpha").values()} == {"alpha"}
    assert {m["vendor_id"] for _, m in records(workbench, "beta").values()} == {"beta"}


# Atomicity --------------------------------------------------------------------------------

def test_failing_embedder_writes_nothing_for_new_vendor(settings):
    failing = Workbench(settings, embedder=FakeEmbedder(fail_after_calls=0),
                        reranker=FakeReranker())
    with pytest.raises(RuntimeError):
        failing.ingest_questionnaire(seed_payload())
    assert failing.status() == []
    assert failing.vendor_ids() == []


def test_failing_embedder_leaves_existing_round_unchanged(workbench, settings):
    workbench.ingest_questionnaire(seed_payload())
    before = snapshot(workbench)
    failing = Workbench(settings, embedder=FakeEmbedder(fail_after_calls=0),
                        reranker=FakeReranker())
    changed = seed_payload()
    changed["responses"][0]["answer_text"] = "A new answer that must not be half-written."
    changed["responses"].append({"question_text": "New?", "answer_text": "Yes."})
    with pytest.raises(RuntimeError):
        failing.ingest_questionnaire(changed)
    assert snapshot(failing) == before


def test_copy_of_payload_is_not_mutated(workbench):
    payload = seed_payload()
    original = copy.deepcopy(payload)
    workbench.ingest_questionnaire(payload)
    assert payload == original
