"""dashboard.charts: each figure builder is a pure function of plain data."""

from __future__ import annotations

from core.models import FollowupHit
from core.trace.analysis import RankedItem, RoundRow
from dashboard import charts


def _hit(round_number: int, similarity: float, tier: str | None) -> FollowupHit:
    return FollowupHit(
        id=f"f{round_number}", round_number=round_number,
        timestamp=f"2024-01-{round_number:02d}T00:00:00Z", source="s", content="",
        criterion_question_text="C?", criterion_question_hash="h",
        question_text=f"Question {round_number}", answer_text="Yes.", hash_match=True,
        question_similarity=similarity, tier=tier, tier_reason=f"why {round_number}")


def test_timings_figure_has_one_bar_per_stage_without_the_total():
    fig = charts.timings_figure({"embed_query": 3.0, "first_stage": 12.5, "total": 20.0})
    assert list(fig.data[0].y) == ["embed_query", "first_stage"]
    assert list(fig.data[0].x) == [3.0, 12.5]
    assert "total 20 ms" in fig.layout.title.text


def test_similarity_figure_colours_tiers_and_draws_the_threshold():
    fig = charts.similarity_figure([_hit(1, 0.95, "high"), _hit(2, 0.4, "medium")], 0.7)
    assert list(fig.data[0].x) == [0.95, 0.4]
    assert list(fig.data[0].marker.color) == [charts.TIER_COLORS["high"],
                                              charts.TIER_COLORS["medium"]]
    [line] = fig.layout.shapes
    assert line.x0 == 0.7 and line.x1 == 0.7


def test_slope_figure_draws_one_line_per_item_and_puts_missing_items_below():
    fig = charts.slope_figure([("a", 1, 2), ("b", 2, 1), ("c", 3, None)], "before", "after",
                              highlight=[False, True, False], top_n=2)
    assert len(fig.data) == 3
    assert list(fig.data[1].y) == [2, 1]
    assert list(fig.data[2].y) == [3, 4]  # "out" drawn below the last rank
    assert fig.data[1].line.width > fig.data[0].line.width
    assert fig.layout.shapes[0].y0 == 2.5


def test_score_parts_figure_shows_rerank_only_when_a_reranker_ran():
    item = RankedItem("a", "a.md", "tc_files", 0.6, None, 1.0, 0.6, 1, 1, True)
    assert [t.name for t in charts.score_parts_figure([item]).data] == [
        "first-stage cosine similarity", "final (after boost)"]
    reranked = RankedItem("b", "b.md", "followup_document", 0.5, 0.7, 1.15, 0.805, 2, 1, True)
    fig = charts.score_parts_figure([reranked])
    assert [t.name for t in fig.data] == ["first-stage cosine similarity",
                                          "rerank relevance (0..1)", "final (after boost)"]
    assert list(fig.data[2].text) == ["x1.15"]


def test_rounds_timeline_separates_kept_and_dropped_rounds():
    rows = [RoundRow(_hit(1, 1.0, "high"), "dropped", "older"),
            RoundRow(_hit(3, 0.3, "medium"), "in context", "kept")]
    fig = charts.rounds_timeline_figure(rows)
    names = [t.name for t in fig.data]
    assert names == ["in context", "dropped"]
    assert list(fig.data[0].text) == ["R3"] and list(fig.data[1].text) == ["R1"]


def test_library_counts_figure_stacks_types_per_vendor():
    fig = charts.library_counts_figure({"acme": {"tc_files": 10, "followup_document": 2},
                                        "northwind": {"tc_files": 7}})
    assert [t.name for t in fig.data] == ["followup_document", "tc_files"]
    assert list(fig.data[1].y) == [10, 7] and list(fig.data[0].y) == [2, 0]
    assert fig.layout.barmode == "stack"


def test_crowding_figure_draws_one_line_per_strategy_on_a_log_axis():
    fig = charts.crowding_figure([1_000, 10_000, 100_000], {
        "semantic": [0.9, 0.6, None], "precedence": [1.0, 1.0, 1.0]})
    assert [t.name for t in fig.data] == ["semantic", "precedence"]
    assert list(fig.data[0].x) == [1_000, 10_000, 100_000]
    assert list(fig.data[0].y) == [0.9, 0.6, None]  # a size without the strategy is a gap
    assert list(fig.data[1].y) == [1.0, 1.0, 1.0]
    assert all("markers" in t.mode for t in fig.data)
    assert fig.layout.xaxis.type == "log"
    assert list(fig.layout.xaxis.ticktext) == ["1k", "10k", "100k"]
    assert fig.layout.yaxis.tickformat == ".0%"
    assert fig.layout.yaxis.range[0] <= 0 and fig.layout.yaxis.range[1] >= 1
    assert fig.data[1].line.width > fig.data[0].line.width  # precedence stands out


def test_stage_latency_figure_stacks_stages_per_strategy_and_draws_the_floor():
    fig = charts.stage_latency_figure({
        "semantic": {"load_model": 900.0, "embed_query": 8.0, "first_stage": 5.0,
                     "total": 14.0},
        "precedence": {"embed_query": 7.0, "hash_fetch": 2.0, "first_stage": 6.0,
                       "total": 16.0},
    }, floor_ms=11.5)
    assert fig.layout.barmode == "stack"
    assert [t.name for t in fig.data] == ["embed_query", "hash_fetch", "first_stage"]
    for trace in fig.data:
        assert trace.orientation == "h"
        assert list(trace.y) == ["semantic", "precedence"]
    assert list(fig.data[0].x) == [8.0, 7.0]
    assert list(fig.data[1].x) == [0.0, 2.0]  # a stage the strategy has not: no segment
    [line] = fig.layout.shapes
    assert line.x0 == 11.5 and line.x1 == 11.5 and line.line.dash == "dash"


def test_stage_order_keeps_each_strategys_run_order():
    assert charts.stage_order({
        "semantic": {"embed_query": 1, "first_stage": 1, "rerank": 1, "select": 1},
        "doc_boost": {"embed_query": 1, "first_stage": 1, "rerank": 1, "boost": 1, "select": 1},
        "precedence": {"load_model": 1, "embed_query": 1, "hash_fetch": 1, "near_copy": 1,
                       "first_stage": 1, "tiers": 1, "rerank": 1, "boost": 1, "select": 1,
                       "total": 4},
    }) == ["embed_query", "hash_fetch", "near_copy", "first_stage", "tiers", "rerank", "boost",
           "select"]


def test_stage_latency_figure_without_a_floor_draws_no_line():
    fig = charts.stage_latency_figure({"tiered": {"tiers": 1.0}})
    assert not fig.layout.shapes
    assert list(fig.data[0].x) == [1.0]
