"""Ask the evidence: a conversation with one vendor's evidence (seeds 001 and 004). Each
answer shows its numbered sources, whether the question continued the previous answer and
why, the anchor documents, the query actually searched, and every excerpt's scores."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from core.errors import EvidenceError
from core.review.conversation.answer import standing
from core.review.conversation.models import AnswerEvidence, AskTurn, ConversationSummary
from core.trace.analysis import move_label
from core.trace.context import response_date, source_label
from dashboard import actions, auth, widgets
from dashboard.selection import selected_vendor
from dashboard.text import minute_utc, plain

NEW = "new"


def evidence_rows(evidence: Sequence[AnswerEvidence], start: int = 1) -> pd.DataFrame:
    """One row per excerpt with every score it was given; a follow-up answer says its round,
    date and standing (an earlier answer, and the newest answer ahead of it)."""
    return pd.DataFrame([{
        "#": i,
        "Source": source_label(e.source, None, e.page, e.ocr),
        "Standing": standing(e, evidence, start),
        "Vector rank": e.vector_rank,
        "Lexical rank": e.lexical_rank,
        "Fused (RRF)": e.fused_score,
        "Anchor boost": e.anchor_boost,
        "Rerank (0..1)": e.rerank_score,
        "Final": e.final_score,
        "Excerpt": e.text,
    } for i, e in enumerate(evidence, start=start)])


def anchor_label(turn: AskTurn, document: str) -> str:
    """An anchor document with its part in the previous answer and its best place in the
    question's own search, where the turn recorded them."""
    parts = []
    if document in turn.anchor_weights:
        parts.append(f"part {turn.anchor_weights[document]:.2f}")
    if turn.anchor_places:
        place = turn.anchor_places.get(document)
        parts.append(f"own search place {place}" if place else "not in the own search: no boost")
    return plain(document) + (f" ({', '.join(parts)})" if parts else "")


def anchoring_moves(anchored: AskTurn, unanchored: AskTurn) -> pd.DataFrame:
    """Each excerpt's place with and without anchoring, OpenSearch-style."""
    a = [e.id for e in [*anchored.answer_evidence, *anchored.suggestion_evidence]]
    b = [e.id for e in [*unanchored.answer_evidence, *unanchored.suggestion_evidence]]
    sources = {e.id: e.source for e in [*anchored.answer_evidence, *anchored.suggestion_evidence,
                                        *unanchored.answer_evidence,
                                        *unanchored.suggestion_evidence]}
    order = a + [i for i in b if i not in a]
    return pd.DataFrame([{
        "Source": sources[i],
        "Unanchored place": b.index(i) + 1 if i in b else None,
        "Anchored place": a.index(i) + 1 if i in a else None,
        "Move": move_label(b.index(i) + 1 if i in b else None,
                           a.index(i) + 1 if i in a else None),
        "Id": i,
    } for i in order])


def conversation_label(summary: ConversationSummary) -> str:
    first = summary.first_question if len(summary.first_question) <= 60 else (
        summary.first_question[:57] + "...")
    return (f"{minute_utc(summary.started, summary.started)} · {summary.turns} turn"
            f"{'s' if summary.turns != 1 else ''} · {first}")


def show_turn(turn: AskTurn) -> None:
    """The question, the answer with its sources, and why this turn retrieved what it did."""
    with st.chat_message("user"):
        st.markdown(plain(turn.question))
    with st.chat_message("assistant"):
        if turn.answered_by == "excerpts":
            st.caption("Not generated: the excerpts that best answer the question, as the "
                       "vendor wrote them (no language model is configured).")
        else:
            st.caption(f"Written by {plain(turn.answered_by.removeprefix('llm:'))} from the "
                       "numbered sources below.")
        if turn.current_answer is not None:
            current = turn.current_answer
            st.markdown(f"**The vendor's current answer** to the question's criterion (round "
                        f"{current.round_number}, {plain(response_date(current.answered_at))}, "
                        f"{plain(current.source)}): {plain(current.answer_text)}")
        st.markdown(plain(turn.answer).replace("\n", "  \n"))
        if turn.suggested_questions:
            st.markdown("**You could ask next:** " + " · ".join(
                plain(q) for q in turn.suggested_questions))
        elif turn.related:
            st.markdown("**Related:** " + " · ".join(plain(r) for r in turn.related))
        with st.expander(f"Turn {turn.turn}: why these sources", expanded=False):
            decision = turn.continuation
            kind = "a continuation" if decision.is_continuation else "a new topic"
            how = plain(decision.decided_by)
            if decision.confidence is not None and decision.decided_by == "rules":
                how += f", confidence {decision.confidence:.2f} that it continues"
            st.markdown(f"**{kind.capitalize()}** ({how}): {plain(decision.reason)}")
            if decision.parts:
                st.dataframe(pd.DataFrame([{"Part": p.name.replace("_", " "),
                                            "Weight": p.weight, "Why": p.detail}
                                           for p in decision.parts]),
                             hide_index=True, column_config={
                                 "Weight": st.column_config.NumberColumn(
                                     format="%+.2f", help="added to the sum whose logistic is "
                                                          "the confidence")})
            searched = f"**Searched for:** {plain(turn.search_query)}"
            if turn.question_as_asked_weight:
                searched += (f" (fused with the question as asked, weight "
                             f"{turn.question_as_asked_weight:g})")
            st.markdown(searched)
            if turn.anchor_documents:
                st.markdown("**Anchor documents** (" + plain(turn.anchoring) + "): "
                            + ", ".join(anchor_label(turn, d) for d in turn.anchor_documents))
            else:
                st.markdown("**Anchor documents:** none")
            for note in turn.notes:
                st.caption(plain(note))
            st.markdown("**Answer sources** (seed 004's chunks 1-4)")
            st.dataframe(evidence_rows(turn.answer_evidence), hide_index=True,
                         column_config=SCORE_COLUMNS)
            if turn.suggestion_evidence:
                st.markdown("**Suggestion sources** (chunks 5-6)")
                st.dataframe(evidence_rows(turn.suggestion_evidence, start=5),
                             hide_index=True, column_config=SCORE_COLUMNS)
            if turn.followups:
                st.markdown("**The vendor's questionnaire answers linked to this question**")
                st.dataframe(pd.DataFrame([{
                    "Round": f.round_number, "Question": f.question_text,
                    "Answer": f.answer_text} for f in turn.followups]), hide_index=True)


