"""The newest answer wins wherever a reviewer reads: on the sample data with the real model,
no `retrieve` or `ask` output shows an earlier answer without `later_answer` and the newest
answer beside it; the project's contexts lead with the current answer; the seeds' contexts
and prompts are exactly what they were; the round 3 / round 5 contradiction is listed."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from core.config import Settings
from core.outputs.quality import earlier_unmarked, ids_in_context
from core.retrieval.strategies import STRATEGIES
from core.trace.analysis import trace_text
from core.workbench import Workbench
from tests.conftest import AES_CRITERION, SAMPLE_CRITERIA, SAMPLE_DATA
from tests.support.cli import run_main

pytestmark = pytest.mark.model

SEED_ARTIFACTS = Path(__file__).parent / "data" / "seed_artifacts.json"
OWN = [name for name, s in STRATEGIES.items() if s.leads_with_current_answer]
SEEDS = [name for name, s in STRATEGIES.items() if not s.leads_with_current_answer]
BACKUPS = "How are backups protected?"
ROUND_3_AES_128 = "is encrypted with AES-128"
ROUND_5_DONE = "Migration to AES-256 completed on 2024-02-09"


@pytest.fixture(scope="module")
def sample(sample_store, tmp_path_factory, real_embedder) -> Workbench:
    """The sample data, real model, no reranker model: one private copy for the module's
    reads (the tests that write take their own)."""
    folder = tmp_path_factory.mktemp("newest-answer")
    shutil.copytree(sample_store, folder / "store")
    return Workbench(Settings(store=folder / "store", reranker_cache_dir=folder / "no-models"),
                     embedder=real_embedder)


def own_copy(sample_store: Path, tmp_path: Path, real_embedder) -> Workbench:
    shutil.copytree(sample_store, tmp_path / "store")
    return Workbench(Settings(store=tmp_path / "store", reranker_cache_dir=tmp_path / "none"),
                     embedder=real_embedder)


def point_the_command_at(bench: Workbench, monkeypatch) -> None:
    """`evidence` run in this process on the bench's store, with the runtime that built it."""
    monkeypatch.setenv("EVIDENCE_STORE", str(bench.settings.store))
    monkeypatch.setenv("EVIDENCE_RERANKER_CACHE_DIR", str(bench.settings.reranker_cache_dir))
    monkeypatch.setenv("EVIDENCE_EMBEDDING_RUNTIME", "torch")


def test_the_seeds_contexts_and_prompts_are_their_artifacts_unchanged(sample):
    """Recorded from the code before the newest answer was labelled anywhere: every seed
    strategy's context and prompt, for both vendors and every sample criterion, byte for
    byte (SHA-256)."""
    recorded = json.loads(SEED_ARTIFACTS.read_text(encoding="utf-8"))
    assert {key.split("|")[1] for key in recorded} == set(SEEDS)
    changed = []
    for key, digests in sorted(recorded.items()):
        vendor, strategy, criterion = key.split("|", 2)
        trace = sample.retrieve(vendor, criterion, strategy)
        for part in ("context", "prompt"):
            if hashlib.sha256(getattr(trace, part).encode()).hexdigest() != digests[part]:
                changed.append(f"{strategy} {part} for {vendor}: {criterion}")
    assert changed == []


@pytest.mark.parametrize("strategy", OWN)
def test_the_projects_contexts_lead_with_the_current_answer(sample, strategy):
    trace = sample.retrieve("acme", AES_CRITERION, strategy)
    current = trace.current_answer
    assert (current.round_number, current.answered_at) == (5, "2024-02-12T11:20:00Z")
    assert trace.context.startswith("<current_answer>\n<source>Follow-up Questionnaire Round 5")
    assert ROUND_5_DONE in trace.context.split("</current_answer>")[0]
    for hit in trace.followups:
        if hit.round_number < 5:
            assert hit.later_answer.round_number == 5
            assert (f"[Round {hit.round_number} ({hit.timestamp[:10]}): an earlier answer; "
                    "round 5 (2024-02-12) answered this criterion later]") in trace.context
    # The prompt says it in words, the current answer first.
    responses = trace.prompt.split("**Source 2")[0]
    assert responses.index("[CURRENT ANSWER - ROUND 5 - 2024-02-12]") < responses.index(
        "[EARLIER ANSWER - ROUND 4 - 2024-02-01 - round 5 (2024-02-12) answered this "
        "criterion later]")


