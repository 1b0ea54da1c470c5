"""Criterion overview: the vendor's current answer to the criterion first, with the earlier
answers and any contradiction between them (where no round answers it, the current documents'
best excerpts for it, dated); the controls the criterion is mapped to and the answers linked
through them; then the reviewer's decision (its state, history
and the form to record a new one), the supporting excerpts and follow-ups with every score
and a one-click relevance grade; the hash, the models and the timings last, in the details."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import streamlit as st

from core.errors import EvidenceError
from core.models import Candidate, RetrievalTrace, by_round
from core.review.contradictions import Contradiction, find_contradictions
from core.review.decisions import (
    MAX_NOTE_CHARS,
    MAX_REVIEWER_CHARS,
    STATUS_LABELS,
    STATUSES,
    DecisionView,
    default_reviewer,
)
from core.trace.analysis import kind_label
from core.trace.context import document_date, evidence_source, response_date
from dashboard import actions, auth, charts, judging, resources, widgets
from dashboard.selection import Selection, selection
from dashboard.text import plain
from dashboard.views.decisions import show_contradictions, show_history, show_state

WAIVER_NEEDS_DATE = "A waiver needs a date: pick the last day it holds under Waived until."
# What the last press of Record decision left for the page to show: a refusal, or that the
# decision was recorded.
REFUSED_KEY = "decision_refused"
RECORDED_KEY = "decision_recorded"


def followup_rows(trace: RetrievalTrace) -> pd.DataFrame:
    """One row per follow-up answer in the context, the answer and its standing first."""
    current = trace.current_answer.id if trace.current_answer else None
    return pd.DataFrame([{
        "round": f.round_number,
        "answer": f.answer_text,
        "standing": widgets.standing_words(f, current),
        "tier": f.tier or "none",
        "control": f.control.id if f.control else "",
        "sheet": f.sheet or "",
        "question": f.question_text,
        "timestamp": f.timestamp,
        "question_similarity": f.question_similarity,
        "first_stage_score": f.first_stage_score,
        "tier_reason": f.tier_reason,
        "found_by": ", ".join(f.found_by),
    } for f in trace.followups])


def show_current_answer(chosen: Selection, trace: RetrievalTrace) -> None:
    """The first thing the page says: the vendor's newest answer to the criterion (its text,
    round, date and source), what earlier rounds said, and where two answers disagree."""
    current = trace.current_answer
    if current is None:
        show_current_documents(trace)
        return
    st.subheader("The vendor's current answer")
    st.markdown(f"**Round {current.round_number}** · answered "
                f"{plain(response_date(current.answered_at))} · {plain(current.source)}")
    with st.container(border=True, key="current_answer"):
        st.markdown(plain(current.answer_text))
        st.caption(f"Asked: {plain(current.question_text)}")
    if current.linked_by_control is not None:
        st.caption(f"This answer is {plain(current.linked_by_control.label())}"
                   f"{f', on sheet {plain(current.sheet)}' if current.sheet else ''}: the "
                   "criterion is mapped to that control (see Controls below).")
    linked = resources.linked_followups(chosen.vendor_id, chosen.criterion)
    earlier = [h for h in by_round(linked, newest_first=True) if h.later_answer is not None]
    if earlier:
        st.markdown("**Earlier answers** (a later round answered this criterion; a later "
                    "answer may cover another part of it rather than correct it):\n"
                    + "\n".join(f"- Round {h.round_number} "
                                f"({plain(response_date(h.timestamp))}) said: "
                                f"“{plain(' '.join(h.answer_text.split()))}”"
                                for h in earlier))
    show_answer_contradictions(find_contradictions(linked, trace.evidence))


# Excerpts of current documents led with when no round answers the criterion.
LEADING_EXCERPTS = 3


def show_current_documents(trace: RetrievalTrace) -> None:
    """Where no round answers the criterion (a vendor that sent documents only): its current
    documents' best excerpts for it, each dated, and what is superseded or stale."""
    st.subheader("The vendor's current documents")
    documents = [c for c in trace.evidence if c.document is not None]
    current = [c for c in documents if c.later_version is None]
    st.caption("No questionnaire round answers this criterion yet; these are the best "
               "excerpts of the vendor's current documents for it. The Next round page drafts "
               "the question for the vendor.")
    if not current:
        st.info("No excerpt of a current document is in the context for this criterion.",
                icon=":material/help:")
    for number, excerpt in enumerate(current[:LEADING_EXCERPTS], start=1):
        standing = excerpt.document
        st.markdown(f"**{plain(excerpt.source)}** · {plain(document_date(standing))}"
                    + (f" · {plain(excerpt.section)}" if excerpt.section else "")
                    + (f" · page {excerpt.page}" if excerpt.page else ""))
        with st.container(border=True, key=f"current_document_{number}"):
            st.markdown(plain(" ".join(excerpt.text.split())))
        if standing.stale:
            st.warning(plain(standing.stale), icon=":material/history:")
    superseded = [c for c in documents if c.later_version is not None]
    if superseded:
        st.markdown("**Superseded documents in the context** (labelled so for the model; "
                    "their current version stands ahead of them):\n" + "\n".join(
                        f"- {plain(c.source)} ({plain(document_date(c.document))}), superseded "
                        f"by {plain(c.later_version.source)} ({plain(c.later_version.date)})"
                        for c in dict((c.source, c) for c in superseded).values()))


