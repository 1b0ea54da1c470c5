"""Replacing a questionnaire round on purpose (CONTRACT.md: "`--replace` makes the round
exactly the payload(s) given in that command, removing answers absent from them in the same
atomic step; its JSON line adds `removed_count`").

Payloads of a round accumulate by default; `--replace` (`replace=True` in the library) makes
the round exactly the given files. A withdrawn answer must then never reach a reader: no
strategy's context (the hybrid one's lexical index included, even when it had settled with
the answer before), no `evidence ask` answer or follow-up, no `status` count, no chunk
browser row. The faults injected into a replacement (ChromaDB raising at each write, SIGKILL
at each write) are in tests/test_faults.py; the dashboard's checkbox in
tests/dashboard/test_page_library.py."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from core.errors import UserInputError
from core.ingest.rounds.payload import parse_payload
from core.store import WITHDRAWN_SOURCE_TYPE
from core.workbench import Workbench
from tests.conftest import SAMPLE_DATA
from tests.fakes import point_the_command_at
from tests.support.cli import error_message
from tests.support.cli import run_main as run
from tests.support.payloads import response, round_payload
from tests.support.snapshot import assert_unchanged, store_snapshot
from tests.support.store import get_all, read_links

KEY = "Does the vendor rotate its encryption keys?"
STRATEGIES = ("semantic", "hash_extraction", "doc_boost", "tiered", "precedence", "hybrid")
CONTRACT_KEYS = {"indexed_count", "round_number", "vendor_id"}

# (criterion, question, answer); each withdrawn answer carries a word found nowhere else.
KEPT = (KEY, "How often are the keys rotated?", "The keys are rotated every 90 days.")
WITHDRAWN = (KEY, "Where are the keys kept?",
             "The keys sit in a quartz vault beside the marmalade jars.")
WITHDRAWN_AD_HOC = (None, "Who holds the spare key?",
                    "The caretaker keeps the spare key in a walnut box.")
ADDED = (KEY, "Who approves a key rotation?", "The CISO approves every key rotation.")
WITHDRAWN_WORDS = ("marmalade", "walnut")
# Questions a reviewer might ask that reach the withdrawn answers by hash, meaning and words.
QUERIES = (KEY, "Are the keys kept in a quartz vault beside the marmalade jars?",
           "Does a caretaker keep the spare key in a walnut box?")


def payload(*responses: tuple, round_number: int = 2, vendor_id: str = "acme",
            timestamp: str = "2024-02-01T09:00:00Z") -> dict:
    return round_payload(round_number, [response(q, a, c) for c, q, a in responses],
                         vendor=vendor_id, timestamp=timestamp)


def many(count: int, start: int = 0) -> list[tuple]:
    return [(KEY if i % 2 else None, f"Question {i}: is control {i} in place?",
             f"Control {i} is in place.") for i in range(start, start + count)]


def answers_in_round(bench: Workbench, vendor_id: str, round_number: int) -> set[str]:
    rows = bench.browse_chunks(vendor_id, doc_type=f"followup_response:{round_number}",
                               limit=10_000)
    return {row["answer_text"] for row in rows}


def responses(bench: Workbench, vendor_id: str = "acme") -> int:
    return bench.status(vendor_id)[0].followup_responses


def write_json(folder: Path, name: str, data: dict) -> Path:
    path = folder / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# The library ---------------------------------------------------------------------------

def test_replace_makes_the_round_exactly_the_payload_and_counts_what_it_removed(workbench):
    workbench.ingest_questionnaire(payload(KEPT, WITHDRAWN, WITHDRAWN_AD_HOC))
    workbench.ingest_questionnaire(payload(KEPT, round_number=1))

    report = workbench.ingest_questionnaire(payload(KEPT, ADDED), replace=True)

    assert report.model_dump() == {"indexed_count": 2, "round_number": 2, "vendor_id": "acme",
                                   "removed_count": 2}
    assert answers_in_round(workbench, "acme", 2) == {KEPT[2], ADDED[2]}
    assert answers_in_round(workbench, "acme", 1) == {KEPT[2]}  # another round: untouched
    [status] = workbench.status("acme")
    assert (status.followup_responses, status.rounds, status.incomplete_chunks) == (3, [1, 2], 0)
    assert status.by_type == {"followup_response:1": 1, "followup_response:2": 2}
    assert {(h.round_number, h.answer_text) for h in workbench.linked_followups("acme", KEY)} == {
        (1, KEPT[2]), (2, KEPT[2]), (2, ADDED[2])}
    # Nothing of the withdrawn answers is left: no record, no marker, no link.
    vendor = workbench.store.open_vendor("acme")
    stored = get_all(vendor.chunks, include=("documents", "metadatas"))
    assert len(stored["ids"]) == 3
    assert not [m for m in stored["metadatas"] if m["source_type"] == WITHDRAWN_SOURCE_TYPE]
    assert set(read_links(vendor)) == set(stored["ids"])
    assert not any(word in json.dumps(stored) for word in WITHDRAWN_WORDS)


def test_payloads_of_a_round_accumulate_by_default(workbench):
    first = workbench.ingest_questionnaire(payload(KEPT, WITHDRAWN))
    second = workbench.ingest_questionnaire(payload(ADDED))

    assert first.model_dump() == {"indexed_count": 2, "round_number": 2, "vendor_id": "acme"}
    assert set(second.model_dump()) == CONTRACT_KEYS  # no removed_count without a replace
    assert answers_in_round(workbench, "acme", 2) == {KEPT[2], WITHDRAWN[2], ADDED[2]}


@pytest.mark.parametrize("replace", [False, True], ids=["plain", "replace"])
def test_the_same_payload_again_writes_nothing(workbench, replace):
    workbench.ingest_questionnaire(payload(KEPT, WITHDRAWN, ADDED))
    workbench.ingest_questionnaire(payload(KEPT, WITHDRAWN, ADDED), replace=replace)
    before = store_snapshot(workbench)

    report = workbench.ingest_questionnaire(payload(KEPT, WITHDRAWN, ADDED), replace=replace)

    assert report.indexed_count == 3
    assert report.removed_count == (0 if replace else None)
    assert_unchanged(before, store_snapshot(workbench))


def test_a_resent_round_rewrites_only_the_answers_that_changed(workbench, monkeypatch):
    workbench.ingest_questionnaire(payload(KEPT, WITHDRAWN, ADDED))
    written: list[list[str]] = []
    upsert = workbench.store.upsert
    monkeypatch.setattr(workbench.store, "upsert", lambda collection, records, vectors: (
        written.append([r.id for r in records]), upsert(collection, records, vectors)))
    changed = (ADDED[0], ADDED[1], "The CISO and the CTO approve every key rotation.")

    report = workbench.ingest_questionnaire(payload(KEPT, changed), replace=True)

    assert report.removed_count == 1
    [ids] = written  # one write: the changed answer and the withdrawn one's marker
    assert len(ids) == 2
    assert answers_in_round(workbench, "acme", 2) == {KEPT[2], changed[2]}


def test_several_payloads_make_one_round_of_more_than_100_answers(workbench):
    workbench.ingest_questionnaire(payload(*many(100)))
    workbench.ingest_questionnaire(payload(*many(60, start=100)))
    assert responses(workbench) == 160

    # Several payloads go to the library validated (as `load_questionnaires` returns them).
    parts = [parse_payload(payload(*many(100, start=30))),
             parse_payload(payload(*many(50, start=130)))]

    report = workbench.ingest_questionnaire(parts, replace=True)

    assert (report.indexed_count, report.removed_count) == (150, 30)
    assert answers_in_round(workbench, "acme", 2) == {a for _, _, a in many(150, start=30)}
    assert responses(workbench) == 150


def test_a_withdrawn_answer_sent_again_is_stored_again(workbench):
    workbench.ingest_questionnaire(payload(KEPT, WITHDRAWN))
    workbench.ingest_questionnaire(payload(KEPT), replace=True)
    assert answers_in_round(workbench, "acme", 2) == {KEPT[2]}

    workbench.ingest_questionnaire(payload(WITHDRAWN))

    assert answers_in_round(workbench, "acme", 2) == {KEPT[2], WITHDRAWN[2]}
    assert {h.answer_text for h in workbench.linked_followups("acme", KEY)} == {
        KEPT[2], WITHDRAWN[2]}


def test_a_replacement_of_one_vendors_round_leaves_the_other_vendor_alone(workbench):
    for vendor_id in ("acme", "northwind"):
        workbench.ingest_questionnaire(payload(KEPT, WITHDRAWN, vendor_id=vendor_id))

    workbench.ingest_questionnaire(payload(KEPT), replace=True)

    assert answers_in_round(workbench, "acme", 2) == {KEPT[2]}
    assert answers_in_round(workbench, "northwind", 2) == {KEPT[2], WITHDRAWN[2]}


def test_replacing_a_round_of_a_new_vendor_removes_nothing(workbench):
    report = workbench.ingest_questionnaire(payload(KEPT, vendor_id="fresh"), replace=True)
    assert (report.indexed_count, report.removed_count) == (1, 0)
    assert responses(workbench, "fresh") == 1


@pytest.mark.parametrize(("parts", "message"), [
    ([payload(KEPT), payload(ADDED, round_number=3)],
     "The files given to replace name round 2 of vendor 'acme' and round 3, but a "
     "replacement makes one round at a time (in one atomic step); replace each round on its "
     "own."),
    ([payload(KEPT), payload(ADDED, vendor_id="northwind")],
     "The files given to replace name round 2 of vendor 'acme' and round 2 of vendor "
     "'northwind', but a replacement makes one round at a time (in one atomic step); replace "
     "each round on its own."),
    ([payload(KEPT, ADDED), payload(WITHDRAWN, ADDED)],
     "Payloads 1 and 2 of round 2 of vendor 'acme' both answer the question 'Who approves a "
     "key rotation?' (for the same criterion); a round given in several payloads holds each "
     "answer once."),
], ids=["two-rounds", "two-vendors", "one-answer-twice"])
def test_a_replacement_that_is_not_one_round_is_refused_whole(workbench, parts, message):
    workbench.ingest_questionnaire(payload(KEPT, WITHDRAWN))
    before = store_snapshot(workbench)
    with pytest.raises(UserInputError) as refused:
        list(workbench.ingest_questionnaires([parse_payload(p) for p in parts], replace=True))
    assert str(refused.value) == message
    assert_unchanged(before, store_snapshot(workbench))


# The command ---------------------------------------------------------------------------

@pytest.fixture
def cli(workbench: Workbench, monkeypatch, tmp_path):
    """acme's sample documents and round 2 holding three answers, two to be withdrawn, in a
    store the command opens."""
    workbench.ingest_documents("acme", sorted(
        (SAMPLE_DATA / "vendors" / "acme" / "documents").glob("*.md")))
    workbench.ingest_questionnaire(payload(KEPT, WITHDRAWN, WITHDRAWN_AD_HOC))
    point_the_command_at(workbench, monkeypatch)
    return workbench


def contexts(capsys) -> dict[tuple[str, str], str]:
    """Every strategy's XML context for every query, as `evidence retrieve` prints it."""
    found = {}
    for strategy in STRATEGIES:
        for query in QUERIES:
            code, out, err = run(capsys, "retrieve", "--vendor", "acme", "--criterion", query,
                                 "--strategy", strategy, "--format", "xml")
            assert code == 0, err
            found[(strategy, query)] = out
    return found