@pytest.mark.parametrize("strategy", OWN)
@pytest.mark.parametrize("vendor", ["acme", "northwind"])
def test_no_retrieval_shows_an_earlier_answer_without_the_newest_beside_it(sample, vendor,
                                                                           strategy):
    shown_earlier = 0
    for criterion in SAMPLE_CRITERIA:
        trace = sample.retrieve(vendor, criterion, strategy)
        held = ids_in_context(trace)
        for item in [*trace.followups, *trace.evidence]:
            if item.later_answer is not None:
                shown_earlier += 1
                assert item.later_answer.id in held, (criterion, item.id)
                assert "an earlier answer; round " in trace.context
        assert earlier_unmarked(trace) == 0
        text = trace_text(trace)
        if trace.current_answer is not None:
            assert f"Current answer: round {trace.current_answer.round_number}" in text
        if any(h.later_answer for h in trace.followups):
            assert "an earlier answer; round" in text
    assert vendor == "northwind" or shown_earlier >= 10


def test_a_seed_context_shows_earlier_answers_unmarked_and_the_trace_marks_them(sample):
    """Plain search puts round 1's "Yes, we use AES-256 for all data at rest." first, with
    nothing in its context to say round 5 answered later; the trace's JSON says so."""
    trace = sample.retrieve("acme", AES_CRITERION, "semantic")
    first = trace.evidence[0]
    assert first.round_number == 1 and first.later_answer.round_number == 5
    assert "an earlier answer;" not in trace.context
    assert earlier_unmarked(trace) >= 1


def test_retrieve_as_text_leads_with_the_current_answer(sample, capsys, monkeypatch):
    point_the_command_at(sample, monkeypatch)
    code, out, err = run_main(capsys, "retrieve", "--vendor", "acme", "--criterion",
                              AES_CRITERION, "--format", "text")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"Criterion: {AES_CRITERION}"
    assert lines[3] == "Current answer: round 5 (2024-02-12), Follow-up Questionnaire Round 5"
    assert "Other answers to this criterion:" in lines
    assert out.index("Round 4 (2024-02-01), an earlier answer; round 5 (2024-02-12)") < out.index(
        "Excerpts in the context:")
    assert max(len(line) for line in lines) <= 100
    assert err.count("no reranker ran") == 1  # said once per command


@pytest.mark.parametrize("anchoring", ["calibrated", "seed"])
def test_ask_brings_the_newest_answer_ahead_of_an_earlier_one(sample_store, tmp_path,
                                                              real_embedder, monkeypatch,
                                                              anchoring):
    monkeypatch.setenv("EVIDENCE_SOURCE_ANCHORING", anchoring)
    bench = own_copy(sample_store, tmp_path, real_embedder)
    turn = bench.ask("acme", BACKUPS)
    shown = [*turn.answer_evidence, *turn.suggestion_evidence]
    ids = [e.id for e in shown]
    [earlier] = [e for e in shown if e.round_number == 3]
    assert earlier.later_answer.round_number == 5
    assert ids.index(earlier.later_answer.id) == ids.index(earlier.id) - 1
    assert ROUND_3_AES_128 in earlier.text
    number = ids.index(earlier.id) + 1
    assert (f"[{number}] Follow-up Questionnaire Round 3 (2024-01-20, an earlier answer; "
            f"round 5 (2024-02-12) answered the same criterion later, see [{number - 1}])"
            ) in turn.answer
    # A continuation, as seed 001 anchors it or calibrated: the labels hold there too.
    follow_on = bench.ask("acme", "Which algorithm exactly?", turn.conversation_id)
    shown = [*follow_on.answer_evidence, *follow_on.suggestion_evidence]
    ids = [e.id for e in shown]
    for evidence in shown:
        if evidence.later_answer is not None:
            assert evidence.later_answer.id in ids[:ids.index(evidence.id)]


