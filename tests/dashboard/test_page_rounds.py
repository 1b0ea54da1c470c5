"""The round progression page, as a reviewer sees it (fake models over the sample data)."""

from __future__ import annotations

import html
import json
import re

from tests.conftest import AES_CRITERION
from tests.dashboard.conftest import page

TRAINING_CRITERION = ("Does the vendor require security awareness training for all employees "
                      "at least annually?")
INSERTED = re.compile(r"<ins [^>]*>(.*?)</ins>", re.S)
DELETED = re.compile(r"<del [^>]*>(.*?)</del>", re.S)


def _rounds_table(at):
    return at.dataframe[0].value


def _diff_since(at, round_number: int) -> str:
    return next(h.value for h in at.html if f"(changes since round {round_number})" in h.value)


def test_lists_all_five_aes_rounds_in_order_with_precedence_statuses(dashboard_workbench):
    at = page("rounds").run()
    assert not at.exception
    assert at.title[0].value == "Round progression"
    table = _rounds_table(at)
    assert table["round"].tolist() == [1, 2, 3, 4, 5]
    assert table["answered_at"].tolist() == [
        "2024-01-10 09:15 UTC", "2024-01-15 10:30 UTC", "2024-01-20 14:00 UTC",
        "2024-02-01 16:45 UTC", "2024-02-12 11:20 UTC"]
    assert table["status"].tolist() == ["dropped", "dropped", "in context", "in context",
                                        "in context"]
    assert "MAX_FOLLOWUP_ROUNDS=3" in table["reason"].iloc[0]
    assert table["reason"].iloc[2].startswith("hash match; question reworded")
    cards = [h.value for h in at.html if "<b>Question</b>" in h.value]
    assert len(cards) == 5
    assert "<b>Answer</b> Yes, we use AES-256 for all data at rest.</div>" in cards[0]
    assert "(changes since round 3)" in cards[3] and ">Yes.</ins>" in cards[3]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"Rounds linked by hash": "5", "In context": "3", "Dropped": "2",
                       "Not found by this strategy": "0"}
    # each round's card, in time order
    headers = [m.value for m in at.markdown if m.value.startswith("**Round ")]
    assert [h.split("**")[1] for h in headers] == [f"Round {n}" for n in range(1, 6)]
    assert ":red-badge[dropped]" in headers[0] and ":green-badge[in context]" in headers[2]


def test_question_drift_is_shown_as_a_percentage(dashboard_workbench):
    at = page("rounds").run()
    table = _rounds_table(at)
    assert table["drift"].iloc[0] == 0  # round 1 asks the criterion itself, in percent
    assert table["drift"].iloc[2] == 66
    round_3 = next(h.value for h in at.html if "stored customer records" in h.value)
    drift = round(100 * (1 - 0.3433))
    assert f"drifted {drift}% from the criterion" in round_3


def test_diff_from_round_2_to_3_highlights_the_contradiction(dashboard_workbench):
    at = page("rounds").run()
    assert not at.exception
    diff = _diff_since(at, 2)
    added = " ".join(INSERTED.findall(diff))
    removed = " ".join(DELETED.findall(diff))
    assert "AES-128" in added
    assert "AES-128" not in removed
    assert "AES-256-GCM" in removed
    # a rewritten answer reads as one removed and one added passage, not alternating words
    assert len(INSERTED.findall(diff)) == len(DELETED.findall(diff)) == 1
    terse = _diff_since(at, 3)
    assert INSERTED.findall(terse) == ["Yes."]


def test_vendor_text_is_escaped_not_rendered(dashboard_workbench, monkeypatch):
    from core.workbench import Workbench

    real = Workbench.linked_followups

    def with_markup(self, vendor_id, criterion):
        hits = real(self, vendor_id, criterion)  # round 1 is dropped: its row shows this copy
        hits[0] = hits[0].model_copy(update={"answer_text": "<img src=x onerror=alert(1)> *ok*"})
        return hits

    monkeypatch.setattr(Workbench, "linked_followups", with_markup)
    at = page("rounds").run()
    assert not at.exception
    first_card = next(h.value for h in at.html if "*ok*" in h.value)
    diff = _diff_since(at, 1)
    for shown in (first_card, diff):
        assert "<img" not in shown
        assert html.escape("<img src=x onerror=alert(1)>") in shown


def test_tiered_strategy_statuses_follow_its_trace(dashboard_workbench):
    trace = dashboard_workbench.retrieve("acme", AES_CRITERION, "tiered")
    kept = {f.round_number for f in trace.followups}
    dropped = {d.followup.round_number for d in trace.dropped_followups}
    expected = ["in context" if r in kept else "dropped" if r in dropped
                else "not found by this strategy" for r in range(1, 6)]
    assert expected != ["dropped", "dropped", "in context", "in context", "in context"]

    at = page("rounds", strategy="tiered").run()
    assert not at.exception
    table = _rounds_table(at)
    assert table["round"].tolist() == [1, 2, 3, 4, 5]
    assert table["status"].tolist() == expected
    for row in table.itertuples():
        if row.status == "not found by this strategy":
            assert row.reason == "the tiered strategy did not retrieve it"
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert {trace_["name"] for trace_ in spec["data"]} == set(expected)


def test_semantic_strategy_finds_no_round_as_a_followup(dashboard_workbench):
    """Semantic search has no follow-up entry and drops nothing: a linked answer it finds
    competes as an ordinary excerpt, and the page says so rather than "not found"."""
    trace = dashboard_workbench.retrieve("acme", AES_CRITERION, "semantic")
    at = page("rounds", strategy="semantic").run()
    assert not at.exception
    table = _rounds_table(at)
    assert not {"in context", "dropped"} & set(table["status"])
    excerpts = {c.id for c in trace.evidence}
    linked = dashboard_workbench.linked_followups("acme", AES_CRITERION)
    expected = ["in context as an excerpt" if h.id in excerpts else
                "not in context" if trace.fate(h.id) == "not_selected" else
                "not found by this strategy" for h in linked]
    assert table["status"].tolist() == expected


def test_criterion_without_followups_says_so(dashboard_workbench):
    at = page("rounds", criterion=TRAINING_CRITERION).run()
    assert not at.exception
    assert "No follow-up round answered this criterion" in at.info[0].value
    assert not at.dataframe and not at.metric


def test_without_a_selection_asks_for_one(dashboard_workbench):
    at = page("rounds", vendor=None).run()
    assert not at.exception
    assert "Pick a vendor" in at.info[0].value


def test_unknown_vendor_is_one_plain_error(dashboard_workbench):
    at = page("rounds", vendor="nobody").run()
    assert not at.exception
    assert len(at.error) == 1 and "nobody" in at.error[0].value
