"""Precedence tiers: what the hash path and the semantic path found, each tier's reason, the
rounds the cap dropped, and each follow-up's relevance grade set with one click."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from core.models import FATE_MEANING, FATE_STATUS, FollowupHit, RetrievalTrace
from dashboard import actions, charts, judging, widgets
from dashboard.selection import selection


def _status(hit: FollowupHit, trace: RetrievalTrace) -> str:
    """The hit's fate in the trace's words; beside the excerpts, the entry is named."""
    fate = trace.fate(hit.id)
    return FATE_STATUS[fate] + (" (follow-up entry)" if fate == "in_context" else "")


def path_rows(hits: Sequence[FollowupHit], trace: RetrievalTrace,
              threshold: float) -> pd.DataFrame:
    """One row per follow-up a path found: what became of it, its tier and why."""
    current = trace.current_answer.id if trace.current_answer else None
    return pd.DataFrame([{
        "round": h.round_number,
        "standing": widgets.standing_words(h, current),
        "status": _status(h, trace),
        "tier": h.tier or "no tier",
        "tier_reason": h.tier_reason,
        "hash_match": h.hash_match,
        "question_similarity": h.question_similarity,
        "versus_threshold": (f">= {threshold:.2f}" if h.question_similarity >= threshold
                             else f"< {threshold:.2f}"),
        "found_by": ", ".join(h.found_by),
        "first_stage_score": h.first_stage_score,
        "question": h.question_text,
        "answer": h.answer_text,
    } for h in hits])


def found_in_round_order(trace: RetrievalTrace) -> list[FollowupHit]:
    """Every follow-up either path found, once, oldest round first."""
    found: dict[str, FollowupHit] = {}
    for hit in [*(trace.hash_path or []), *(trace.semantic_path or [])]:
        found.setdefault(hit.id, hit)
    return sorted(found.values(), key=lambda h: (h.round_number, h.timestamp))


def show_path(title: str, about: str, hits: Sequence[FollowupHit] | None,
              trace: RetrievalTrace, threshold: float, *, no_path: str,
              nothing_found: str) -> None:
    """One path's follow-ups; `hits` is None when the strategy has no such path."""
    st.subheader(title)
    st.caption(about)
    if hits is None:
        st.info(no_path)
        return
    if not hits:
        st.markdown(nothing_found)
        return
    st.dataframe(path_rows(hits, trace, threshold), hide_index=True, column_config={
        **widgets.followup_columns(widgets.question_similarity_column(bar=True),
                                   answer_width="medium"),
        "status": st.column_config.TextColumn("Status"),
        "standing": widgets.standing_column(),
        "hash_match": st.column_config.CheckboxColumn(
            "Hash match", help="the follow-up carries this criterion's hash"),
        "versus_threshold": st.column_config.TextColumn(
            "vs threshold", help="FUZZY_MATCH_THRESHOLD: at or above means high tier"),
    })


def show_dropped(trace: RetrievalTrace) -> None:
    st.subheader("Dropped follow-ups")
    if not trace.dropped_followups:
        st.markdown("No follow-up was dropped.")
        return
    st.dataframe(pd.DataFrame([{
        "round": d.followup.round_number,
        "tier": d.followup.tier or "no tier",
        "fate": FATE_MEANING[d.fate],
        "reason": d.reason,
    } for d in trace.dropped_followups]), hide_index=True, column_config={
        "round": widgets.round_column(),
        "tier": widgets.tier_column(),
        "fate": st.column_config.TextColumn("Dropped how"),
        "reason": st.column_config.TextColumn("Why it was dropped", width="large"),
    })


def render() -> None:
    """The page: the threshold and the cap, each path's follow-ups, what was dropped, and the
    grades of the follow-ups found."""
    shown = selection()
    widgets.header("Precedence tiers", shown)
    chosen = widgets.require_selection(shown)
    trace = actions.current_trace(chosen)

    threshold = trace.constants.fuzzy_match_threshold
    cap = trace.constants.max_followup_rounds
    threshold_col, cap_col, kept_col, dropped_col = st.columns(4)
    threshold_col.metric("Similarity threshold", f"{threshold:.2f}",
                         help="FUZZY_MATCH_THRESHOLD: question similarity at or above it is high")
    cap_col.metric("Round cap", cap, help="MAX_FOLLOWUP_ROUNDS: follow-ups kept at most")
    kept_col.metric("Follow-ups in context", len(trace.followups))
    dropped_col.metric("Dropped", len(trace.dropped_followups))
    st.markdown(
        f"**Tiers:** hash match and question similarity >= {threshold:.2f}: **high**; "
        f"hash match with a reworded question (< {threshold:.2f}): **medium**; no hash match "
        "but found by search (or linked to a typo of this criterion): **low**. Kept in that "
        f"order, newest first within a tier, at most {cap}."
    )

    show_path("Hash path", "Follow-ups linked to this criterion by its hash, however their "
              "question was worded.", trace.hash_path, trace, threshold,
              no_path=f"This strategy ({trace.strategy}) has no hash path: it never looks "
                      "follow-ups up by the criterion hash.",
              nothing_found="The hash path found no follow-up linked to this criterion.")
    show_path("Semantic path", "Follow-ups found by similarity search, hash-linked or not.",
              trace.semantic_path, trace, threshold,
              no_path=f"This strategy ({trace.strategy}) has no semantic path for follow-ups: "
                      "any follow-up it finds by search competes as an ordinary excerpt.",
              nothing_found="The semantic path found no follow-up for this criterion.")

    show_dropped(trace)

    found = found_in_round_order(trace)
    if found:
        st.plotly_chart(charts.similarity_figure(found, threshold))
    judging.judge_excerpts(
        chosen, [judging.followup_excerpt(h, f"round {h.round_number}, {_status(h, trace)}")
                 for h in found], page="tiers",
        about="The follow-ups either path found, oldest round first, dropped ones too.")


# Streamlit runs a page file as __main__; importing it defines the functions above without
# drawing the page or opening a store.
if __name__ == "__main__":
    render()