def test_help_describes_replace(capsys):
    code, out, _ = run(capsys, "ingest", "questionnaire", "--help")
    assert code == 0
    text = " ".join(out.replace("│", " ").split())
    assert "--replace" in text and "removed_count" in text and "accumulate" in text


def test_a_replacement_hides_the_withdrawn_answers_from_every_reader(cli, capsys, tmp_path):
    # Before: every withdrawn answer reaches some context, the hybrid one's lexical index
    # included (which thereby settles with them at the store's generation).
    before = contexts(capsys)
    for word in WITHDRAWN_WORDS:
        assert [key for key, xml in before.items() if word in xml], word
    assert any(word in before[("hybrid", QUERIES[2])] for word in WITHDRAWN_WORDS)

    new = write_json(tmp_path, "round_2.json", payload(KEPT, ADDED))
    code, out, err = run(capsys, "ingest", "questionnaire", "--replace", str(new))

    assert (code, err) == (0, "")
    assert [json.loads(line) for line in out.splitlines()] == [
        {"indexed_count": 2, "round_number": 2, "vendor_id": "acme", "removed_count": 2}]
    for key, xml in contexts(capsys).items():
        assert not [w for w in WITHDRAWN_WORDS if w in xml], key
    assert any(ADDED[2] in xml for xml in contexts(capsys).values())

    for question in QUERIES[1:]:
        code, out, err = run(capsys, "ask", "--vendor", "acme", question)
        assert code == 0, err
        [turn] = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        shown = json.dumps([turn["answer"], turn["answer_evidence"],
                            turn["suggestion_evidence"], turn["followups"]])
        assert not [w for w in WITHDRAWN_WORDS if w in shown], question

    code, out, _ = run(capsys, "status", "--vendor", "acme")
    [status] = [json.loads(line) for line in out.splitlines()]
    assert status["followup_responses"] == 1 + 1  # KEPT and ADDED
    assert status["by_type"]["followup_response:2"] == 2
    assert status.get("incomplete_chunks", 0) == 0
    rows = cli.browse_chunks("acme", limit=10_000)
    assert not [r for r in rows if any(w in r["text"] for w in WITHDRAWN_WORDS)]


