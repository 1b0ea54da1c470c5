"""Round progression: every follow-up round linked to the criterion, in time order, what the
strategy did with it, and how each answer differs from the one before."""

import html

import pandas as pd
import streamlit as st

from core.analysis import round_progression
from core.models import FollowupHit
from dashboard import charts, resources
from dashboard.text import ADDED_STYLE, REMOVED_STYLE, diff_html, minute_utc, plain

STATUS_BADGES = {"in context": "green", "dropped": "red", "not found by this strategy": "gray"}
TEXT_STYLE = "white-space:pre-wrap;margin:0.2rem 0 0.6rem 0"



def _when(hit: FollowupHit) -> str:
    return minute_utc(hit.timestamp, hit.timestamp or "no timestamp")


def _drift(hit: FollowupHit) -> str:
    return (f"drifted {1 - hit.question_similarity:.0%} from the criterion's wording "
            f"(question similarity {hit.question_similarity:.2f})")


st.title("Round progression")
selection, trace = resources.current_trace()
st.caption(
    f"Vendor **{plain(selection.vendor_id)}** · strategy **{plain(trace.strategy)}** · "
    f"criterion: {plain(trace.criterion)}"
)

linked = resources.linked_followups(selection.vendor_id, selection.criterion)
if not linked:
    st.info(f"No follow-up round answered this criterion for {selection.vendor_id}: no "
            "questionnaire response carries its hash, so only documents speak to it.")
    st.stop()

rows = round_progression(linked, trace)
counts = {status: sum(r.status == status for r in rows) for status in STATUS_BADGES}
total_col, kept_col, dropped_col, missed_col = st.columns(4)
total_col.metric("Rounds linked by hash", len(rows))
kept_col.metric("In context", counts["in context"])
dropped_col.metric("Dropped", counts["dropped"])
missed_col.metric("Not found by this strategy", counts["not found by this strategy"])

st.plotly_chart(charts.rounds_timeline_figure(rows))

st.dataframe(
    pd.DataFrame([{
        "round": r.followup.round_number,
        "answered_at": _when(r.followup),
        "status": r.status,
        "tier": r.followup.tier or "no tier",
        "drift": round(100 * (1 - r.followup.question_similarity)),
        "reason": r.reason,
    } for r in rows]),
    hide_index=True,
    column_config={
        "round": st.column_config.NumberColumn("Round", format="%d"),
        "answered_at": st.column_config.TextColumn("Answered at"),
        "status": st.column_config.TextColumn("Status", help=f"what {trace.strategy} did"),
        "tier": st.column_config.TextColumn("Tier"),
        "drift": st.column_config.ProgressColumn(
            "Question drift", format="%d%%", min_value=0, max_value=100,
            help="how far the question's wording drifted from the criterion: "
                 "1 - question similarity (difflib ratio)"),
        "reason": st.column_config.TextColumn("Why", width="large"),
    },
)

st.subheader("Answers round by round")
st.html(f'Each answer is compared with the round before: <del style="{REMOVED_STYLE}">struck '
        f'through</del> was removed, <ins style="{ADDED_STYLE}">highlighted</ins> was added.')
previous = None
for row in rows:
    hit = row.followup
    badge = STATUS_BADGES[row.status]
    with st.container(border=True):
        st.markdown(f"**Round {hit.round_number}** · {_when(hit)} · tier "
                    f"**{hit.tier or 'none'}** · :{badge}-badge[{row.status}]")
        if previous is None:
            answer = html.escape(hit.answer_text)
        elif previous.answer_text == hit.answer_text:
            answer = (f"{html.escape(hit.answer_text)} <i>(same answer as round "
                      f"{previous.round_number})</i>")
        else:
            answer = (f"<i>(changes since round {previous.round_number})</i> "
                      f"{diff_html(previous.answer_text, hit.answer_text)}")
        st.html(f'<div style="{TEXT_STYLE}"><b>Question</b> ({html.escape(_drift(hit))}): '
                f"{html.escape(hit.question_text)}</div>"
                f'<div style="{TEXT_STYLE}"><b>Answer</b> {answer}</div>')
        st.caption(plain(row.reason))
    previous = hit
