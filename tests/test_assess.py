"""Verdicts from a language model, through the real `openai` client against a local stub
OpenAI-compatible server: exactly the retrieval's prompt is sent, the answer is checked
against the schema and against the rounds the prompt held, a verdict is stored per vendor
and read back instead of sending the same prompt twice, and a changed store makes it stale."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from core.errors import UserInputError
from core.review.llm.client import LLMError
from core.review.verdicts import VerdictAnswer
from core.store import verdicts_collection_name
from core.workbench import Workbench
from tests.conftest import AES_CRITERION
from tests.fakes import FakeEmbedder, FakeReranker, point_the_command_at
from tests.support import payloads
from tests.support.cli import run_main

pytest_plugins = ["tests.llm_stub"]

VENDOR = "acme"
ROUND_1 = "Yes, all customer data at rest is encrypted with AES-256."
ROUND_3 = "Correction: the archive database is not encrypted at rest yet; planned for Q4."
ANSWER = {"verdict": "NOT_MET",
          "reasoning": "Round 3 withdraws round 1's claim: the archive database is not "
                       "encrypted at rest.",
          "contradictions": ["Round 1 says all data at rest is encrypted; round 3 says the "
                             "archive database is not."],
          "cited_rounds": [1, 3]}


def seed_vendor(bench: Workbench, folder: Path, vendor: str = VENDOR) -> None:
    """A document and two rounds, round 3 contradicting round 1 on the AES criterion."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "encryption_policy.md").write_text(
        "# Encryption\n\nProduction databases encrypt data at rest using AES-256.\n",
        encoding="utf-8")
    bench.ingest_documents(vendor, [folder])
    for number, answer in ((1, ROUND_1), (3, ROUND_3)):
        bench.ingest_questionnaire(payloads.one_answer(number, answer, criterion=AES_CRITERION,
                                                       vendor=vendor))


def with_llm(workbench: Workbench, llm_stub, **overrides) -> Workbench:
    """A second workbench on the same store, configured for the stub endpoint."""
    settings = workbench.settings.model_copy(update={
        "llm_base_url": llm_stub.base_url, "llm_model": llm_stub.model, "llm_timeout_s": 5.0,
        **overrides})
    return Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())


def verdict_collections(bench: Workbench) -> set[str]:
    return {c.name for c in bench.store.client.list_collections()
            if c.name.endswith("__verdicts")}


@pytest.fixture
def seeded(workbench, tmp_path) -> Workbench:
    """The vendor in a store, read through a workbench with no language model configured."""
    seed_vendor(workbench, tmp_path / "docs")
    return workbench


@pytest.fixture
def bench(seeded, llm_stub) -> Workbench:
    return with_llm(seeded, llm_stub)


def test_assess_sends_exactly_the_prompt_with_a_json_schema(bench, llm_stub):
    llm_stub.enqueue(ANSWER)
    verdict = bench.verdicts.assess(VENDOR, AES_CRITERION)

    trace = bench.retrieve(VENDOR, AES_CRITERION)
    assert [f.round_number for f in trace.followups] == [1, 3]
    assert ROUND_1 in trace.prompt and "ROUND 3" in trace.prompt
    [request] = llm_stub.requests
    assert request.path == "/v1/chat/completions"
    assert request.messages == [{"role": "user", "content": trace.prompt}]
    assert request.model == llm_stub.model
    response_format = request.response_format
    assert response_format["type"] == "json_schema"
    schema = response_format["json_schema"]["schema"]
    assert set(schema["required"]) == set(VerdictAnswer.model_fields)
    assert schema["properties"]["verdict"]["enum"] == ["MET", "NOT_MET", "INCONCLUSIVE"]

    assert verdict.verdict == "NOT_MET"
    assert verdict.reasoning == ANSWER["reasoning"]
    assert verdict.contradictions == ANSWER["contradictions"]
    assert verdict.cited_rounds == [1, 3]
    assert verdict.model == llm_stub.model
    assert verdict.prompt_sha256 == hashlib.sha256(trace.prompt.encode("utf-8")).hexdigest()
    assert (verdict.vendor_id, verdict.criterion, verdict.criterion_hash, verdict.strategy) == (
        VENDOR, AES_CRITERION, trace.criterion_hash, "precedence")
    assert verdict.cached is False
    assert verdict.assessed_at.endswith("+00:00")
    json_line = verdict.to_json_dict()
    for key in ("vendor_id", "criterion", "criterion_hash", "strategy", "verdict", "reasoning",
                "contradictions", "cited_rounds", "model", "prompt_sha256"):
        assert key in json_line