def test_the_plain_line_stays_the_contracts(cli, capsys, tmp_path):
    new = write_json(tmp_path, "round_2.json", payload(ADDED))
    code, out, _ = run(capsys, "ingest", "questionnaire", str(new))
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == [
        {"indexed_count": 1, "round_number": 2, "vendor_id": "acme"}]
    assert responses(cli) == 4  # accumulated

    code, out, _ = run(capsys, "ingest", "questionnaire", "--replace", str(new))
    assert json.loads(out) == {"indexed_count": 1, "round_number": 2, "vendor_id": "acme",
                               "removed_count": 3}
    code, out, _ = run(capsys, "ingest", "questionnaire", "--replace", str(new))
    assert json.loads(out)["removed_count"] == 0  # the same replacement again: nothing to do


def test_several_files_replace_one_round_together(cli, capsys, tmp_path):
    first = write_json(tmp_path, "part_1.json", payload(*many(100)))
    second = write_json(tmp_path, "part_2.json", payload(*many(20, start=100), KEPT))

    code, out, err = run(capsys, "ingest", "questionnaire", "--replace", str(first),
                         str(second))

    assert (code, err) == (0, "")
    assert [json.loads(line) for line in out.splitlines()] == [
        {"indexed_count": 121, "round_number": 2, "vendor_id": "acme", "removed_count": 2}]
    assert responses(cli) == 121


