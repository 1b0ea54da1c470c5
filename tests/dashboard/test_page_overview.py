"""The criterion overview page, as a reviewer sees it (fake models over the sample data)."""

from __future__ import annotations

import json

from core.hashing import criterion_hash
from core.trace.context import document_date, evidence_source
from dashboard.text import plain
from tests.conftest import AES_CRITERION
from tests.dashboard.conftest import page
from tests.support.sentences import one_sentence


def _metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def _table(at, first_column: str):
    return next(df.value for df in at.dataframe if df.value.columns[0] == first_column)


def test_shows_hash_followups_evidence_and_timings(dashboard_workbench):
    at = page("overview").run()
    assert not at.exception
    assert at.title[0].value == "Criterion overview"
    assert "acme" in at.caption[0].value and "precedence" in at.caption[0].value
    assert _metric(at, "Criterion hash") == criterion_hash(AES_CRITERION)
    assert _metric(at, "Follow-ups in context") == "3"
    assert _metric(at, "Total time").endswith(" ms")

    followups = _table(at, "round")
    assert followups["round"].tolist() == [3, 4, 5]
    assert followups["tier"].tolist() == ["medium", "medium", "high"]
    assert followups["answer"].iloc[1] == "Yes."

    trace = dashboard_workbench.retrieve("acme", AES_CRITERION, "precedence")
    evidence = _table(at, "position")
    assert evidence["source"].tolist() == [evidence_source(c) for c in trace.evidence]
    assert _metric(at, "Excerpts in context") == str(len(trace.evidence))
    assert evidence["rerank_score"].tolist() == [c.rerank_score for c in trace.evidence]
    assert any(s.startswith("kms_key_configuration.md \u00a7 ")  # the file and its section
               for s in evidence["source"].tolist())
    assert 1.15 in evidence["boost"].tolist()  # the follow-up document was boosted

    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    stages = spec["data"][0]["y"]
    assert stages == [name for name in trace.timings_ms if name != "total"]
    assert "hash_fetch" in stages and "rerank" in stages


def test_names_the_reranker_that_ran_in_the_details(dashboard_workbench):
    at = page("overview").run()
    assert not at.exception
    assert not any("reranker" in w.value.lower() for w in at.warning)
    # vendor and model text is markdown-escaped on the page
    assert any("Reranker" in m.value and "fake-overlap" in m.value.replace("\\", "")
               for m in at.markdown)


def test_a_missing_reranker_is_said_in_the_details_not_as_a_warning(
        dashboard_workbench_no_reranker):
    """The app says it once per session; the page keeps the reason in its details and the
    excerpts' rerank column."""
    at = page("overview").run()
    assert not at.exception
    reason = dashboard_workbench_no_reranker.retrieve("acme", AES_CRITERION).reranker.reason
    assert not any("reranker" in w.value.lower() for w in at.warning)
    details = next(m.value.replace("\\", "") for m in at.markdown
                   if m.value.startswith("**Reranker:**"))
    assert "none" in details and reason.replace("\\", "") in details
    evidence = _table(at, "position")
    assert set(evidence["rerank_score"]) == {"no reranker ran"}


def test_semantic_strategy_has_no_followups_in_context(dashboard_workbench):
    at = page("overview", strategy="semantic").run()
    assert not at.exception
    assert _metric(at, "Follow-ups in context") == "0"
    assert any("No follow-up answer is in the context" in m.value for m in at.markdown)


def test_without_a_selection_asks_for_one(dashboard_workbench):
    at = page("overview", vendor=None).run()
    assert not at.exception
    assert "Pick a vendor" in at.info[0].value
    assert not at.metric


def test_unknown_vendor_is_one_plain_error(dashboard_workbench):
    at = page("overview", vendor="nobody").run()
    assert not at.exception
    assert len(at.error) == 1
    message = at.error[0].value
    assert "nobody" in message
    assert one_sentence(message), message
    assert not at.metric


def test_the_page_opens_with_the_current_answer_and_what_earlier_rounds_said(
        dashboard_workbench):
    at = page("overview").run()
    assert not at.exception
    # The first section is the vendor's current answer; the hash is in the details.
    assert at.subheader[0].value == "The vendor's current answer"
    assert "Criterion hash" not in at.subheader[0].value
    headline = at.markdown[0].value.replace("\\", "")
    assert headline == ("**Round 5** · answered 2024-02-12 · Follow-up Questionnaire Round 5")
    assert at.markdown[1].value.replace("\\", "") == (
        "Confirmed. Migration to AES-256 completed on 2024-02-09 for all storage tiers, "
        "including backups.")
    earlier = next(m.value.replace("\\", "") for m in at.markdown
                   if m.value.startswith("**Earlier answers**"))
    assert [line.split(" said: ")[0] for line in earlier.splitlines()[1:]] == [
        "- Round 4 (2024-02-01)", "- Round 3 (2024-01-20)", "- Round 2 (2024-01-15)",
        "- Round 1 (2024-01-10)"]
    assert "Round 1 (2024-01-10) said: “Yes, we use AES-256 for all data at rest.”" in earlier
    # Round 3's correction and round 5's completed migration disagree, with both quotes.
    [found] = [w.value.replace("\\", "") for w in at.warning
               if w.value.startswith("**Contradictions")]
    assert "Round 5 names AES-256 where round 3 named AES-128." in found
    assert "Round 3: “After an internal review" in found
    assert "Round 5: “Migration to AES-256 completed on 2024-02-09" in found


def test_every_criterion_answered_in_several_rounds_shows_its_newest_answer_first(
        dashboard_workbench):
    from dashboard import resources

    checked = 0
    for vendor in ("acme", "northwind"):
        for criterion in (e.text for e in resources.vendor_criteria(vendor)):
            rounds = {h.round_number
                      for h in dashboard_workbench.linked_followups(vendor, criterion)}
            if len(rounds) < 2:
                continue
            at = page("overview", vendor=vendor, criterion=criterion).run()
            assert not at.exception
            assert at.subheader[0].value == "The vendor's current answer"
            assert at.markdown[0].value.startswith(f"**Round {max(rounds)}**"), criterion
            checked += 1
    assert checked >= 7  # acme's six such criteria, and northwind's


def test_a_criterion_no_round_answers_leads_with_the_current_documents_dated(
        dashboard_workbench):
    criterion = "Does the vendor have a current SOC 2 Type II report?"
    at = page("overview", criterion=criterion).run()
    assert not at.exception
    assert at.subheader[0].value == "The vendor's current documents"
    assert at.caption[1].value.startswith("No questionnaire round answers this criterion yet")
    trace = dashboard_workbench.retrieve("acme", criterion, "precedence")
    first = next(c for c in trace.evidence if c.document is not None)
    # The first screen names the document and its date as its text states it, not a notice
    # above the decision form.
    assert at.markdown[0].value.startswith(
        f"**{plain(first.source)}** · {plain(document_date(first.document))}")
    assert not at.info
    # Every excerpt below says its date and standing.
    table = _table(at, "position")
    assert table["date"].tolist()[:1] == [document_date(first.document)]
    assert all(status for status in table["status"].tolist()[:3])