def show_answer_contradictions(found: list[Contradiction]) -> None:
    """Each contradiction in one sentence, with the words of each side."""
    if not found:
        return
    lines = []
    for contradiction in found:
        lines.append(f"- {plain(contradiction.sentence)}")
        lines += [f"    - {plain(side.capitalize())}: “{plain(' '.join(quote.split()))}”"
                  for side, quote in zip(contradiction.between, contradiction.quotes,
                                         strict=True) if quote]
    st.warning("**Contradictions found without a model:**\n" + "\n".join(lines),
               icon=":material/compare_arrows:")


def excerpt_rows(trace: RetrievalTrace) -> pd.DataFrame:
    """One row per excerpt in the context, its text first and every score beside it; a
    follow-up answer says its round, date and standing."""
    reranked = trace.reranker.ran
    current = trace.current_answer.id if trace.current_answer else None
    return pd.DataFrame([{
        "position": f"index_{i}",
        "source": evidence_source(c),
        "date": (document_date(c.document) if c.document is not None
                 else f"round {c.round_number}, {response_date(str(c.metadata.get('timestamp')))}"
                 if c.is_followup and c.round_number is not None else ""),
        "status": excerpt_status(c, current),
        "text": c.text,
        "type": kind_label(c.type, c.round_number),
        "first_stage_score": c.first_stage_score,
        "first_stage_rank": c.first_stage_rank,
        "rerank_score": c.rerank_score if reranked else "no reranker ran",
        "boost": c.boost,
        "final_score": c.final_score,
    } for i, c in enumerate(trace.evidence, start=1)])


def excerpt_status(candidate: Candidate, current: str | None) -> str:
    """An excerpt's standing in words: a document's version (current, superseded by what,
    stale), an answer's (current, earlier)."""
    if candidate.document is not None:
        if candidate.later_version is not None:
            said = (f"superseded by {candidate.later_version.source} "
                    f"({candidate.later_version.date})")
        else:
            said = "current version" if candidate.document.earlier_versions else "current"
        return f"{said}; stale: {candidate.document.stale}" if candidate.document.stale \
            else said
    if candidate.later_answer is not None:
        return (f"earlier answer; round {candidate.later_answer.round_number} answered "
                "later")
    return "the current answer" if candidate.id == current else ""


def control_rows(trace: RetrievalTrace) -> pd.DataFrame:
    """One row per control the criterion is mapped to: who mapped it, its score, and the
    answers linked through it (in the context or left out), with their sheets."""
    linked = [*trace.followups, *(d.followup for d in trace.dropped_followups)]
    rows = []
    for control in trace.controls:
        answers = [h for h in linked if h.linked_by_control is not None
                   and h.linked_by_control.id == control.id]
        where = sorted({f"round {h.round_number}" + (f", {h.sheet}" if h.sheet else "")
                        for h in answers})
        rows.append({"control": control.id, "title": control.title or "",
                     "status": control.status, "score": control.score,
                     "answers": len(answers), "answered in": "; ".join(where)})
    return pd.DataFrame(rows)


