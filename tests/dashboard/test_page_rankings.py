"""The "Boosted vs unboosted" page: both rankings with moves, what-if boost, entry boosts,
and the comparison of two strategies."""

from __future__ import annotations

from core.trace.analysis import compare_traces, entry_boost, move_label
from core.trace.context import evidence_source
from tests.conftest import AES_CRITERION
from tests.dashboard.conftest import page

KMS = "kms_key_configuration.md"


def table(at, column: str):
    """The first table on the page with this column."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def texts(at) -> str:
    return "\n".join(e.value for e in [*at.markdown, *at.caption, *at.info, *at.warning])


def test_table_marks_the_boosted_followup_document_up(dashboard_workbench):
    trace = dashboard_workbench.retrieve("acme", AES_CRITERION, "precedence")
    kms = next(c for c in trace.reranked if c.source == KMS and c.rank_after_boost == 1)
    expected = move_label(kms.rank_before_boost, kms.rank_after_boost)
    assert expected.startswith("Up")

    at = page("rankings").run()

    assert not at.exception
    assert at.title[0].value == "Boosted vs unboosted"
    assert "acme" in at.caption[0].value and AES_CRITERION in at.caption[0].value
    rows = table(at, "Final score built as")
    top = rows[rows["Rank after boost"] == 1].iloc[0]
    assert top["Source"] == evidence_source(kms)  # the file, then the section it is in
    assert top["Source"].startswith(f"{KMS} \u00a7 ")
    assert top["Move"] == expected
    assert top["Rank before boost"] == kms.rank_before_boost
    assert top["Boost"] == kms.boost
    assert top["Final score built as"].endswith(f"rerank relevance x {kms.boost:g} boost")
    # Every row's mark agrees with the trace, and the context flag marks the evidence.
    by_id = {c.id: c for c in trace.reranked}
    for _, row in rows.iterrows():
        c = by_id[row["Id"]]
        assert row["Move"] == move_label(c.rank_before_boost, c.rank_after_boost)
    assert set(rows[rows["In context"]]["Id"]) == {c.id for c in trace.evidence}
    assert len(at.get("plotly_chart")) >= 2  # slope and score parts (and the comparison)


def test_scores_are_labelled_without_a_reranker(dashboard_workbench_no_reranker):
    at = page("rankings").run()

    assert not at.exception
    rows = table(at, "Final score built as")
    assert set(rows["Rerank (0..1)"]) == {"no reranker ran"}
    assert "first-stage cosine" in rows["Final score built as"].iloc[0]
    assert any("No reranker ran" in c.value for c in at.caption)
    assert not at.warning  # the app says it once per session, not every page


def test_whatif_at_one_removes_the_boost(dashboard_workbench):
    at = page("rankings").run()
    assert at.slider(key="whatif_boost").value == 1.15

    at.slider(key="whatif_boost").set_value(1.0).run()

    assert not at.exception
    whatif = table(at, "What-if rank")
    assert len(whatif) == 6
    assert set(whatif["Move"]) == {"="}
    assert set(whatif["Boost"]) == {1.0}
    assert KMS not in set(whatif["Source"].iloc[:4])  # unboosted, the documents sink


def test_whatif_high_boost_moves_followup_documents_up(dashboard_workbench):
    at = page("rankings").run()
    at.slider(key="whatif_boost").set_value(3.0).run()

    assert not at.exception
    whatif = table(at, "What-if rank")
    sent = whatif["Type"].str.startswith("document sent with round")
    documents = whatif[sent]
    assert len(documents) >= 3
    assert all(move.startswith("Up") for move in documents["Move"])
    assert list(sent.iloc[: len(documents)]) == [True] * len(documents)


def test_entry_boost_matches_the_analysis(dashboard_workbench):
    trace = dashboard_workbench.retrieve("acme", AES_CRITERION, "semantic")
    cap = trace.constants.followup_boost_cap
    at = page("rankings", strategy="semantic").run()

    assert not at.exception
    assert any("applies no boost" in i.value for i in at.info)
    entries = table(at, "Enters the top at")
    documents = [c for c in trace.reranked if c.type == "followup_document"]
    assert list(entries["Id"]) == [c.id for c in sorted(documents,
                                                        key=lambda c: c.rank_before_boost)]
    numeric = 0
    for _, row in entries.iterrows():
        expected = entry_boost(trace.reranked, row["Id"], 6, cap)
        if expected is None:
            assert row["Enters the top at"] == f"never: capped at {cap:g}"
        elif expected == 1.0:
            assert row["Enters the top at"] == "already in the top 6"
        else:
            numeric += 1
            assert row["Enters the top at"] == f"x{expected:.3f}"
    assert numeric >= 1


def test_entry_boost_already_in_the_top(dashboard_workbench):
    trace = dashboard_workbench.retrieve("acme", AES_CRITERION, "precedence")
    at = page("rankings").run()

    entries = table(at, "Enters the top at").set_index("Id")
    inside = [c for c in trace.reranked
              if c.type == "followup_document" and c.rank_before_boost <= 6]
    assert inside
    for c in inside:
        assert entry_boost(trace.reranked, c.id, 6, 1.0) == 1.0
        assert entries.loc[c.id, "Enters the top at"] == "already in the top 6"


def test_compare_precedence_with_semantic(dashboard_workbench):
    a = dashboard_workbench.retrieve("acme", AES_CRITERION, "precedence")
    b = dashboard_workbench.retrieve("acme", AES_CRITERION, "semantic")
    compared = compare_traces(a, b)

    at = page("rankings").run()

    assert not at.exception
    assert at.selectbox(key="compare_a").value == "precedence"
    assert at.selectbox(key="compare_b").value == "semantic"
    rows = table(at, "In")
    shared = rows[rows["In"] == "shared"]
    only_a = rows[rows["In"] == "only precedence"]
    only_b = rows[rows["In"] == "only semantic"]
    assert set(shared["Id"]) == {c.id for c in compared if c.rank_a and c.rank_b}
    assert set(only_a["Id"]) == {c.id for c in compared if c.rank_a and not c.rank_b}
    assert set(only_b["Id"]) == {c.id for c in compared if c.rank_b and not c.rank_a}
    assert len(shared) and len(only_a) and len(only_b)
    moves = {c.id: c.move for c in compared}
    assert all(moves[i] == m for i, m in zip(rows["Id"], rows["Move"], strict=True))
    assert set(only_a["Move"]) == {"out"} and set(only_b["Move"]) == {"new"}
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Shared evidence"] == str(len(shared))
    # The AES round-1 answer reaches semantic's context only as an ordinary excerpt.
    assert any("Round 1" in label for label in only_b["Evidence"])


def test_compare_other_pair_and_same_strategy(dashboard_workbench):
    at = page("rankings").run()
    at.selectbox(key="compare_b").set_value("doc_boost").run()
    assert not at.exception
    doc_boost = dashboard_workbench.retrieve("acme", AES_CRITERION, "doc_boost")
    rows = table(at, "In")
    assert set(rows[rows["In"] != "only precedence"]["Evidence"]) <= (
        {evidence_source(c) for c in doc_boost.evidence}
        | {f"{f.source}: round {f.round_number} follow-up" for f in doc_boost.followups})

    at.selectbox(key="compare_b").set_value("precedence").run()
    assert not at.exception
    assert any("two different strategies" in i.value for i in at.info)