def test_the_same_prompt_is_not_sent_twice(bench, llm_stub):
    llm_stub.enqueue(ANSWER)
    first = bench.verdicts.assess(VENDOR, AES_CRITERION)
    # Nothing is queued: a second request would be answered 500 and fail the test.
    second = bench.verdicts.assess(VENDOR, AES_CRITERION, criterion_id="C-7")

    assert len(llm_stub.requests) == 1
    assert second.cached is True
    assert second.criterion_id == "C-7"
    assert second.model_dump(exclude={"cached", "criterion_id"}) == first.model_dump(
        exclude={"cached", "criterion_id"})
    [name] = verdict_collections(bench)
    stored = bench.store.client.get_collection(name).get()
    assert len(stored["ids"]) == 1


def test_refresh_sends_the_prompt_again_and_keeps_one_record(bench, llm_stub):
    llm_stub.enqueue(ANSWER)
    bench.verdicts.assess(VENDOR, AES_CRITERION)
    llm_stub.enqueue({**ANSWER, "verdict": "INCONCLUSIVE"})
    again = bench.verdicts.assess(VENDOR, AES_CRITERION, refresh=True)

    assert len(llm_stub.requests) == 2
    assert llm_stub.requests[1].messages == llm_stub.requests[0].messages
    assert (again.verdict, again.cached) == ("INCONCLUSIVE", False)
    assert bench.verdicts.latest(VENDOR, AES_CRITERION).verdict.verdict == "INCONCLUSIVE"
    [name] = verdict_collections(bench)
    assert len(bench.store.client.get_collection(name).get()["ids"]) == 1


def test_status_needs_no_model_and_a_new_round_makes_the_verdict_stale(seeded, bench,
                                                                       llm_stub):
    llm_stub.enqueue(ANSWER)
    given = bench.verdicts.assess(VENDOR, AES_CRITERION)

    status = seeded.verdicts.latest(VENDOR, AES_CRITERION)  # no endpoint configured
    assert status.verdict is not None and status.verdict.verdict == "NOT_MET"
    assert status.stale is False and status.stale_reason is None
    assert status.current_prompt_sha256 == given.prompt_sha256

    seeded.ingest_questionnaire(payloads.one_answer(
        4, "All data at rest, archive included, is now encrypted with AES-256.",
        criterion=AES_CRITERION))
    status = seeded.verdicts.latest(VENDOR, AES_CRITERION)
    assert status.stale is True
    assert status.verdict.prompt_sha256 == given.prompt_sha256
    assert status.current_prompt_sha256 != given.prompt_sha256
    assert "changed" in status.stale_reason

    llm_stub.enqueue({**ANSWER, "verdict": "MET", "cited_rounds": [4]})
    fresh = bench.verdicts.assess(VENDOR, AES_CRITERION)
    assert (fresh.verdict, fresh.cached) == ("MET", False)
    assert len(llm_stub.requests) == 2
    assert "ROUND 4" in llm_stub.requests[1].messages[0]["content"]
    status = seeded.verdicts.latest(VENDOR, AES_CRITERION)
    assert (status.verdict.verdict, status.stale) == ("MET", False)


def test_the_configured_model_is_preferred_and_another_model_is_asked_anew(seeded, bench,
                                                                          llm_stub):
    llm_stub.enqueue(ANSWER)
    bench.verdicts.assess(VENDOR, AES_CRITERION)
    other = with_llm(seeded, llm_stub, llm_model="other-model")

    # No verdict of the configured model yet: the one stored is shown all the same.
    assert other.verdicts.latest(VENDOR, AES_CRITERION).verdict.model == llm_stub.model
    llm_stub.enqueue({**ANSWER, "verdict": "INCONCLUSIVE"})
    theirs = other.verdicts.assess(VENDOR, AES_CRITERION)
    assert (theirs.model, theirs.cached) == ("other-model", False)
    assert llm_stub.requests[1].model == "other-model"
    assert other.verdicts.latest(VENDOR, AES_CRITERION).verdict.verdict == "INCONCLUSIVE"
    assert bench.verdicts.latest(VENDOR, AES_CRITERION).verdict.verdict == "NOT_MET"