def write_csv(folder: Path, name: str, rows: list[tuple]) -> Path:
    path = folder / name
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["criterion", "question", "answer"])
        writer.writerows([(c or "", q, a) for c, q, a in rows])
    return path


def test_a_spreadsheet_round_replaces_the_round_named_by_its_options(cli, capsys, tmp_path):
    sheet = write_csv(tmp_path, "round_2.csv", [KEPT, ADDED])

    code, out, err = run(capsys, "ingest", "questionnaire", str(sheet), "--vendor", "acme",
                         "--round", "2", "--timestamp", "2024-02-01T09:00:00Z", "--replace")

    assert (code, err) == (0, "")
    assert json.loads(out) == {"indexed_count": 2, "round_number": 2, "vendor_id": "acme",
                               "removed_count": 2}
    assert answers_in_round(cli, "acme", 2) == {KEPT[2], ADDED[2]}


@pytest.mark.parametrize(("files", "options", "message"), [
    (("round_2.json", "round_3.json"), (),
     "The files given to replace name round 2 of vendor 'acme' and round 3, but a "
     "replacement makes one round at a time (in one atomic step); replace each round on its "
     "own."),
    (("round_2.json", "northwind.json"), (),
     "The files given to replace name round 2 of vendor 'acme' and round 2 of vendor "
     "'northwind', but a replacement makes one round at a time (in one atomic step); replace "
     "each round on its own."),
    (("round_3.json", "round_2.csv"), ("--vendor", "acme", "--round", "2"),
     "The files given to replace name round 3 of vendor 'acme' and round 2, but a "
     "replacement makes one round at a time (in one atomic step); replace each round on its "
     "own."),
    (("round_2.json", "round_2.json"), (),
     "Payloads 1 and 2 of round 2 of vendor 'acme' both answer the question 'Who approves a "
     "key rotation?' (for the same criterion); a round given in several payloads holds each "
     "answer once."),
], ids=["two-rounds", "two-vendors", "sheet-and-json", "one-file-twice"])
def test_bad_combinations_are_refused_in_one_sentence_writing_nothing(cli, capsys, tmp_path,
                                                                      files, options,
                                                                      message):
    write_json(tmp_path, "round_2.json", payload(ADDED))
    write_json(tmp_path, "round_3.json", payload(ADDED, round_number=3))
    write_json(tmp_path, "northwind.json", payload(ADDED, vendor_id="northwind"))
    write_csv(tmp_path, "round_2.csv", [KEPT])
    before = store_snapshot(cli)

    code, out, err = run(capsys, "ingest", "questionnaire", "--replace",
                         *(str(tmp_path / f) for f in files), *options)

    assert (code, out) == (2, "")
    assert error_message(err) == message
    assert_unchanged(before, store_snapshot(cli))


