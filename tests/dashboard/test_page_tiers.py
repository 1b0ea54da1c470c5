"""The precedence tiers page, as a reviewer sees it (fake models over the sample data)."""

from __future__ import annotations

import json
import re

from tests.conftest import AES_CRITERION
from tests.dashboard.conftest import page

ROUND_3_REASON = re.compile(
    r"^hash match; question reworded, similarity 0\.\d\d < 0\.70: medium$")


def _tables(at) -> list:
    return [df.value for df in at.dataframe]


def test_hash_path_gives_each_round_its_tier_and_reason(dashboard_workbench):
    at = page("tiers").run()
    assert not at.exception
    assert at.title[0].value == "Precedence tiers"
    hash_path, semantic_path, _dropped = _tables(at)

    rows = hash_path.set_index("round")
    assert sorted(rows.index) == [1, 2, 3, 4, 5]
    assert ROUND_3_REASON.match(rows.loc[3, "tier_reason"])
    trace = dashboard_workbench.retrieve("acme", AES_CRITERION, "precedence")
    round_3 = next(h for h in trace.hash_path if h.round_number == 3)
    assert rows.loc[3, "tier_reason"] == (
        f"hash match; question reworded, similarity {round_3.question_similarity:.2f} "
        "< 0.70: medium")
    assert rows.loc[3, "versus_threshold"] == "< 0.70"
    assert rows.loc[5, "tier"] == "high" and rows.loc[5, "versus_threshold"] == ">= 0.70"
    assert rows["hash_match"].all()
    assert rows.loc[1, "status"] == rows.loc[2, "status"] == "dropped"
    assert {rows.loc[r, "status"] for r in (3, 4, 5)} == {"in context (follow-up entry)"}
    assert semantic_path["round"].tolist() == [h.round_number for h in trace.semantic_path]
    assert semantic_path["tier_reason"].tolist() == [h.tier_reason for h in trace.semantic_path]


def test_rounds_1_and_2_are_dropped_by_the_cap(dashboard_workbench):
    at = page("tiers").run()
    assert not at.exception
    dropped = _tables(at)[2].set_index("round")
    assert sorted(dropped.index) == [1, 2]
    for round_number in (1, 2):
        reason = dropped.loc[round_number, "reason"]
        assert reason.startswith(f"round {round_number} is older than the 3 latest kept")
        assert "rounds 5, 4, 3" in reason and "MAX_FOLLOWUP_ROUNDS=3" in reason
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Similarity threshold"] == "0.70"
    assert metrics["Round cap"] == "3"
    assert metrics["Dropped"] == "2"


def test_similarity_chart_draws_every_round_against_the_threshold(dashboard_workbench):
    at = page("tiers").run()
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    labels = spec["data"][0]["y"]
    assert [label.split(":")[0] for label in labels] == [f"round {r}" for r in range(1, 6)]
    assert spec["layout"]["shapes"][0]["x0"] == 0.7


def test_semantic_strategy_says_it_has_no_hash_path(dashboard_workbench):
    at = page("tiers", strategy="semantic").run()
    assert not at.exception
    infos = [i.value for i in at.info]
    assert any("This strategy (semantic) has no hash path" in text for text in infos)
    assert any("has no semantic path" in text for text in infos)
    assert not at.dataframe
    assert any("No follow-up was dropped" in m.value for m in at.markdown)


def test_hash_extraction_has_a_hash_path_but_no_semantic_path(dashboard_workbench):
    at = page("tiers", strategy="hash_extraction").run()
    assert not at.exception
    infos = [i.value for i in at.info]
    assert any("This strategy (hash_extraction) has no semantic path" in t for t in infos)
    assert not any("no hash path" in t for t in infos)


def test_tiered_strategy_drops_by_tier_order(dashboard_workbench):
    trace = dashboard_workbench.retrieve("acme", AES_CRITERION, "tiered")
    at = page("tiers", strategy="tiered").run()
    assert not at.exception
    dropped = _tables(at)[2]
    assert dropped["round"].tolist() == [d.followup.round_number
                                         for d in trace.dropped_followups]
    assert dropped["reason"].tolist() == [d.reason for d in trace.dropped_followups]
    assert all("(MAX_FOLLOWUP_ROUNDS) is filled by" in r for r in dropped["reason"])


def test_without_a_selection_asks_for_one(dashboard_workbench):
    at = page("tiers", criterion="").run()
    assert not at.exception
    assert "Pick a vendor" in at.info[0].value


def test_unknown_vendor_is_one_plain_error(dashboard_workbench):
    at = page("tiers", vendor="nobody").run()
    assert not at.exception
    assert len(at.error) == 1 and "nobody" in at.error[0].value