def test_no_endpoint_is_refused_before_anything_is_retrieved(seeded, llm_stub):
    embedded_before = seeded.embedder.calls
    for vendor in (VENDOR, "nobody"):
        with pytest.raises(UserInputError, match="EVIDENCE_LLM_BASE_URL") as refused:
            seeded.verdicts.assess(vendor, AES_CRITERION)
        assert "\n" not in str(refused.value)
    assert seeded.embedder.calls == embedded_before
    assert verdict_collections(seeded) == set()
    assert llm_stub.requests == []


@pytest.mark.parametrize("reply, expected", [
    pytest.param({"content": "late", "hang_s": 3.0}, "did not answer within 0.5 s",
                 id="timeout"),
    pytest.param({"status": 500, "error": "model crashed"}, "HTTP 500: model crashed",
                 id="http-500"),
    pytest.param({"content": "MET, clearly."}, "not JSON", id="not-json"),
    pytest.param({"content": {**ANSWER, "verdict": "PROBABLY"}}, "schema", id="bad-verdict"),
    pytest.param({"content": {"verdict": "MET", "reasoning": "ok"}}, "schema",
                 id="missing-fields"),
    pytest.param({"content": {**ANSWER, "reasoning": "   "}}, "reasoning is blank",
                 id="blank-reasoning"),
])
def test_a_failed_answer_is_one_error_and_nothing_is_recorded(seeded, llm_stub, reply,
                                                              expected):
    bench = with_llm(seeded, llm_stub, llm_timeout_s=0.5)
    content = reply.pop("content", None)
    llm_stub.enqueue(content, **reply)
    with pytest.raises(LLMError) as failed:
        bench.verdicts.assess(VENDOR, AES_CRITERION)
    assert expected in str(failed.value)
    assert "\n" not in str(failed.value)
    assert len(llm_stub.requests) == 1

    status = seeded.verdicts.latest(VENDOR, AES_CRITERION)
    assert status.verdict is None
    # The failure was not remembered: the next assess sends the prompt again.
    llm_stub.release()
    llm_stub.enqueue(ANSWER)
    assert bench.verdicts.assess(VENDOR, AES_CRITERION).cached is False
    assert len(llm_stub.requests) == 2


def test_vendors_never_see_each_others_verdicts(seeded, bench, llm_stub, tmp_path):
    seed_vendor(seeded, tmp_path / "globex-docs", vendor="globex")
    # Same evidence, so the very same prompt: the verdict of one vendor is still not the other's.
    assert (seeded.retrieve("globex", AES_CRITERION).prompt
            == seeded.retrieve(VENDOR, AES_CRITERION).prompt)
    llm_stub.enqueue(ANSWER)
    bench.verdicts.assess(VENDOR, AES_CRITERION)

    assert seeded.verdicts.latest("globex", AES_CRITERION).verdict is None
    assert verdict_collections(seeded) == {verdicts_collection_name(VENDOR)}
    llm_stub.enqueue({**ANSWER, "verdict": "MET"})
    theirs = bench.verdicts.assess("globex", AES_CRITERION)
    assert (theirs.vendor_id, theirs.verdict, theirs.cached) == ("globex", "MET", False)
    assert len(llm_stub.requests) == 2
    assert seeded.verdicts.latest(VENDOR, AES_CRITERION).verdict.verdict == "NOT_MET"
    assert seeded.verdicts.latest("globex", AES_CRITERION).verdict.verdict == "MET"


def test_reading_a_vendor_never_assessed_creates_nothing(seeded):
    status = seeded.verdicts.latest(VENDOR, AES_CRITERION)
    assert status.verdict is None and status.stale is False
    assert status.current_prompt_sha256 == hashlib.sha256(
        seeded.retrieve(VENDOR, AES_CRITERION).prompt.encode("utf-8")).hexdigest()
    assert verdict_collections(seeded) == set()


# Rounds cited wherever the prompt holds them ------------------------------------------------

PEN_TEST = "Does the vendor's penetration testing cover its mobile application?"
MOBILE = "Does the annual penetration test include the mobile app?"
NOT_MOBILE = "No, web and API only. The mobile application is not in scope."


