"""Criterion overview: hash, reranker, timings, and what made the context, with every score."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.models import RetrievalTrace
from core.trace.context import evidence_source
from dashboard import actions, charts, widgets
from dashboard.selection import selection
from dashboard.text import plain


def followup_rows(trace: RetrievalTrace) -> pd.DataFrame:
    """One row per follow-up answer in the context."""
    return pd.DataFrame([{
        "round": f.round_number,
        "tier": f.tier or "none",
        "question_similarity": f.question_similarity,
        "first_stage_score": f.first_stage_score,
        "tier_reason": f.tier_reason,
        "timestamp": f.timestamp,
        "found_by": ", ".join(f.found_by),
        "question": f.question_text,
        "answer": f.answer_text,
    } for f in trace.followups])


def excerpt_rows(trace: RetrievalTrace) -> pd.DataFrame:
    """One row per document excerpt in the context, every score beside it."""
    reranked = trace.reranker.ran
    return pd.DataFrame([{
        "position": f"index_{i}",
        "source": evidence_source(c),
        "first_stage_score": c.first_stage_score,
        "first_stage_rank": c.first_stage_rank,
        "rerank_score": c.rerank_score if reranked else "no reranker ran",
        "boost": c.boost,
        "final_score": c.final_score,
        "type": c.type,
        "text": c.text,
    } for i, c in enumerate(trace.evidence, start=1)])


def show_followups(trace: RetrievalTrace) -> None:
    st.subheader("Follow-ups in the context")
    if not trace.followups:
        st.markdown("No follow-up answer is in the context for this criterion and strategy.")
        return
    similarity = widgets.question_similarity_column(trace.constants.fuzzy_match_threshold)
    st.dataframe(followup_rows(trace), hide_index=True, column_config={
        **widgets.followup_columns(similarity, answer_width="large"),
        "timestamp": widgets.answered_at_column(),
    })


def show_excerpts(trace: RetrievalTrace) -> None:
    st.subheader("Excerpts in the context")
    if not trace.evidence:
        st.markdown("No document excerpt made the context.")
        return
    st.dataframe(excerpt_rows(trace), hide_index=True, column_config={
        "position": st.column_config.TextColumn(
            "Context entry", help="the <index_N> element of the XML context"),
        "source": st.column_config.TextColumn("Source"),
        "type": st.column_config.TextColumn("Type"),
        "first_stage_score": widgets.first_stage_column("chunk"),
        "first_stage_rank": st.column_config.NumberColumn("First-stage rank", format="%d"),
        "rerank_score": (
            st.column_config.NumberColumn(
                "Rerank relevance (0..1)", format="%.3f",
                help="cross-encoder relevance of the chunk to the criterion, 0..1")
            if trace.reranker.ran else st.column_config.TextColumn(
                "Rerank relevance", help=trace.reranker.reason)),
        "boost": st.column_config.NumberColumn(
            "Boost factor", format="x%.2f",
            help="multiplier for follow-up documents; x1.00 means not boosted"),
        "final_score": st.column_config.NumberColumn(
            "Final score", format="%.3f",
            help="rerank relevance (or first-stage similarity without a reranker) "
                 "times the boost factor, as ranked"),
        "text": st.column_config.TextColumn("Excerpt", width="large"),
    })


def render() -> None:
    """The page: the trace's headline figures, then the follow-ups, the excerpts and the
    time each stage took."""
    chosen = selection()
    widgets.header("Criterion overview", chosen)
    trace = actions.current_trace(widgets.require_selection(chosen))

    hash_col, followups_col, excerpts_col, total_col = st.columns([2, 1, 1, 1])
    hash_col.metric("Criterion hash", trace.criterion_hash,
                    help="first 16 hex digits of SHA-256 of the criterion, lower-cased with "
                         "spaces collapsed; a follow-up answer carries the hash of the "
                         "criterion it answers")
    followups_col.metric("Follow-ups in context", len(trace.followups))
    excerpts_col.metric("Excerpts in context", len(trace.evidence))
    total_col.metric("Total time", f"{trace.timings_ms.get('total', 0.0):.0f} ms")

    if trace.reranker.ran:
        st.markdown(f"**Reranker:** {plain(trace.reranker.name)} "
                    f"({plain(trace.reranker.reason)})")
    else:
        st.warning(
            f"No reranker ran, so no excerpt has a rerank score: {trace.reranker.reason}.",
            icon=":material/warning:",
        )
    st.caption(f"Embedding model: {plain(trace.embedding_model)}")

    show_followups(trace)
    show_excerpts(trace)

    st.subheader("Time per stage")
    st.plotly_chart(charts.timings_figure(trace.timings_ms))

    if trace.notes:
        with st.expander(f"Notes from this retrieval ({len(trace.notes)})"):
            for note in trace.notes:
                st.markdown(f"- {plain(note)}")


# Streamlit runs a page file as __main__; importing it defines the functions above without
# drawing the page or opening a store.
if __name__ == "__main__":
    render()