SCORE_COLUMNS = {
    "Fused (RRF)": st.column_config.NumberColumn(
        format="%.4f", help="reciprocal rank fusion of the vector and lexical ranks; for a "
                            "question searched with words from the conversation, that "
                            "ranking fused again with the question's own (see Searched for)"),
    "Anchor boost": st.column_config.NumberColumn(
        format="%.4f", help="added to the fused score for chunks of the previous answer's "
                            "documents (continuations only)"),
    "Rerank (0..1)": st.column_config.NumberColumn(format="%.3f",
                                                   help="cross-encoder relevance"),
    "Final": st.column_config.NumberColumn(format="%.4f", help="the score that ranks"),
    "Excerpt": st.column_config.TextColumn(width="large"),
}


def render() -> None:
    """The page: pick or start a conversation, its turns, the chat input, the comparison."""
    vendor_id = selected_vendor()
    widgets.header("Ask the evidence", vendor_id)
    if not vendor_id:
        st.info("Pick a vendor in the sidebar to ask about its evidence.")
        st.stop()
    try:
        summaries = actions.conversations(vendor_id)
    except EvidenceError as exc:
        widgets.stop_on_error(exc, "The conversations could not be read")
    key = f"ask_conversation_{vendor_id}"  # one open conversation per vendor, never mixed
    ids = [NEW] + [s.conversation_id for s in reversed(summaries)]
    labels = {s.conversation_id: conversation_label(s) for s in summaries}
    pending = st.session_state.pop("ask_opened", None)  # set by the last question asked
    if pending in ids:
        st.session_state[key] = pending
    if st.session_state.get(key) not in ids:
        st.session_state[key] = NEW
    picker, new_col = st.columns([4, 1])
    picker.selectbox("Conversation", ids, key=key,
                     format_func=lambda i: "New conversation" if i == NEW else labels[i])
    new_col.button("New conversation", key="ask_new", icon=":material/add_comment:",
                   on_click=lambda: st.session_state.update({key: NEW}))
    compare = st.toggle("Also run the latest turn unanchored and show what anchoring moved",
                        key="ask_compare")

    conversation_id = st.session_state[key]
    turns = [] if conversation_id == NEW else actions.conversation_turns(vendor_id,
                                                                         conversation_id)
    for turn in turns:
        show_turn(turn)

    if compare and turns:
        latest = turns[-1]
        if not latest.anchor_documents:
            st.info("The latest turn was not anchored (not a continuation, or anchoring is "
                    "off): both runs are the same.")
        else:
            try:
                unanchored = actions.rerun_unanchored(vendor_id, latest)
            except EvidenceError as exc:
                widgets.show_error(exc, "The unanchored run failed")
            else:
                st.markdown(f"**Turn {latest.turn}, anchored against unanchored** (same "
                            "search query, no anchor boost)")
                st.dataframe(anchoring_moves(latest, unanchored), hide_index=True)

    if not auth.may("ask", vendor_id):
        st.caption("Asking needs the reviewer role; yours may read the conversations held.")
        return
    question = st.chat_input("Ask about this vendor's evidence", key="ask_input")
    if question:
        try:
            turn = actions.ask(vendor_id, question,
                               None if conversation_id == NEW else conversation_id)
        except EvidenceError as exc:
            widgets.stop_on_error(exc, "The question could not be answered")
        st.session_state["ask_opened"] = turn.conversation_id
        st.rerun()


if __name__ == "__main__":
    render()