def seed_unlinked_answer(bench: Workbench, folder: Path) -> None:
    """A round-4 answer that is not linked to PEN_TEST (it answers another wording of it), so
    a retrieval for PEN_TEST finds it by search, among the excerpts."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pentest_policy.md").write_text(
        "# Penetration testing\n\nAn external firm tests the web application every year.\n",
        encoding="utf-8")
    bench.ingest_documents(VENDOR, [folder])
    bench.ingest_questionnaire(payloads.one_answer(4, NOT_MOBILE, criterion=MOBILE))


def quoting_round(number: int, quote: str, cited: list[int]) -> dict:
    return {"verdict": "NOT_MET", "reasoning": f"Round {number} excludes the mobile app.",
            "contradictions": [], "cited_rounds": cited,
            "quotes": [{"source": f"Round {number}", "quote": quote}]}


@pytest.mark.parametrize("strategy", ["precedence", "semantic"])
def test_a_round_held_among_the_excerpts_counts_as_held(workbench, tmp_path, llm_stub,
                                                        strategy):
    """Round 4 answered another wording of the criterion, so search finds it: precedence
    shows it with the vendor's responses, the seeds' layout as a document. Either way the
    prompt holds round 4's answer, and a verdict citing and quoting it is verified."""
    seed_unlinked_answer(workbench, tmp_path / "docs")
    trace = workbench.retrieve(VENDOR, PEN_TEST, strategy)
    assert trace.followups == [] and trace.current_answer is None
    [found] = [c for c in trace.evidence if c.is_followup]
    assert found.round_number == 4 and NOT_MOBILE in trace.prompt
    llm_stub.enqueue(quoting_round(4, "web and API only", [4]))

    verdict = with_llm(workbench, llm_stub).verdicts.assess(VENDOR, PEN_TEST, strategy)

    assert (verdict.verdict, verdict.counted_as, verdict.verified) == (
        "NOT_MET", "NOT_MET", True)
    assert verdict.cited_rounds == [4] and verdict.unverified_quotes == []


def test_a_cited_round_the_prompt_does_not_hold_is_recorded_unverified(workbench, tmp_path,
                                                                      llm_stub):
    """The model's mistake is recorded, not a failure: the verdict is kept, unverified, and
    counts as INCONCLUSIVE with the reason; the command does not fail."""
    seed_unlinked_answer(workbench, tmp_path / "docs")
    llm_stub.enqueue(quoting_round(4, "web and API only", [4, 7]))

    verdict = with_llm(workbench, llm_stub).verdicts.assess(VENDOR, PEN_TEST)

    assert (verdict.verdict, verdict.counted_as, verdict.verified) == (
        "NOT_MET", "INCONCLUSIVE", False)
    assert [(u.source, u.reason) for u in verdict.unverified_quotes] == [
        ("Round 7", "round 7 is cited, but the prompt holds no answer of round 7 (its rounds: "
                    "4)")]
    status = workbench.verdicts.latest(VENDOR, PEN_TEST)
    assert status.verdict is not None and status.verdict.counted_as == "INCONCLUSIVE"
    assert "unverified" in status.summary


@pytest.mark.parametrize("cited, counted", [([4], "NOT_MET"), ([4, 7], "INCONCLUSIVE")])
def test_assess_exits_0_whether_the_cited_round_is_held_or_not(workbench, tmp_path, llm_stub,
                                                               monkeypatch, capfd, cited,
                                                               counted):
    """`evidence assess` through the real client and the stub: a round held among the
    excerpts is a verified citation; one the prompt does not hold is the model's mistake,
    recorded unverified. Neither fails the command."""
    seed_unlinked_answer(workbench, tmp_path / "docs")
    point_the_command_at(workbench, monkeypatch)
    monkeypatch.setenv("EVIDENCE_LLM_BASE_URL", llm_stub.base_url)
    monkeypatch.setenv("EVIDENCE_LLM_MODEL", llm_stub.model)
    llm_stub.enqueue(quoting_round(4, "web and API only", cited))

    code, out, err = run_main(capfd, "assess", "--vendor", VENDOR, "--criterion", PEN_TEST)

    assert code == 0, err
    [line] = [json.loads(text) for text in out.splitlines()]
    assert (line["cited_rounds"], line["counted_as"]) == (cited, counted)
    assert line["verified"] is (counted == "NOT_MET")
