"""Precedence tiers: what the hash path and the semantic path found, each tier's reason, and
the rounds the cap dropped."""

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from core.models import FollowupHit, RetrievalTrace
from dashboard import charts, resources
from dashboard.text import plain


def _status(hit: FollowupHit, trace: RetrievalTrace) -> str:
    if hit.id in {f.id for f in trace.followups}:
        return "in context (follow-up entry)"
    if hit.id in {d.followup.id for d in trace.dropped_followups}:
        return "dropped"
    if hit.id in {c.id for c in trace.evidence}:
        return "in context as an excerpt"
    return "not in context"


def _path_table(hits: Sequence[FollowupHit], trace: RetrievalTrace, threshold: float) -> None:
    st.dataframe(
        pd.DataFrame([{
            "round": h.round_number,
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
        } for h in hits]),
        hide_index=True,
        column_config={
            "round": st.column_config.NumberColumn("Round", format="%d"),
            "status": st.column_config.TextColumn("Status"),
            "tier": st.column_config.TextColumn("Tier"),
            "tier_reason": st.column_config.TextColumn("Why this tier", width="large"),
            "hash_match": st.column_config.CheckboxColumn(
                "Hash match", help="the follow-up carries this criterion's hash"),
            "question_similarity": st.column_config.ProgressColumn(
                "Question similarity", format="%.2f", min_value=0.0, max_value=1.0,
                help="difflib ratio of the follow-up's question to the criterion text"),
            "versus_threshold": st.column_config.TextColumn(
                "vs threshold", help="FUZZY_MATCH_THRESHOLD: at or above means high tier"),
            "found_by": st.column_config.TextColumn(
                "Found by", help="hash: metadata lookup by criterion hash; semantic: in the "
                                 "semantic search window; first_stage: in the first-stage "
                                 "hits; near_copy: linked to a typo of this criterion"),
            "first_stage_score": st.column_config.NumberColumn(
                "First-stage cosine similarity", format="%.3f",
                help="cosine similarity of criterion and answer embeddings (1 - cosine "
                     "distance)"),
            "question": st.column_config.TextColumn("Question asked", width="medium"),
            "answer": st.column_config.TextColumn("Vendor's answer", width="medium"),
        },
    )


st.title("Precedence tiers")
selection, trace = resources.current_trace()
st.caption(
    f"Vendor **{plain(selection.vendor_id)}** · strategy **{plain(trace.strategy)}** · "
    f"criterion: {plain(trace.criterion)}"
)

threshold = float(trace.constants.get("fuzzy_match_threshold") or 0.7)
cap = trace.constants.get("max_followup_rounds")
threshold_col, cap_col, kept_col, dropped_col = st.columns(4)
threshold_col.metric("Similarity threshold", f"{threshold:.2f}",
                     help="FUZZY_MATCH_THRESHOLD: question similarity at or above it is high")
cap_col.metric("Round cap", cap, help="MAX_FOLLOWUP_ROUNDS: follow-ups kept at most")
kept_col.metric("Follow-ups in context", len(trace.followups))
dropped_col.metric("Dropped", len(trace.dropped_followups))
st.markdown(
    f"**Tiers:** hash match and question similarity >= {threshold:.2f}: **high**; "
    f"hash match with a reworded question (< {threshold:.2f}): **medium**; no hash match but "
    "found by search (or linked to a typo of this criterion): **low**. Kept in that order, "
    f"newest first within a tier, at most {cap}."
)

st.subheader("Hash path")
st.caption("Follow-ups linked to this criterion by its hash, however their question was worded.")
if trace.hash_path is None:
    st.info(f"This strategy ({trace.strategy}) has no hash path: it never looks follow-ups "
            "up by the criterion hash.")
elif not trace.hash_path:
    st.markdown("The hash path found no follow-up linked to this criterion.")
else:
    _path_table(trace.hash_path, trace, threshold)

st.subheader("Semantic path")
st.caption("Follow-ups found by similarity search, hash-linked or not.")
if trace.semantic_path is None:
    st.info(f"This strategy ({trace.strategy}) has no semantic path for follow-ups: any "
            "follow-up it finds by search competes as an ordinary excerpt.")
elif not trace.semantic_path:
    st.markdown("The semantic path found no follow-up for this criterion.")
else:
    _path_table(trace.semantic_path, trace, threshold)

st.subheader("Dropped follow-ups")
if trace.dropped_followups:
    st.dataframe(
        pd.DataFrame([{
            "round": d.followup.round_number,
            "tier": d.followup.tier or "no tier",
            "reason": d.reason,
        } for d in trace.dropped_followups]),
        hide_index=True,
        column_config={
            "round": st.column_config.NumberColumn("Round", format="%d"),
            "tier": st.column_config.TextColumn("Tier"),
            "reason": st.column_config.TextColumn("Why it was dropped", width="large"),
        },
    )
else:
    st.markdown("No follow-up was dropped.")

found: dict[str, FollowupHit] = {}
for hit in [*(trace.hash_path or []), *(trace.semantic_path or [])]:
    found.setdefault(hit.id, hit)
if found:
    ordered = sorted(found.values(), key=lambda h: (h.round_number, h.timestamp))
    st.plotly_chart(charts.similarity_figure(ordered, threshold))
