"""Plotly figures as pure functions of plain data: testable without Streamlit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from core.models import FollowupHit
from core.trace.analysis import RankedItem, RoundRow
from dashboard.styles import (
    AMBER,
    BLUE,
    GREEN,
    GREY,
    LIGHT_BLUE,
    LIGHT_GREY,
    MID_BLUE,
    PURPLE,
    RED,
)

TIER_COLORS = {"high": GREEN, "medium": AMBER, "control": PURPLE, "low": GREY,
               None: LIGHT_GREY}
HIGHLIGHT = BLUE
MUTED = LIGHT_GREY


def _layout(fig: go.Figure, title: str, height: int = 360) -> go.Figure:
    fig.update_layout(title=title, height=height, margin={"l": 10, "r": 10, "t": 50, "b": 10},
                      template="plotly_white", legend={"orientation": "h", "y": -0.15})
    return fig


def timings_figure(timings_ms: Mapping[str, float]) -> go.Figure:
    """Milliseconds per stage, in the order the stages ran; the total is left out."""
    stages = [(name, ms) for name, ms in timings_ms.items() if name != "total"]
    fig = go.Figure(go.Bar(
        x=[ms for _, ms in stages], y=[name for name, _ in stages], orientation="h",
        text=[f"{ms:.1f} ms" for _, ms in stages], textposition="auto",
        marker_color=HIGHLIGHT,
    ))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="milliseconds")
    total = timings_ms.get("total")
    return _layout(fig, f"Time per stage (total {total:.0f} ms)" if total else "Time per stage",
                   height=80 + 32 * max(len(stages), 1))


def similarity_figure(hits: Sequence[FollowupHit], threshold: float) -> go.Figure:
    """Each follow-up's question similarity to the criterion against the tier threshold."""
    labels = [f"round {h.round_number}: {h.question_text[:50]}" for h in hits]
    fig = go.Figure(go.Bar(
        x=[h.question_similarity for h in hits], y=labels, orientation="h",
        marker_color=[TIER_COLORS[h.tier] for h in hits],
        text=[f"{h.question_similarity:.2f} ({h.tier or 'no tier'})" for h in hits],
        textposition="auto",
        hovertext=[h.tier_reason for h in hits],
    ))
    fig.add_vline(x=threshold, line_dash="dash", line_color=RED,
                  annotation_text=f"threshold {threshold:.2f}", annotation_position="top")
    fig.update_xaxes(range=[0, 1.05], title="question similarity to the criterion (difflib)")
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, "Question similarity and tier", height=100 + 36 * max(len(hits), 1))


def slope_figure(rows: Sequence[tuple[str, int | None, int | None]], left: str, right: str,
                 *, highlight: Sequence[bool] | None = None, top_n: int | None = None
                 ) -> go.Figure:
    """Rank on the left vs rank on the right, one line per item; None = not in that list."""
    missing = max([r for _, a, b in rows for r in (a, b) if r is not None] or [1]) + 1
    fig = go.Figure()
    for i, (label, before, after) in enumerate(rows):
        marked = highlight[i] if highlight else False
        y0 = before if before is not None else missing
        y1 = after if after is not None else missing
        fig.add_trace(go.Scatter(
            x=[left, right], y=[y0, y1], mode="lines+markers+text",
            line={"color": HIGHLIGHT if marked else MUTED, "width": 3 if marked else 1.5},
            text=[f"{label} ({before})" if before else "", f"{after}" if after else ""],
            textposition=["middle left", "middle right"], name=label, showlegend=False,
            hovertext=f"{label}: {before or '-'} -> {after or '-'}",
        ))
    if top_n:
        fig.add_hline(y=top_n + 0.5, line_dash="dot", line_color=RED,
                      annotation_text=f"top {top_n} (the context)")
    fig.update_yaxes(autorange="reversed", title="rank", dtick=1)
    fig.update_xaxes(range=[-0.9, 1.5])
    return _layout(fig, f"{left} vs {right}", height=120 + 28 * max(len(rows), 1))


def score_parts_figure(items: Sequence[RankedItem]) -> go.Figure:
    """Each candidate's first-stage, rerank and final score side by side."""
    labels = [f"{i.rank_after}. {i.label}" for i in items]
    fig = go.Figure()
    fig.add_trace(go.Bar(name="first-stage cosine similarity", y=labels,
                         x=[i.first_stage_score for i in items], orientation="h",
                         marker_color=LIGHT_BLUE))
    if any(i.rerank_score is not None for i in items):
        fig.add_trace(go.Bar(name="rerank relevance (0..1)", y=labels,
                             x=[i.rerank_score for i in items], orientation="h",
                             marker_color=MID_BLUE))
    fig.add_trace(go.Bar(name="final (after boost)", y=labels,
                         x=[i.final_score for i in items], orientation="h",
                         marker_color=HIGHLIGHT,
                         text=[f"x{i.boost:g}" if i.boost != 1.0 else "" for i in items],
                         textposition="outside"))
    fig.update_layout(barmode="group")
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="score")
    return _layout(fig, "Score parts", height=120 + 60 * max(len(items), 1))


# One marker per status of core.models.FATE_STATUS: filled in context, hollow left out.
FATE_SYMBOLS = {"in context": "circle", "in context as an excerpt": "diamond",
                "dropped": "circle-open", "not in context": "square-open",
                "not found by this strategy": "x"}


