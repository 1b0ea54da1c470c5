"""The reviewer's decisions: kept append-only per vendor with what was seen, re-opened in
words when the criterion's evidence moves, refused whole on bad input, kept in order when two
reviewers decide at once, and surviving a process killed at the write."""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from core.config import Settings
from core.criteria import CriterionEntry
from core.outputs.draft import plan_draft
from core.outputs.report import build_pack, render
from core.review.decisions import DecisionLog, Seen, SeenAnswer, changes_between
from core.workbench import Workbench
from tests.chroma_server import ChromaServer
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support import warm
from tests.support.cli import error_message, run_main
from tests.support.payloads import response, round_payload
from tests.support.snapshot import assert_unchanged, store_snapshot

pytest_plugins = ["tests.llm_stub"]

AES = "Does the vendor encrypt data at rest using AES-256?"
LOGS = "Does the vendor retain audit logs for at least 12 months?"
POLICY = ("# Encryption standard\n\nAll customer data at rest is encrypted with AES-256 in "
          "every region. Keys are held in a managed KMS and rotated yearly.\n")


def make_workbench(store: Path, **settings) -> Workbench:
    return Workbench(Settings(store=store, reranker_cache_dir=store.parent / "no-models",
                              **settings), embedder=FakeEmbedder(), reranker=FakeReranker())


def answered(workbench: Workbench, round_number: int, aes: str, logs: str = "Yes, 13 months.",
             **options) -> None:
    workbench.ingest_questionnaire(round_payload(round_number, [
        response("Is stored data encrypted?", aes, AES),
        response("How long are audit logs kept?", logs, LOGS)]), **options)


@pytest.fixture
def reviewed(tmp_path) -> Workbench:
    """Acme with a policy and three rounds, the AES criterion decided met on round 3."""
    workbench = make_workbench(tmp_path / "store", reviewer="dana")
    policy = tmp_path / "docs" / "encryption_standard.md"
    policy.parent.mkdir()
    policy.write_text(POLICY, encoding="utf-8")
    workbench.ingest_documents("acme", [policy])
    for number in (1, 2, 3):
        answered(workbench, number, "Yes, AES-256 everywhere.")
    workbench.decide("acme", AES, "met", note="AES-256 confirmed in round 3.")
    return workbench


def test_a_decision_records_who_when_and_exactly_what_was_seen(reviewed):
    (view,) = reviewed.decisions("acme")
    trace = reviewed.retrieve("acme", AES, "precedence")
    assert (view.status, view.state, view.reviewer, view.note) == (
        "met", "current", "dana", "AES-256 confirmed in round 3.")
    assert view.strategy == "precedence"
    assert view.context_sha256 == __import__("hashlib").sha256(
        trace.context.encode("utf-8")).hexdigest()
    assert view.seen.rounds == [1, 2, 3]
    assert "encryption_standard.md" in view.seen.documents
    assert view.changes == [] and view.contradictions == []


def test_a_new_round_that_changes_the_answer_reopens_the_decision_in_words(reviewed, tmp_path):
    answered(reviewed, 4, "No. Legacy tiers still use AES-128.")
    (view,) = reviewed.decisions("acme")
    assert view.state == "needs_review"
    assert "Round 4 answers No where round 3 answered Yes." in view.changes
    assert "Round 4 answers No where round 3 answered Yes." in view.contradictions
    # The decision itself is untouched: still met, by dana, on round 3's context.
    assert (view.status, view.reviewer, view.seen.rounds) == ("met", "dana", [1, 2, 3])

    # A new version of a document in the context is named too.
    policy = tmp_path / "docs" / "encryption_standard.md"
    policy.write_text(POLICY.replace("yearly", "every 90 days"), encoding="utf-8")
    reviewed.ingest_documents("acme", [policy])
    (view,) = reviewed.decisions("acme")
    assert "encryption_standard.md changed (a new version was ingested)." in view.changes

    # Deciding again makes the new context current, and keeps the first decision.
    reviewed.decide("acme", AES, "not_met", note="Legacy tiers on AES-128.")
    (view,) = reviewed.decisions("acme")
    assert (view.status, view.state) == ("not_met", "current")
    assert [d.status for d in view.history] == ["met", "not_met"]


