"""Round progression: every follow-up round linked to the criterion, in time order, what the
strategy did with it, and how each answer differs from the one before."""

from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd
import streamlit as st

from core.models import FollowupHit
from core.trace.analysis import RoundRow, round_progression
from dashboard import actions, charts, resources, widgets
from dashboard.selection import selection
from dashboard.styles import ADDED_STYLE, REMOVED_STYLE
from dashboard.text import diff_html, minute_utc, plain

STATUS_BADGES = {"in context": "green", "in context as an excerpt": "green", "dropped": "red",
                 "not in context": "orange", "not found by this strategy": "gray"}
TEXT_STYLE = "white-space:pre-wrap;margin:0.2rem 0 0.6rem 0"


def _when(hit: FollowupHit) -> str:
    return minute_utc(hit.timestamp, hit.timestamp or "no timestamp")


def _drift(hit: FollowupHit) -> str:
    return (f"drifted {1 - hit.question_similarity:.0%} from the criterion's wording "
            f"(question similarity {hit.question_similarity:.2f})")


def round_rows(rows: Sequence[RoundRow], current_id: str | None) -> pd.DataFrame:
    """One row per linked round: when, where it stands, what the strategy did with it, and
    why."""
    return pd.DataFrame([{
        "round": r.followup.round_number,
        "answered_at": _when(r.followup),
        "standing": widgets.standing_words(r.followup, current_id),
        "status": r.status,
        "tier": r.followup.tier or "no tier",
        "drift": round(100 * (1 - r.followup.question_similarity)),
        "reason": r.reason,
    } for r in rows])


def answer_html(hit: FollowupHit, previous: FollowupHit | None) -> str:
    """The answer, HTML-escaped, marked up against the round before."""
    if previous is None:
        return html.escape(hit.answer_text)
    if previous.answer_text == hit.answer_text:
        return (f"{html.escape(hit.answer_text)} <i>(same answer as round "
                f"{previous.round_number})</i>")
    return (f"<i>(changes since round {previous.round_number})</i> "
            f"{diff_html(previous.answer_text, hit.answer_text)}")


def show_cards(rows: Sequence[RoundRow], current_id: str | None) -> None:
    """One card per round: question, answer with its changes, and the reason."""
    st.subheader("Answers round by round")
    st.html(f'Each answer is compared with the round before: <del style="{REMOVED_STYLE}">'
            f'struck through</del> was removed, <ins style="{ADDED_STYLE}">highlighted</ins> '
            "was added.")
    previous = None
    for row in rows:
        hit = row.followup
        badge = STATUS_BADGES[row.status]
        standing = widgets.standing_words(hit, current_id)
        with st.container(border=True):
            st.markdown(f"**Round {hit.round_number}** · {_when(hit)} · tier "
                        f"**{hit.tier or 'none'}** · :{badge}-badge[{row.status}]"
                        + (f" · {plain(standing)}" if standing else ""))
            st.html(f'<div style="{TEXT_STYLE}"><b>Question</b> ({html.escape(_drift(hit))}): '
                    f"{html.escape(hit.question_text)}</div>"
                    f'<div style="{TEXT_STYLE}"><b>Answer</b> {answer_html(hit, previous)}</div>')
            st.caption(plain(row.reason))
        previous = hit


def render() -> None:
    """The page: counts per status, the timeline, the table, then every answer."""
    chosen = selection()
    widgets.header("Round progression", chosen)
    chosen = widgets.require_selection(chosen)
    trace = actions.current_trace(chosen)
    linked = resources.linked_followups(chosen.vendor_id, chosen.criterion)
    if not linked:
        st.info(f"No follow-up round answered this criterion for {chosen.vendor_id}: no "
                "questionnaire response carries its hash, so only documents speak to it.")
        st.stop()

    rows = round_progression(linked, trace)
    counts = {status: sum(r.status == status for r in rows) for status in STATUS_BADGES}
    total_col, kept_col, dropped_col, missed_col = st.columns(4)
    total_col.metric("Rounds linked by hash", len(rows))
    kept_col.metric("In context", counts["in context"] + counts["in context as an excerpt"])
    dropped_col.metric("Dropped", counts["dropped"])
    missed_col.metric("Not found by this strategy", counts["not found by this strategy"])

    st.plotly_chart(charts.rounds_timeline_figure(rows))

    current_id = trace.current_answer.id if trace.current_answer else None
    st.dataframe(round_rows(rows, current_id), hide_index=True, column_config={
        "round": widgets.round_column(),
        "answered_at": widgets.answered_at_column(),
        "standing": widgets.standing_column(),
        "status": st.column_config.TextColumn("Status", help=f"what {trace.strategy} did"),
        "tier": widgets.tier_column(),
        "drift": st.column_config.ProgressColumn(
            "Question drift", format="%d%%", min_value=0, max_value=100,
            help="how far the question's wording drifted from the criterion: "
                 "1 - question similarity (difflib ratio)"),
        "reason": st.column_config.TextColumn("Why", width="large"),
    })

    show_cards(rows, current_id)


# Streamlit runs a page file as __main__; importing it defines the functions above without
# drawing the page or opening a store.
if __name__ == "__main__":
    render()