def rounds_timeline_figure(rows: Sequence[RoundRow]) -> go.Figure:
    """Every linked round over time: colour = tier, filled = in context, hollow = dropped."""
    fig = go.Figure()
    for status, symbol in FATE_SYMBOLS.items():
        chosen = [r for r in rows if r.status == status]
        if not chosen:
            continue
        fig.add_trace(go.Scatter(
            x=[r.followup.timestamp for r in chosen],
            y=[r.followup.question_similarity for r in chosen],
            mode="markers+text", name=status,
            marker={"size": 16, "symbol": symbol, "line": {"width": 2},
                    "color": [TIER_COLORS[r.followup.tier] for r in chosen]},
            text=[f"R{r.followup.round_number}" for r in chosen], textposition="top center",
            hovertext=[f"round {r.followup.round_number}: {r.reason}" for r in chosen],
        ))
    fig.update_yaxes(range=[0, 1.1], title="question similarity to the criterion")
    fig.update_xaxes(title="round timestamp")
    return _layout(fig, "Rounds over time")


def library_counts_figure(by_type: Mapping[str, Mapping[str, int]]) -> go.Figure:
    """Stacked record counts per vendor by kind of record, named in words ("vendor document",
    "round 4 answer")."""
    types = sorted({t for counts in by_type.values() for t in counts})
    vendors = list(by_type)
    fig = go.Figure([
        go.Bar(name=t, x=vendors, y=[by_type[v].get(t, 0) for v in vendors]) for t in types
    ])
    fig.update_layout(barmode="stack")
    fig.update_yaxes(title="records")
    return _layout(fig, "Stored records by type")


STRATEGY_COLORS = {"precedence": HIGHLIGHT, "tiered": GREEN, "hash_extraction": AMBER,
                   "doc_boost": PURPLE, "semantic": GREY, "hybrid": MID_BLUE,
                   "ask": LIGHT_BLUE}
STAGE_COLORS = [BLUE, MID_BLUE, LIGHT_BLUE, GREEN, "#6fbf73", AMBER, "#f0b94a", PURPLE, "#c39bd3",
                GREY, LIGHT_GREY]
# Left out of stage charts: the total would count every stage twice, and loading the model
# is a one-off start-up cost, not query time.
UNSTAGED = ("total", "load_model")


def _chunks_label(chunks: int) -> str:
    if chunks >= 1_000_000 and chunks % 1_000_000 == 0:
        return f"{chunks // 1_000_000}M"
    return f"{chunks // 1000}k" if chunks >= 1000 and chunks % 1000 == 0 else f"{chunks:,}"


def crowding_figure(sizes: Sequence[int],
                    linked_in_context: Mapping[str, Sequence[float | None]]) -> go.Figure:
    """Per strategy, the fraction of hash-linked follow-ups that reached the context at each
    corpus size: x = chunks (log), y = 0..100%. A missing value leaves a gap."""
    fig = go.Figure()
    for strategy, fractions in linked_in_context.items():
        color = STRATEGY_COLORS.get(strategy, MUTED)
        fig.add_trace(go.Scatter(
            x=list(sizes), y=list(fractions), mode="lines+markers", name=strategy,
            line={"color": color, "width": 4 if strategy == "precedence" else 2},
            marker={"size": 10, "color": color},
            hovertemplate=f"{strategy}: %{{y:.0%}} at %{{x:,}} chunks<extra></extra>",
        ))
    fig.update_xaxes(type="log", title="chunks in the vendor's store (log scale)",
                     tickvals=list(sizes), ticktext=[_chunks_label(n) for n in sizes])
    fig.update_yaxes(range=[-0.03, 1.05], tickformat=".0%",
                     title="hash-linked follow-ups in the context")
    return _layout(fig, "Linked follow-ups in the context as the corpus grows", height=420)


def stage_order(stage_ms: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Every stage once, each strategy's stages in the order they ran: a stage only some
    strategies have goes right after the stage that ran before it."""
    merged: list[str] = []
    for stages in stage_ms.values():
        previous = None
        for stage in (s for s in stages if s not in UNSTAGED):
            if stage not in merged:
                merged.insert(merged.index(previous) + 1 if previous else 0, stage)
            previous = stage
    return merged


def stage_latency_figure(stage_ms: Mapping[str, Mapping[str, float]],
                         floor_ms: float | None = None, title: str = "Median time per stage"
                         ) -> go.Figure:
    """Stacked horizontal bars: one bar per strategy, one segment per stage (its p50 ms),
    without the total and the model load; the floor, when given, as a dashed line."""
    strategies = list(stage_ms)
    stages = stage_order(stage_ms)
    fig = go.Figure([
        go.Bar(name=stage, y=strategies, x=[stage_ms[s].get(stage, 0.0) for s in strategies],
               orientation="h", marker_color=STAGE_COLORS[i % len(STAGE_COLORS)],
               hovertemplate=f"{stage}: %{{x:.1f}} ms<extra>%{{y}}</extra>")
        for i, stage in enumerate(stages)
    ])
    if floor_ms is not None:
        fig.add_vline(x=floor_ms, line_dash="dash", line_color=RED,
                      annotation_text=f"floor {floor_ms:.1f} ms", annotation_position="top")
    fig.update_layout(barmode="stack")
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="milliseconds (p50 of each stage)")
    fig = _layout(fig, title, height=max(140 + 40 * len(strategies), 60 + 22 * len(stages)))
    # Stages listed top down in the order they run (left to right in each bar), beside the
    # bars: below them a long list would cover the axis title.
    fig.update_layout(legend={"orientation": "v", "traceorder": "normal", "x": 1.01, "y": 1,
                              "yanchor": "top"})
    return fig
