"""Criterion overview: hash, reranker, timings, and what made the context, with every score."""


import pandas as pd
import streamlit as st

from core.context import evidence_source
from dashboard import charts, resources
from dashboard.text import plain

st.title("Criterion overview")
selection, trace = resources.current_trace()
st.caption(
    f"Vendor **{plain(selection.vendor_id)}** · strategy **{plain(trace.strategy)}** · "
    f"criterion: {plain(trace.criterion)}"
)

hash_col, followups_col, excerpts_col, total_col = st.columns([2, 1, 1, 1])
hash_col.metric("Criterion hash", trace.criterion_hash,
                help="first 16 hex digits of SHA-256 of the criterion, lower-cased with spaces "
                     "collapsed; a follow-up answer carries the hash of the criterion it answers")
followups_col.metric("Follow-ups in context", len(trace.followups))
excerpts_col.metric("Excerpts in context", len(trace.evidence))
total_col.metric("Total time", f"{trace.timings_ms.get('total', 0.0):.0f} ms")

if trace.reranker.ran:
    st.markdown(f"**Reranker:** {plain(trace.reranker.name)} ({plain(trace.reranker.reason)})")
else:
    st.warning(
        f"No reranker ran, so no excerpt has a rerank score: {trace.reranker.reason}.",
        icon=":material/warning:",
    )
st.caption(f"Embedding model: {plain(trace.embedding_model)}")

st.subheader("Follow-ups in the context")
if trace.followups:
    st.dataframe(
        pd.DataFrame([{
            "round": f.round_number,
            "tier": f.tier or "none",
            "question_similarity": f.question_similarity,
            "first_stage_score": f.first_stage_score,
            "tier_reason": f.tier_reason,
            "timestamp": f.timestamp,
            "found_by": ", ".join(f.found_by),
            "question": f.question_text,
            "answer": f.answer_text,
        } for f in trace.followups]),
        hide_index=True,
        column_config={
            "round": st.column_config.NumberColumn("Round", format="%d"),
            "timestamp": st.column_config.TextColumn("Answered at"),
            "tier": st.column_config.TextColumn("Tier"),
            "tier_reason": st.column_config.TextColumn("Why this tier", width="large"),
            "question_similarity": st.column_config.NumberColumn(
                "Question similarity", format="%.2f",
                help="difflib ratio of the follow-up's question to the criterion; "
                     f"at or above {trace.constants.get('fuzzy_match_threshold')} means high"),
            "first_stage_score": st.column_config.NumberColumn(
                "First-stage cosine similarity", format="%.3f",
                help="cosine similarity of criterion and answer embeddings (1 - cosine "
                     "distance); empty when the strategy did not score it"),
            "found_by": st.column_config.TextColumn("Found by"),
            "question": st.column_config.TextColumn("Question asked", width="medium"),
            "answer": st.column_config.TextColumn("Vendor's answer", width="large"),
        },
    )
else:
    st.markdown("No follow-up answer is in the context for this criterion and strategy.")

st.subheader("Excerpts in the context")
if trace.evidence:
    reranked = trace.reranker.ran
    st.dataframe(
        pd.DataFrame([{
            "position": f"index_{i}",
            "source": evidence_source(c),
            "first_stage_score": c.first_stage_score,
            "first_stage_rank": c.first_stage_rank,
            "rerank_score": c.rerank_score if reranked else "no reranker ran",
            "boost": c.boost,
            "final_score": c.final_score,
            "type": c.type,
            "text": c.text,
        } for i, c in enumerate(trace.evidence, start=1)]),
        hide_index=True,
        column_config={
            "position": st.column_config.TextColumn(
                "Context entry", help="the <index_N> element of the XML context"),
            "source": st.column_config.TextColumn("Source"),
            "type": st.column_config.TextColumn("Type"),
            "first_stage_score": st.column_config.NumberColumn(
                "First-stage cosine similarity", format="%.3f",
                help="cosine similarity of criterion and chunk embeddings (1 - cosine distance)"),
            "first_stage_rank": st.column_config.NumberColumn("First-stage rank", format="%d"),
            "rerank_score": (
                st.column_config.NumberColumn(
                    "Rerank relevance (0..1)", format="%.3f",
                    help="cross-encoder relevance of the chunk to the criterion, 0..1")
                if reranked else st.column_config.TextColumn(
                    "Rerank relevance", help=trace.reranker.reason)),
            "boost": st.column_config.NumberColumn(
                "Boost factor", format="x%.2f",
                help="multiplier for follow-up documents; x1.00 means not boosted"),
            "final_score": st.column_config.NumberColumn(
                "Final score", format="%.3f",
                help="rerank relevance (or first-stage similarity without a reranker) "
                     "times the boost factor, as ranked"),
            "text": st.column_config.TextColumn("Excerpt", width="large"),
        },
    )
else:
    st.markdown("No document excerpt made the context.")

st.subheader("Time per stage")
st.plotly_chart(charts.timings_figure(trace.timings_ms))

if trace.notes:
    with st.expander(f"Notes from this retrieval ({len(trace.notes)})"):
        for note in trace.notes:
            st.markdown(f"- {plain(note)}")
