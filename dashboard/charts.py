"""Plotly figures as pure functions of plain data: testable without Streamlit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from core.analysis import RankedItem, RoundRow
from core.models import FollowupHit

TIER_COLORS = {"high": "#1b7f3b", "medium": "#d08a00", "low": "#7a7f87", None: "#b4b9c0"}
HIGHLIGHT = "#1f5fa8"
MUTED = "#b4b9c0"


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
    fig.add_vline(x=threshold, line_dash="dash", line_color="#c0392b",
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
        fig.add_hline(y=top_n + 0.5, line_dash="dot", line_color="#c0392b",
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
                         marker_color="#8fb3de"))
    if any(i.rerank_score is not None for i in items):
        fig.add_trace(go.Bar(name="rerank relevance (0..1)", y=labels,
                             x=[i.rerank_score for i in items], orientation="h",
                             marker_color="#5b8cc8"))
    fig.add_trace(go.Bar(name="final (after boost)", y=labels,
                         x=[i.final_score for i in items], orientation="h",
                         marker_color=HIGHLIGHT,
                         text=[f"x{i.boost:g}" if i.boost != 1.0 else "" for i in items],
                         textposition="outside"))
    fig.update_layout(barmode="group")
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="score")
    return _layout(fig, "Score parts", height=120 + 60 * max(len(items), 1))


def rounds_timeline_figure(rows: Sequence[RoundRow]) -> go.Figure:
    """Every linked round over time: colour = tier, filled = in context, hollow = dropped."""
    fig = go.Figure()
    for status, symbol in (("in context", "circle"), ("dropped", "circle-open"),
                           ("not found by this strategy", "x")):
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
    """Stacked chunk counts per vendor by `type`."""
    types = sorted({t for counts in by_type.values() for t in counts})
    vendors = list(by_type)
    fig = go.Figure([
        go.Bar(name=t, x=vendors, y=[by_type[v].get(t, 0) for v in vendors]) for t in types
    ])
    fig.update_layout(barmode="stack")
    fig.update_yaxes(title="records")
    return _layout(fig, "Stored records by type")