def test_a_replaced_round_is_named_as_replaced(reviewed):
    answered(reviewed, 3, "No, only PII stores use AES-256.", replace=True)
    (view,) = reviewed.decisions("acme")
    assert view.state == "needs_review"
    assert "Round 3 was replaced: it now answers No where it answered Yes." in view.changes


def test_the_changes_are_said_for_each_kind_of_move():
    yes = SeenAnswer(id="a", round_number=3, answer="Yes.")
    before = Seen(rounds=[3], answers=[yes], documents={"policy.md": "v1"})
    same_again = Seen(rounds=[3, 4], answers=[yes, SeenAnswer(id="b", round_number=4,
                                                              answer="yes, still")],
                      documents={"policy.md": "v1", "soc2.pdf": "v9"})
    assert changes_between(before, same_again) == [
        "Round 4 is now linked to it and answers Yes, as round 3 did.",
        "soc2.pdf is now in the context."]
    gone = Seen(rounds=[], answers=[], documents={})
    assert changes_between(before, gone) == ["Round 3 is no longer in the context.",
                                             "policy.md is no longer in the context."]
    assert changes_between(before, before) == []


def test_a_waiver_past_its_date_shows_as_expired(reviewed):
    until = (datetime.now(UTC).date() + timedelta(days=30)).isoformat()
    reviewed.decide("acme", LOGS, "waived", until=until, note="Migration in progress.")
    views = {v.criterion: v for v in reviewed.decisions("acme")}
    assert (views[LOGS].status, views[LOGS].state, views[LOGS].until) == (
        "waived", "current", until)
    later = date.fromisoformat(until) + timedelta(days=1)
    trace = reviewed.retrieve("acme", LOGS, "precedence")
    view = reviewed.reviews.view(views[LOGS].history, trace, today=later)
    assert view.state == "expired"


def test_the_pack_carries_each_decision_its_history_and_state(reviewed):
    answered(reviewed, 4, "No. Legacy tiers still use AES-128.")
    criteria = [CriterionEntry(text=AES), CriterionEntry(text=LOGS)]
    pack = build_pack(reviewed, "acme", criteria, "precedence")
    aes, logs = pack.criteria
    assert aes.decision.state == "needs_review"
    assert aes.decision.decision.history[0].reviewer == "dana"
    assert logs.decision.state == "none"
    markdown = render(pack, "md")
    assert "### Reviewer's decision" in markdown and "Needs re-review" in markdown
    assert "Round 4 answers No where round 3 answered Yes." in markdown
    html = render(pack, "html")
    assert "Round 4 answers No where round 3 answered Yes." in html
    line = json.loads(render(pack, "jsonl").splitlines()[1])
    assert line["decision"]["state"] == "needs_review"


def test_the_gap_only_round_drafts_the_criteria_not_decided_met(reviewed):
    criteria = [CriterionEntry(text=AES), CriterionEntry(text=LOGS)]
    rows = plan_draft(reviewed, "acme", criteria, only_open=True)
    assert [r.criterion for r in rows] == [LOGS]
    reviewed.decide("acme", LOGS, "met")
    with pytest.raises(Exception, match="decided met"):
        plan_draft(reviewed, "acme", criteria, only_open=True)


def test_vendors_never_see_each_others_decisions(reviewed):
    reviewed.ingest_questionnaire(round_payload(1, [response("Encrypted?", "Yes.", AES)],
                                                vendor="globex"))
    assert reviewed.decisions("globex") == []
    assert len(DecisionLog(reviewed.store, "acme").all()) == 1


# Bad input ----------------------------------------------------------------------------------