# A ChromaDB server ---------------------------------------------------------------------

@pytest.mark.server
def test_a_replacement_through_a_chromadb_server(tmp_path):
    """The markers' removed metadata keys and the deletes by id and marker go through the
    HTTP client as through the embedded store."""
    from core.config import Settings
    from tests.chroma_server import ChromaServer
    from tests.fakes import FakeEmbedder, FakeReranker

    server = ChromaServer(tmp_path / "server-data")
    try:
        bench = Workbench(Settings(chroma_host="127.0.0.1", chroma_port=server.port,
                                   store=tmp_path / "unused",
                                   lexical_dir=tmp_path / "lexical",
                                   reranker_cache_dir=tmp_path / "no-models"),
                          embedder=FakeEmbedder(), reranker=FakeReranker())
        bench.ingest_questionnaire(payload(KEPT, WITHDRAWN, WITHDRAWN_AD_HOC))
        for strategy in ("precedence", "hybrid"):  # the hybrid index settles with them
            bench.retrieve("acme", QUERIES[1], strategy)

        report = bench.ingest_questionnaire(payload(KEPT, ADDED), replace=True)

        assert (report.indexed_count, report.removed_count) == (2, 2)
        assert answers_in_round(bench, "acme", 2) == {KEPT[2], ADDED[2]}
        vendor = bench.store.open_vendor("acme")
        assert len(get_all(vendor.chunks, include=("metadatas",))["ids"]) == 2
        for strategy in STRATEGIES:
            for query in QUERIES:
                context = bench.retrieve("acme", query, strategy).context
                assert not [w for w in WITHDRAWN_WORDS if w in context], (strategy, query)
    finally:
        server.stop()
