"""Asking with a language model, through the real `openai` client against a local stub
OpenAI-compatible server: seed 001's reformulation agent decides the continuation and the
query, the answer is written from the numbered excerpts, and a failing endpoint falls back
to the rules and the excerpts with a note."""

from __future__ import annotations

import pytest

from core.config import Settings
from core.workbench import Workbench
from tests.conftest import SAMPLE_DATA
from tests.fakes import FakeEmbedder, FakeReranker

pytest_plugins = ["tests.llm_stub"]

ACME = SAMPLE_DATA / "vendors" / "acme"
ANSWER = {"answer": "Backups are encrypted with separate keys [1] and locked for 35 days [2].",
          "cited": [1, 2],
          "suggested_questions": ["How often are restores tested?",
                                  "Who can delete a backup?"]}


@pytest.fixture
def bench(llm_stub, tmp_path) -> Workbench:
    settings = llm_stub.settings(store=tmp_path / "store",
                                 reranker_cache_dir=tmp_path / "none", llm_timeout_s=1.0)
    workbench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    workbench.ingest_documents("acme", sorted((ACME / "documents").glob("*.md")))
    return workbench


def test_the_answer_is_written_from_the_numbered_excerpts(bench, llm_stub):
    llm_stub.enqueue(ANSWER)
    turn = bench.ask("acme", "How are backups protected?")
    assert turn.answered_by == f"llm:{llm_stub.model}"
    assert turn.answer == ANSWER["answer"]
    assert turn.suggested_questions == ANSWER["suggested_questions"]
    [request] = llm_stub.requests
    assert request.response_format["json_schema"]["name"] == "evidence_answer"
    prompt = request.messages[-1]["content"]
    for i, evidence in enumerate(turn.answer_evidence, start=1):
        assert f"[{i}] {evidence.source}" in prompt


def test_seed_001s_agent_decides_the_continuation_and_the_query(bench, llm_stub):
    llm_stub.enqueue(ANSWER)
    first = bench.ask("acme", "How are backups protected?")
    llm_stub.enqueue({"needs_reformulation": True, "is_continuation": True,
                      "query": "How are backups protected in more detail",
                      "reasoning": "It asks to expand the previous answer about backups."})
    llm_stub.enqueue(ANSWER)
    second = bench.ask("acme", "Can you elaborate on that?", first.conversation_id)
    assert second.continuation.decided_by == "llm"
    assert second.continuation.is_continuation
    assert second.continuation.reason == "It asks to expand the previous answer about backups."
    assert second.search_query == "How are backups protected in more detail"
    assert second.anchor_documents == first.cited_documents
    agent = llm_stub.requests[1]
    assert agent.response_format["json_schema"]["name"] == "query_reformulation"
    content = agent.messages[-1]["content"]
    # The last exchange is always in view of the agent.
    assert "Most recent exchange:\nUser: How are backups protected?" in content
    assert "New question: Can you elaborate on that?" in content


def test_an_endpoint_answering_nonsense_falls_back_with_a_note(bench, llm_stub):
    llm_stub.enqueue("this is not json")
    turn = bench.ask("acme", "How are backups protected?")
    assert turn.answered_by == "excerpts"
    assert turn.answer.startswith("No language model is configured, so nothing below")
    assert any(n.startswith("The language model could not answer") for n in turn.notes)


def test_a_hanging_endpoint_times_out_and_the_rules_decide(bench, llm_stub):
    llm_stub.enqueue(ANSWER)
    first = bench.ask("acme", "How are backups protected?")
    llm_stub.enqueue({"needs_reformulation": False, "is_continuation": True, "query": "x",
                      "reasoning": "late"}, hang_s=3.0)
    llm_stub.enqueue(ANSWER)
    second = bench.ask("acme", "Can you elaborate on that?", first.conversation_id)
    assert second.continuation.decided_by == "rules" and second.continuation.is_continuation
    assert any("could not decide the continuation" in n for n in second.notes)
    assert second.answered_by == f"llm:{llm_stub.model}"


def test_without_an_endpoint_nothing_is_sent_and_nothing_claims_generation(tmp_path):
    bench = Workbench(Settings(store=tmp_path / "store", reranker_cache_dir=tmp_path / "n"),
                      embedder=FakeEmbedder(), reranker=FakeReranker())
    bench.ingest_documents("acme", [ACME / "documents" / "business_continuity_plan.md"])
    turn = bench.ask("acme", "How are backups protected?")
    assert turn.answered_by == "excerpts" and turn.suggested_questions == []
    assert "nothing below was generated" in turn.answer