def show_controls(trace: RetrievalTrace) -> None:
    """The controls the criterion is mapped to and the answers linked through them; shown
    where the vendor's answers are keyed by controls."""
    if not trace.controls:
        return
    st.subheader("Controls")
    decided = all(c.status == "accepted" for c in trace.controls)
    st.caption("The controls that answer this criterion: "
               + ("accepted by a reviewer." if decided else
                  "proposed by the ranking over the NIST SP 800-53 catalog until a reviewer "
                  "decides (Criteria and controls page).")
               + " The vendor's answers keyed by them are linked in the control tier, "
                 "whatever words they use.")
    st.dataframe(control_rows(trace), hide_index=True, key="criterion_controls",
                 column_config={
                     "score": st.column_config.NumberColumn(
                         "Score", format="%.2f",
                         help="the proposal's fused score (embedding and BM25 over the "
                              "control's title and statement); none for an accepted id"),
                     "answers": st.column_config.NumberColumn(
                         "Linked answers", help="answers keyed by the control, in the "
                                                "context or left out (an earlier round's)")})


def show_followups(trace: RetrievalTrace) -> None:
    st.subheader("Follow-up answers in the context")
    if not trace.followups:
        st.markdown("No follow-up answer is in the context for this criterion and strategy.")
        return
    similarity = widgets.question_similarity_column(trace.constants.fuzzy_match_threshold)
    st.dataframe(followup_rows(trace), hide_index=True, column_config={
        **widgets.followup_columns(similarity, answer_width="large"),
        "standing": widgets.standing_column(),
        "timestamp": widgets.answered_at_column(),
        "control": st.column_config.TextColumn(
            "Control", help="the control the answer is keyed by, where its id is a known "
                            "framework's (NIST SP 800-53, ISO/IEC 27001, CSA CAIQ)"),
        "sheet": st.column_config.TextColumn(
            "Sheet", help="the workbook sheet it was answered on (an on-premises and a cloud "
                          "sheet answer one control each for itself)"),
    })