def test_no_ask_shows_an_earlier_answer_without_the_newest(sample_store, tmp_path,
                                                           real_embedder):
    """Every sample criterion and a few reviewer questions, asked of both vendors: an
    earlier answer among the excerpts always has the newest answer to its criterion ahead
    of it, in the JSON and in the answer's text."""
    bench = own_copy(sample_store, tmp_path, real_embedder)
    questions = [*SAMPLE_CRITERIA, BACKUPS, "What key length protects stored files?",
                 "How long are logs kept?", "Is TLS 1.0 still accepted anywhere?"]
    earlier_seen = 0
    for vendor in ("acme", "northwind"):
        for question in questions:
            turn = bench.ask(vendor, question, save=False)
            shown = [*turn.answer_evidence, *turn.suggestion_evidence]
            ids = [e.id for e in shown]
            for evidence in shown:
                if evidence.later_answer is not None:
                    earlier_seen += 1
                    assert evidence.later_answer.id in ids[:ids.index(evidence.id)], question
                    if evidence in turn.answer_evidence:
                        assert "an earlier answer; round" in turn.answer
            for hit in turn.followups:
                if hit.later_answer is not None:
                    assert turn.current_answer.id in {h.id for h in turn.followups} | set(ids)
    assert earlier_seen >= 3


def test_decide_and_decisions_list_the_round_3_and_round_5_contradiction(
        sample_store, tmp_path, real_embedder, capsys, monkeypatch):
    bench = own_copy(sample_store, tmp_path, real_embedder)
    point_the_command_at(bench, monkeypatch)
    code, out, err = run_main(capsys, "decide", "--vendor", "acme", "--criterion",
                              AES_CRITERION, "--status", "met", "--reviewer", "dana")
    assert code == 0, err
    decided = json.loads(out)
    [found] = decided["contradiction_details"]
    assert found["sentence"] == "Round 5 names AES-256 where round 3 named AES-128."
    assert found["between"] == ["round 3", "round 5"]
    assert ROUND_3_AES_128 in found["quotes"][0] and ROUND_5_DONE in found["quotes"][1]

    code, out, err = run_main(capsys, "decisions", "--vendor", "acme", "--format", "text",
                              clear=True)
    assert code == 0, err
    assert "  Contradiction: Round 5 names AES-256 where round 3 named AES-128." in out
    assert '    round 3: "After an internal review' in out
    assert f'    round 5: "{ROUND_5_DONE}' in out


def test_eval_prints_the_reading_order_figures(sample, capsys, monkeypatch):
    point_the_command_at(sample, monkeypatch)
    judged = SAMPLE_DATA / "judgments"
    code, out, err = run_main(capsys, "eval", "--vendor", "acme", "--criteria-file",
                              str(judged / "criteria.txt"), "--judgments",
                              str(judged / "acme.csv"))
    assert code == 0, err
    lines = {line["strategy"]: line for line in map(json.loads, out.splitlines())}
    for name in OWN:
        assert lines[name]["current_answer_in_context"] == 1.0
        assert lines[name]["earlier_unmarked"] == 0
    assert lines["semantic"]["earlier_unmarked"] > 0
    assert lines["semantic"]["current_answer_in_context"] < 1.0
    # Read in the order it is meant to be read, the default ranks above plain search.
    assert lines["precedence"]["ndcg@6"] > lines["semantic"]["ndcg@6"]
