"""The criterion overview page, as a reviewer sees it (fake models over the sample data)."""

from __future__ import annotations

import json

from core.hashing import criterion_hash
from core.trace.context import evidence_source
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


def test_names_the_reranker_that_ran_and_warns_nothing(dashboard_workbench):
    at = page("overview").run()
    assert not at.exception
    assert not at.warning
    # vendor and model text is markdown-escaped on the page
    assert any("Reranker" in m.value and "fake-overlap" in m.value.replace("\\", "")
               for m in at.markdown)


def test_warns_when_the_reranker_fell_back(dashboard_workbench_no_reranker):
    at = page("overview").run()
    assert not at.exception
    reason = dashboard_workbench_no_reranker.retrieve("acme", AES_CRITERION).reranker.reason
    assert len(at.warning) == 1
    assert "No reranker ran" in at.warning[0].value
    assert reason in at.warning[0].value
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