PAST = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()
FUTURE = (datetime.now(UTC).date() + timedelta(days=60)).isoformat()
REFUSALS = {
    "unknown status": (["--status", "approved"], "approved"),
    "waiver without a date": (["--status", "waived"], "--until"),
    "waiver dated in the past": (["--status", "waived", "--until", PAST], "future"),
    "waiver dated today": (["--status", "waived", "--until",
                            datetime.now(UTC).date().isoformat()], "future"),
    "not a date": (["--status", "waived", "--until", "next week"], "YYYY-MM-DD"),
    "a date on another status": (["--status", "met", "--until", FUTURE], "waiver"),
    "a note over the limit": (["--status", "met", "--note", "x" * 4001], "note"),
    "a reviewer with control characters": (["--status", "met", "--reviewer", "dana\x1b[2J"],
                                           "reviewer"),
    "an unknown strategy": (["--status", "met", "--strategy", "magic"], "magic"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_bad_decision_is_refused_in_one_sentence_and_writes_nothing(reviewed, capfd,
                                                                       monkeypatch, case):
    monkeypatch.setattr("core.workbench.SentenceTransformerEmbedder",
                        lambda *args, **kwargs: FakeEmbedder())
    options, needle = REFUSALS[case]
    before = store_snapshot(reviewed)
    code, out, err = run_main(capfd, "--store", str(reviewed.settings.store), "decide",
                              "--vendor", "acme", "--criterion", AES, *options, clear=True)
    assert "Traceback" not in err and out == ""
    assert code == 2, err
    assert needle.lower() in error_message(err).lower()
    assert_unchanged(before, store_snapshot(reviewed))


def test_a_decision_for_an_unknown_vendor_is_refused(reviewed, capfd, monkeypatch):
    monkeypatch.setattr("core.workbench.SentenceTransformerEmbedder",
                        lambda *args, **kwargs: FakeEmbedder())
    before = store_snapshot(reviewed)
    code, out, err = run_main(capfd, "--store", str(reviewed.settings.store), "decide",
                              "--vendor", "initech", "--criterion", AES, "--status", "met",
                              clear=True)
    assert (code, out) == (2, "") and "initech" in err and len(err.strip().splitlines()) == 1
    assert_unchanged(before, store_snapshot(reviewed))


def test_the_commands_decide_and_list_as_the_contract_writes(reviewed, capfd, monkeypatch):
    monkeypatch.setattr("core.workbench.SentenceTransformerEmbedder",
                        lambda *args, **kwargs: FakeEmbedder())
    store = str(reviewed.settings.store)
    code, out, err = run_main(capfd, "--store", store, "decide", "--vendor", "acme",
                              "--criterion", LOGS, "--status", "waived", "--until", FUTURE,
                              "--note", "Archive tier lands in Q2.", "--reviewer", "Lee",
                              clear=True)
    assert code == 0, err
    printed = json.loads(out)
    assert {"vendor_id", "criterion", "criterion_hash", "status", "note", "reviewer",
            "decided_at", "strategy", "context_sha256", "state"} <= set(printed)
    assert (printed["status"], printed["reviewer"], printed["state"]) == ("waived", "Lee",
                                                                        "current")
    assert err == "evidence: note: recorded as Lee (given with --reviewer).\n"
    reviewed.ingest_questionnaire(round_payload(4, [response(
        "Is stored data encrypted?", "No. Legacy tiers still use AES-128.", AES)]))
    code, out, err = run_main(capfd, "--store", store, "decisions", "--vendor", "acme",
                              "--needs-review", clear=True)
    assert code == 0, err
    lines = {x["criterion"]: x for x in map(json.loads, out.splitlines())}
    line = lines[AES]
    assert line["state"] == "needs_review"
    assert "Round 4 answers No where round 3 answered Yes." in line["changes"]
    code, out, err = run_main(capfd, "--store", store, "decisions", "--vendor", "acme",
                              "--format", "text", clear=True)
    assert code == 0, err
    assert "needs re-review: Round 4 answers No where round 3 answered Yes." in out
    assert "Waived until " + FUTURE in out


# Two reviewers at once, and a process killed at the write -------------------------------
    monkeypatch.setenv("USER", "ops")  # the operating system's user, as getpass reads it
    monkeypatch.delenv("LOGNAME", raising=False)
    code, out, err = run_main(capfd, "--store", store, "decide", "--vendor", "acme",
                              "--criterion", LOGS, "--status", "met", clear=True)
    assert code == 0, err
    assert json.loads(out)["reviewer"] == "ops"
    assert err == ("evidence: note: recorded as ops (the operating system's user; name "
                   "another with --reviewer or EVIDENCE_REVIEWER).\n")


def decide_together(workbench: Workbench, other: Workbench) -> None:
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(bench: Workbench, who: str, status: str) -> None:
        try:
            barrier.wait()
            bench.decide("acme", AES, status, reviewer=who)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(workbench, "ana", "met")),
               threading.Thread(target=run, args=(other, "ben", "not_met"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def assert_both_kept_in_order(workbench: Workbench) -> None:
    history = DecisionLog(workbench.store, "acme").all()
    assert sorted(d.reviewer for d in history) == ["ana", "ben"]
    assert [d.decided_at for d in history] == sorted(d.decided_at for d in history)
    (view,) = workbench.decisions("acme")
    assert view.reviewer == history[-1].reviewer and len(view.history) == 2


def test_two_reviewers_deciding_at_once_are_both_kept_in_order(tmp_path):
    first = make_workbench(tmp_path / "store")
    answered(first, 1, "Yes, AES-256.")
    decide_together(first, make_workbench(tmp_path / "store"))
    assert_both_kept_in_order(make_workbench(tmp_path / "store"))


@pytest.mark.server
def test_two_reviewers_deciding_at_once_on_a_server_are_both_kept_in_order(tmp_path):
    server = ChromaServer(tmp_path / "server-data")
    try:
        def bench() -> Workbench:
            return Workbench(Settings(chroma_host="127.0.0.1", chroma_port=server.port,
                                      store=tmp_path / "unused",
                                      reranker_cache_dir=tmp_path / "no-models"),
                             embedder=FakeEmbedder(), reranker=FakeReranker())

        answered(bench(), 1, "Yes, AES-256.")
        decide_together(bench(), bench())
        assert_both_kept_in_order(bench())
    finally:
        server.stop()


KILLED_AT_THE_WRITE = """
import os, signal, sys
from pathlib import Path
import core.store.writes as writes
from core.config import Settings
from core.workbench import Workbench
from tests.fakes import FakeEmbedder, FakeReranker

when = sys.argv[2]
real = writes.apply

def apply(collection, operation, **arguments):
    if collection.name.endswith("__decisions") and operation == "add":
        if when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        real(collection, operation, **arguments)
        os.kill(os.getpid(), signal.SIGKILL)
    return real(collection, operation, **arguments)

writes.apply = apply
store = Path(sys.argv[1])
bench = Workbench(Settings(store=store, reranker_cache_dir=store.parent / "no-models"),
                  embedder=FakeEmbedder(), reranker=FakeReranker())
bench.decide("acme", "Does the vendor encrypt data at rest using AES-256?", "not_met",
             reviewer="killed")
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_the_decision_log_survives_a_kill_at_its_write(reviewed, tmp_path, when):
    script = tmp_path / "killed.py"
    script.write_text(KILLED_AT_THE_WRITE, encoding="utf-8")
    store = reviewed.settings.store
    done = warm.run_script(script, str(store), when, env=dict(os.environ),
                           cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == -9, done.stderr
    history = DecisionLog(make_workbench(store).store, "acme").all()
    assert history[0].reviewer == "dana" and history[0].status == "met"
    assert [d.reviewer for d in history] == (["dana"] if when == "before"
                                             else ["dana", "killed"])
    (view,) = make_workbench(store).decisions("acme")
    assert view.reviewer == history[-1].reviewer


# A verdict shown when deciding ----------------------------------------------------------


def test_a_decision_keeps_the_verdict_shown_as_it_counted(reviewed, llm_stub):
    """A verdict whose quote is not in the context counts as INCONCLUSIVE, and the decision
    made beside it records that, not the model's word; its noted contradictions are shown."""
    bench = Workbench(reviewed.settings.model_copy(update={
        "llm_base_url": llm_stub.base_url, "llm_model": llm_stub.model}),
        embedder=FakeEmbedder(), reranker=FakeReranker())
    llm_stub.enqueue({"verdict": "MET", "reasoning": "Round 3 confirms AES-256.",
                      "contradictions": ["Round 1 named no algorithm."], "cited_rounds": [3],
                      "quotes": [{"source": "Round 3",
                                  "quote": "AES-256 with customer managed keys everywhere"}]})
    verdict = bench.verdicts.assess("acme", AES, "precedence")
    assert (verdict.verified, verdict.counted_as) == (False, "INCONCLUSIVE")
    view = bench.decide("acme", AES, "partially_met")
    assert view.verdict == "INCONCLUSIVE (unverified: the model said MET)"
    assert view.model_contradictions == ["Round 1 named no algorithm."]
    assert len(llm_stub.requests) == 1  # deciding asks no language model


# Documents in time ----------------------------------------------------------------------------

REPORT = ("# SOC 2 Type II Report\n\nReport on Acme's Vault System. For the period {start} to "
          "{end}.\n\nIn our opinion, in all material respects, the controls over data at rest "
          "encryption with AES-256 operated effectively throughout the period.\n\n"
          "Example & Partners LLP\n")


def report(folder: Path, name: str, start: str, end: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(REPORT.format(start=start, end=end), encoding="utf-8")
    return path


def test_a_decision_on_a_report_that_a_newer_one_superseded_is_reopened_in_words(tmp_path):
    workbench = make_workbench(tmp_path / "store", reviewer="dana")
    recent = (datetime.now(UTC).date() - timedelta(days=200)).isoformat()
    earlier = (datetime.now(UTC).date() - timedelta(days=565)).isoformat()
    workbench.ingest_documents("acme", [report(tmp_path / "a", "acme-soc2-2024.md",
                                               "2023-01-01", earlier)])
    decided = workbench.decide("acme", AES, "met", note="The SOC 2 report covers it.")
    assert decided.state == "current"
    # The next year's report, sent under another name (the audit firm changed its naming).
    workbench.ingest_documents("acme", [report(tmp_path / "b", "ACME-SOC2-FY25.md",
                                               "2024-01-01", recent)])
    [view] = workbench.decisions("acme")
    assert view.state == "needs_review"
    assert view.changes[0] == (f"The {earlier[:4]} report (acme-soc2-2024.md) was superseded by "
                               f"the {recent[:4]} report (ACME-SOC2-FY25.md).")


def test_a_decision_on_a_report_gone_stale_since_is_reopened_in_words(tmp_path):
    store = tmp_path / "store"
    workbench = make_workbench(store, reviewer="dana")
    ended = (datetime.now(UTC).date() - timedelta(days=100)).isoformat()
    workbench.ingest_documents("acme", [report(tmp_path / "a", "soc2.md", "2024-01-01", ended)])
    workbench.decide("acme", AES, "met", strategy="semantic")
    [view] = workbench.decisions("acme")
    assert view.state == "current"  # the seed's context carries no label that changed
    # The same store read with a shorter stale limit: the report went stale since.
    [view] = make_workbench(store, stale_after_days=30).decisions("acme")
    assert view.state == "needs_review"
    assert view.changes == [f"The report's period ended {ended}, over 30 days ago."]
