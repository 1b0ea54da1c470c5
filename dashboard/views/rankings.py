"""Boosted vs unboosted: the reranked list before and after the follow-up document boost,
every score with its parts, the grades of the candidates near the cut set with one click, a
what-if boost, and a comparison of two strategies."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.errors import EvidenceError
from core.models import Candidate, RetrievalTrace
from core.retrieval.strategies import STRATEGIES
from core.trace.analysis import (
    RankedItem,
    base_score,
    compare_traces,
    entry_boost,
    kind_label,
    move_label,
    ranked_items,
    whatif_ranking,
)
from core.trace.context import evidence_source
from dashboard import actions, charts, judging, resources, widgets
from dashboard.selection import Selection, selection

FIRST_STAGE = "First-stage: cosine similarity of query and chunk embeddings (-1..1)"
RERANK = "Rerank: cross-encoder relevance of the chunk to the criterion (0..1)"
BOOST = "Boost: factor applied to follow-up document chunks (`followup_document`)"
FINAL = "Final: the score that ranks = base score (rerank, else first-stage) x boost"


def score_sentence(item: RankedItem, reranker_ran: bool) -> str:
    """How the final score is built, RAGFlow-style: '0.493 = 0.429 rerank x 1.15 boost'."""
    if item.final_score is None:
        return "no score"
    if reranker_ran and item.rerank_score is not None:
        base, name = item.rerank_score, "rerank relevance"
    else:
        base, name = item.first_stage_score or 0.0, "first-stage cosine"
    if item.boost == 1.0:
        return f"{item.final_score:.3f} = {base:.3f} {name}, no boost"
    return f"{item.final_score:.3f} = {base:.3f} {name} x {item.boost:g} boost"


def ranking_rows(items: list[RankedItem], reranker_ran: bool) -> pd.DataFrame:
    return pd.DataFrame([{
        "Rank after boost": i.rank_after,
        "Rank before boost": i.rank_before,
        "Move": i.move,
        "In context": i.in_context,
        "Source": i.label,
        "Final score built as": score_sentence(i, reranker_ran),
        "First-stage (cosine)": i.first_stage_score,
        "Rerank (0..1)": i.rerank_score if reranker_ran else "no reranker ran",
        "Boost": i.boost,
        "Final": i.final_score,
        "Type": kind_label(i.type),
        "Id": i.id,
    } for i in items])


def entry_text(candidates: list[Candidate], candidate: Candidate, top_n: int,
               cap: float | None) -> str:
    """What boost brings this follow-up document into the top N, in words."""
    needed = entry_boost(candidates, candidate.id, top_n, cap)
    if needed is None:
        return f"never: capped at {cap:g}" if cap is not None else "never, up to x100"
    if needed == 1.0:
        return f"already in the top {top_n}"
    return f"x{needed:.3f}"


def compare(a: RetrievalTrace, b: RetrievalTrace) -> None:
    """Shared and unique context items of two strategies, with their moves."""
    compared = compare_traces(a, b)
    groups = {
        "shared": [c for c in compared if c.rank_a and c.rank_b],
        f"only {a.strategy}": [c for c in compared if c.rank_a and not c.rank_b],
        f"only {b.strategy}": [c for c in compared if c.rank_b and not c.rank_a],
    }
    cols = st.columns(3)
    for col, (name, rows) in zip(cols, groups.items(), strict=True):
        col.metric(f"{name.capitalize()} evidence", len(rows))
    st.dataframe(pd.DataFrame([{
        "In": name,
        "Evidence": c.label,
        f"Position in {a.strategy}": c.rank_a,
        f"Position in {b.strategy}": c.rank_b,
        "Move": c.move,
        "Id": c.id,
    } for name, rows in groups.items() for c in rows]), hide_index=True)
    st.plotly_chart(charts.slope_figure(
        [(c.label, c.rank_a, c.rank_b) for c in compared], a.strategy, b.strategy,
        highlight=[bool(c.rank_a and c.rank_b) for c in compared]), key="slope_compare")


def show_rankings(trace: RetrievalTrace, top_n: int) -> None:
    """The ranking before and after the boost, side by side and as a slope chart."""
    reranker_ran = trace.reranker.ran
    items = ranked_items(trace.reranked, {c.id for c in trace.evidence})
    st.subheader("The two rankings")
    st.dataframe(ranking_rows(items, reranker_ran), hide_index=True, column_config={
        "In context": st.column_config.CheckboxColumn(help=f"In the top {top_n}"),
        "First-stage (cosine)": st.column_config.NumberColumn(format="%.3f", help=FIRST_STAGE),
        "Rerank (0..1)": st.column_config.NumberColumn(format="%.3f", help=RERANK)
        if reranker_ran else st.column_config.TextColumn(help=trace.reranker.reason),
        "Boost": st.column_config.NumberColumn(format="x%.2f", help=BOOST),
        "Final": st.column_config.NumberColumn(format="%.3f", help=FINAL),
    })

    shown = [i for i in items if min(i.rank_before, i.rank_after) <= 2 * top_n]
    st.plotly_chart(charts.slope_figure(
        [(i.label, i.rank_before, i.rank_after) for i in shown], "before boost", "after boost",
        highlight=[i.type == "followup_document" for i in shown], top_n=top_n),
        key="slope_boost")
    st.plotly_chart(charts.score_parts_figure(
        sorted(shown, key=lambda i: i.rank_after)), key="score_parts")


def near_the_cut(trace: RetrievalTrace, top_n: int) -> list[judging.Excerpt]:
    """The candidates ranked in the top 2N before or after the boost, in their order after
    it, as excerpts to judge."""
    in_context = {c.id for c in trace.evidence}
    near = sorted((c for c in trace.reranked
                   if min((r for r in (c.rank_before_boost, c.rank_after_boost) if r),
                          default=2 * top_n + 1) <= 2 * top_n),
                  key=lambda c: c.rank_after_boost or len(trace.reranked) + 1)
    return [judging.chunk_excerpt(c, f"rank {c.rank_after_boost} (before the boost "
                                     f"{c.rank_before_boost})"
                                     + (", in context" if c.id in in_context else ""))
            for c in near]


def show_whatif(trace: RetrievalTrace, top_n: int, factor: float, cap: float | None,
                boosted: bool) -> None:
    """The same candidates re-ranked under another boost, and what enters or leaves the top."""
    st.subheader("What if the boost were different?")
    st.caption("Re-ranked from this trace's own scores: nothing is searched again.")
    whatif = st.slider("Follow-up document boost", 1.0, 3.0, value=min(max(factor, 1.0), 3.0),
                       step=0.05, key="whatif_boost", format="x%.2f")
    reranked = list(trace.reranked)
    actual_rank = {c.id: c.rank_after_boost for c in reranked}
    imagined = whatif_ranking(reranked, whatif, cap)
    st.dataframe(pd.DataFrame([{
        "What-if rank": c.rank_after_boost,
        "Unboosted rank": c.rank_before_boost,
        "Move": move_label(c.rank_before_boost, c.rank_after_boost),
        f"Actual rank (x{factor:g})" if boosted else "Actual rank": actual_rank.get(c.id),
        "Source": evidence_source(c),
        "Type": kind_label(c.type, c.round_number),
        "Base score": base_score(c),
        "Boost": c.boost,
        "What-if score": c.final_score,
    } for c in imagined[:top_n]]), hide_index=True, column_config={
        "Base score": st.column_config.NumberColumn(
            format="%.3f", help="rerank relevance if a reranker ran, else first-stage cosine"),
        "Boost": st.column_config.NumberColumn(format="x%.2f", help=BOOST),
        "What-if score": st.column_config.NumberColumn(format="%.3f"),
    })
    actual_top = [c.id for c in reranked if (c.rank_after_boost or 0) <= top_n]
    imagined_top = [c.id for c in imagined[:top_n]]
    entering = sorted(set(imagined_top) - set(actual_top), key=imagined_top.index)
    leaving = sorted(set(actual_top) - set(imagined_top), key=actual_top.index)
    by_id = {c.id: c for c in reranked}
    if entering or leaving:
        st.markdown(
            f"Against the actual ranking, at x{whatif:g}: enter the top {top_n}: "
            + (", ".join(evidence_source(by_id[i]) for i in entering) or "none")
            + "; leave it: " + (", ".join(evidence_source(by_id[i]) for i in leaving) or "none"))
    else:
        st.markdown(f"At x{whatif:g} the top {top_n} holds the same evidence as the actual "
                    "ranking.")

    documents = [c for c in sorted(reranked, key=lambda c: c.rank_before_boost or 0)
                 if c.type == "followup_document"]
    if not documents:
        st.info("No follow-up document was reranked for this criterion: a boost changes "
                "nothing.")
        return
    st.markdown(f"**Boost at which each follow-up document enters the top {top_n}**")
    st.dataframe(pd.DataFrame([{
        "Source": evidence_source(c),
        "Round": c.round_number,
        "Unboosted rank": c.rank_before_boost,
        "Base score": base_score(c),
        "Enters the top at": entry_text(reranked, c, top_n, cap),
        "Id": c.id,
    } for c in documents]), hide_index=True,
        column_config={"Base score": st.column_config.NumberColumn(format="%.3f")})


def show_strategy_comparison(chosen: Selection) -> None:
    """Two strategies picked on the page, their contexts compared."""
    st.subheader("Compare two strategies")
    st.caption("Positions in each context (excerpts, then the follow-up entry); "
               "moves read from the first strategy to the second.")
    names = list(STRATEGIES)
    pick_a, pick_b = st.columns(2)
    strategy_a = pick_a.selectbox("Strategy A", names, key="compare_a",
                                  index=names.index(chosen.strategy))
    strategy_b = pick_b.selectbox("Strategy B", names, key="compare_b",
                                  index=names.index("semantic"))
    if strategy_a == strategy_b:
        st.info("Pick two different strategies to compare.")
        return
    try:
        trace_a, trace_b = (resources.retrieve(chosen.vendor_id, chosen.criterion, name)
                            for name in (strategy_a, strategy_b))
    except EvidenceError as exc:
        widgets.show_error(exc, "The retrieval failed")
    else:
        compare(trace_a, trace_b)


def render() -> None:
    """The page: what the scores mean, both rankings, the grades of the candidates near the
    cut, the what-if boost, and two strategies side by side."""
    chosen = selection()
    widgets.header("Boosted vs unboosted", chosen)
    chosen = widgets.require_selection(chosen)
    trace = actions.current_trace(chosen)

    top_n = trace.constants.top_reranked_n
    factor = trace.constants.followup_document_boost
    cap = trace.constants.followup_boost_cap
    boosted = trace.boost is not None
    reranker_ran = trace.reranker.ran

    with st.expander("What the scores mean", expanded=False):
        rerank_line = RERANK if reranker_ran else (
            f"Rerank: no reranker ran ({trace.reranker.reason}); first-stage scores rank "
            "instead")
        cap_line = f"; a boosted score is capped at {cap:g}" if cap is not None else ""
        st.markdown(f"- {FIRST_STAGE}\n- {rerank_line}\n- {BOOST}: x{factor:g}{cap_line}\n"
                    f"- {FINAL}\n- In context: the top {top_n} after the boost that passed the "
                    "relevancy cutoff")

    if not trace.reranked:
        st.info("This retrieval reranked nothing: there is no ranking to show.")
        st.stop()
    if boosted:
        st.markdown(f"**{trace.strategy}** multiplies follow-up document scores by "
                    f"**x{factor:g}**" + (f" (a boosted score never exceeds {cap:g})" if cap
                                          else "")
                    + ", then re-sorts; \"Up N\" / \"Down N\" mark how far each item moved. "
                    + (f"Here it moved {trace.boost.moved} of {len(trace.reranked)} candidates "
                       f"({trace.boost.boosted} follow-up document chunks boosted)."
                       if trace.boost.changed_ranking else
                       "Here it changed no rank."))
    else:
        st.info(f"The {trace.strategy} strategy applies no boost: both rankings are the same. "
                "The what-if below shows what a boost would change.")
    if not reranker_ran:
        st.caption("No reranker ran, so the ranking is the first stage's similarity.")

    show_rankings(trace, top_n)
    judging.judge_excerpts(chosen, near_the_cut(trace, top_n), page="rankings",
                           about=f"The candidates ranked in the top {2 * top_n} before or "
                                 "after the boost, in their order after it.")
    show_whatif(trace, top_n, factor, cap, boosted)
    show_strategy_comparison(chosen)


# Streamlit runs a page file as __main__; importing it defines the functions above without
# drawing the page or opening a store.
if __name__ == "__main__":
    render()