def show_excerpts(trace: RetrievalTrace) -> None:
    st.subheader("Supporting excerpts in the context")
    if not trace.evidence:
        st.markdown("No document excerpt made the context.")
        return
    st.dataframe(excerpt_rows(trace), hide_index=True, column_config={
        "position": st.column_config.TextColumn(
            "Context entry", help="the <index_N> element of the XML context"),
        "source": st.column_config.TextColumn("Source"),
        "date": st.column_config.TextColumn(
            "Date", help="a document's date as its text states it (the period a report "
                         "covers, a certificate's issue, a policy's review), else when it was "
                         "received; an answer's round and date"),
        "status": st.column_config.TextColumn(
            "Status", help="current, or superseded by a newer version of the same document "
                           "(and which); stale when a current report's period ended over a "
                           "year ago or a certificate expired"),
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


def context_excerpts(trace: RetrievalTrace) -> list[judging.Excerpt]:
    """The context's entries in its order: the excerpts, then the follow-up answers."""
    return ([judging.chunk_excerpt(c, f"index_{i}") for i, c in enumerate(trace.evidence, 1)]
            + [judging.followup_excerpt(f, f"follow-up entry, round {f.round_number}")
               for f in trace.followups])


def criterion_decision(chosen: Selection, trace: RetrievalTrace) -> DecisionView | None:
    """The criterion's latest decision and its state now, or None when it was never decided;
    a store that cannot be read shows the error block and stops the page."""
    try:
        history = resources.decision_histories(chosen.vendor_id).get(trace.criterion_hash)
        return resources.judged(history) if history else None
    except EvidenceError as exc:
        widgets.stop_on_error(exc, "The decisions could not be read")


def record_decision(chosen: Selection) -> None:
    """Record the decision as the form holds it (run before the page is drawn again, so the
    new state shows at once); a refusal is kept for the page to show, and nothing is
    written."""
    state = st.session_state
    state.pop(REFUSED_KEY, None)
    status = state.get("decision_status")
    until = state.get("decision_until") if status == "waived" else None
    if status == "waived" and until is None:
        state[REFUSED_KEY] = WAIVER_NEEDS_DATE
        return
    try:
        view = resources.get_workbench().decide(
            chosen.vendor_id, chosen.criterion, status, strategy=chosen.strategy,
            note=state.get("decision_note"), until=until.isoformat() if until else None,
            reviewer=auth.identity() or state.get("decision_reviewer") or "")
    except EvidenceError as exc:
        state[REFUSED_KEY] = widgets.error_sentence(exc, "The decision was not recorded")
        return
    auth.record("decide", vendor=chosen.vendor_id, criterion=chosen.criterion,
                strategy=chosen.strategy, context_sha256=view.context_sha256,
                detail=f"{status}" + (f" until {view.until}" if view.until else ""))
    resources.decisions_changed()
    state[RECORDED_KEY] = view.decided_at
    state["decision_status"] = None
    state["decision_note"] = ""


def decision_form(chosen: Selection) -> None:
    """Status, note, a date for a waiver only, the reviewer, and the Record decision button."""
    status = st.selectbox("Decision", STATUSES, index=None, format_func=STATUS_LABELS.get,
                          key="decision_status", placeholder="Choose a status")
    if status == "waived":
        tomorrow = datetime.now(UTC).date() + timedelta(days=1)
        st.date_input("Waived until", value=None, min_value=tomorrow, key="decision_until",
                      format="YYYY-MM-DD", help="The last day the waiver holds.")
    st.text_area("Note", key="decision_note", height=90, max_chars=MAX_NOTE_CHARS,
                 placeholder="Why, in your words")
    who = auth.identity()
    if who is None:  # one person's tool: the name is theirs to give
        st.text_input("Reviewer", key="decision_reviewer", max_chars=MAX_REVIEWER_CHARS,
                      value=default_reviewer(resources.get_workbench().settings.reviewer))
    else:
        st.caption(f"Recorded as {who}, the identity you logged in with.")
    st.button("Record decision", key="decision_record", type="primary",
              disabled=status is None, on_click=record_decision, args=(chosen,),
              help=f"Recorded on the {chosen.strategy} strategy's context as it is now, with "
                   "the rounds and document versions in it; earlier decisions are kept.")
    refused = st.session_state.pop(REFUSED_KEY, None)
    if refused:
        st.error(refused)


def show_decision(chosen: Selection, trace: RetrievalTrace) -> None:
    """The reviewer's decision on the criterion: its state, the contradictions in its context,
    its history, and the form to record a new one."""
    st.subheader("Reviewer's decision")
    view = criterion_decision(chosen, trace)
    current, form = st.columns([3, 2], gap="large")
    with current:
        if st.session_state.pop(RECORDED_KEY, None):
            st.caption("Recorded just now.")
        if view is None:
            st.markdown("No decision is recorded for this criterion yet.")
        else:
            show_state(view)
            show_contradictions(view)
            count = len(view.history)
            with st.expander(f"History ({count} decision{'' if count == 1 else 's'})"):
                show_history(view, key="overview_decision_history")
    with form:
        if auth.may("decide", chosen.vendor_id):
            decision_form(chosen)
        else:
            st.caption("Your role (viewer) may read the evidence and its decisions; deciding "
                       "needs the reviewer role.")


def render() -> None:
    """The page: the current answer first, the reviewer's decision, the supporting excerpts
    and follow-ups with their grades, then the details (hash, models, timings, notes)."""
    shown = selection()
    widgets.header("Criterion overview", shown)
    chosen = widgets.require_selection(shown)
    trace = actions.current_trace(chosen)

    show_current_answer(chosen, trace)
    show_controls(trace)
    show_decision(chosen, trace)
    show_excerpts(trace)
    show_followups(trace)
    judging.judge_excerpts(chosen, context_excerpts(trace), page="overview",
                           about="The context's excerpts, then its follow-up answers.")
    show_details(trace)


def show_details(trace: RetrievalTrace) -> None:
    """What a developer looks for: the hash, the counts, the models, the time per stage."""
    with st.expander("Retrieval details: criterion hash, models, time per stage"):
        hash_col, followups_col, excerpts_col, total_col = st.columns([2, 1, 1, 1])
        hash_col.metric("Criterion hash", trace.criterion_hash,
                        help="first 16 hex digits of SHA-256 of the criterion, lower-cased "
                             "with spaces collapsed; a follow-up answer carries the hash of "
                             "the criterion it answers")
        followups_col.metric("Follow-ups in context", len(trace.followups))
        excerpts_col.metric("Excerpts in context", len(trace.evidence))
        total_col.metric("Total time", f"{trace.timings_ms.get('total', 0.0):.0f} ms")
        reranker = (f"{plain(trace.reranker.name)} ({plain(trace.reranker.reason)})"
                    if trace.reranker.ran else f"none: {plain(trace.reranker.reason)}")
        st.markdown(f"**Reranker:** {reranker}  \n**Embedding model:** "
                    f"{plain(trace.embedding_model)}")
        st.plotly_chart(charts.timings_figure(trace.timings_ms))
        for note in trace.notes:
            st.markdown(f"- {plain(note)}")


# Streamlit runs a page file as __main__; importing it defines the functions above without
# drawing the page or opening a store.
if __name__ == "__main__":
    render()
