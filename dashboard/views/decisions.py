"""Decisions: every criterion of the sidebar vendor the reviewer decided, its status and
whether the decision still holds (current), needs re-review (the evidence it was made on
moved: what changed, in words) or has expired (a waiver past its date), and each one's
history. The decision widgets here are shared with the Criterion overview page."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from core.errors import EvidenceError
from core.review.decisions import STATES, STATUS_LABELS, STATUSES, DecisionView
from dashboard import resources, widgets
from dashboard.selection import selected_vendor
from dashboard.text import minute_utc, plain, rounds_label

STATE_LABELS = {"current": "Current", "needs_review": "Needs re-review", "expired": "Expired"}
NO_DECISION = ("No decision is recorded for this vendor yet: record one on the Criterion "
               "overview page, or with `evidence decide`.")
EXPIRED_CHANGE = "The waiver is past its date."
TABLE_COLUMNS = ["Criterion", "Status", "State", "Reviewer", "Decided at", "Until",
                 "What changed", "Strategy"]
HISTORY_COLUMNS = ["When", "Reviewer", "Status", "Until", "Rounds seen", "Documents seen",
                   "Strategy", "Context sha256", "Note"]
ROW_PX = 35  # a table row's height
MAX_SHOWN_ROWS = 20  # rows in view before the table scrolls
SHORT_CRITERION = 110  # characters of a criterion in a select box


# Shared with the Criterion overview page -----------------------------------------------------

def status_text(view: DecisionView) -> str:
    """'Met', or 'Waived until 2031-01-31'."""
    label = STATUS_LABELS[view.status]
    return f"{label} until {view.until}" if view.status == "waived" and view.until else label


def what_changed(view: DecisionView) -> str:
    """What moved since the decision, in sentences; empty for a current one."""
    if view.state == "expired":
        return EXPIRED_CHANGE
    return " ".join(view.changes)


def show_state(view: DecisionView) -> None:
    """The decision and its state: a success box while it holds, a warning box listing what
    changed when it needs re-review, a warning box when the waiver expired."""
    decided = (f"**{plain(status_text(view))}**, decided by {plain(view.reviewer)} on "
               f"{minute_utc(view.decided_at, view.decided_at)}")
    if view.state == "current":
        st.success(f"Current: {decided}. The criterion's context is the one it was decided on.",
                   icon=":material/check_circle:")
    elif view.state == "expired":
        st.warning(f"Expired: {decided}; the waiver held until {view.until}. Decide again.",
                   icon=":material/event_busy:")
    else:
        st.warning(f"Needs re-review: {decided}, and the context changed since:\n"
                   + "\n".join(f"- {plain(change)}" for change in view.changes),
                   icon=":material/rate_review:")
    if view.note:
        st.markdown("**Note:** " + plain(view.note))
    rounds = ", ".join(map(str, view.seen.rounds)) or "none"
    st.caption(f"Decided on the {plain(view.strategy)} strategy's context "
               f"(sha256 `{view.context_sha256[:16]}`); follow-up rounds seen: {rounds}; "
               f"documents seen: {len(view.seen.documents)}."
               + (f" The language model's verdict shown then: {plain(view.verdict)}."
                  if view.verdict else ""))


def show_contradictions(view: DecisionView) -> None:
    """Answers that disagree in the criterion's context now, found without a model."""
    if view.contradictions:
        st.markdown("**Contradictions found without a model:**\n"
                    + "\n".join(f"- {plain(c)}" for c in view.contradictions))


def history_rows(view: DecisionView) -> pd.DataFrame:
    """Every decision of the criterion, newest first, with what its context held then."""
    return pd.DataFrame([{
        "When": minute_utc(d.decided_at, d.decided_at),
        "Reviewer": d.reviewer,
        "Status": STATUS_LABELS[d.status],
        "Until": d.until or "",
        "Rounds seen": rounds_label(d.seen.rounds),
        "Documents seen": len(d.seen.documents),
        "Strategy": d.strategy,
        "Context sha256": d.context_sha256[:16],
        "Note": d.note,
    } for d in reversed(view.history)], columns=HISTORY_COLUMNS)


def show_history(view: DecisionView, key: str) -> None:
    """The criterion's decisions as a table, newest first."""
    st.dataframe(history_rows(view), hide_index=True, key=key, column_config={
        "Documents seen": st.column_config.NumberColumn(
            format="%d", help="documents with an excerpt in the context then"),
        "Context sha256": st.column_config.TextColumn(
            help="the first 16 hex digits of the SHA-256 of the context decided on; two "
                 "decisions with the same value saw the same context"),
        "Note": st.column_config.TextColumn(width="large"),
    })


# The page ------------------------------------------------------------------------------------

def decision_rows(views: Sequence[DecisionView]) -> pd.DataFrame:
    """One row per decided criterion: its current decision, state and what changed."""
    return pd.DataFrame([{
        "Criterion": v.criterion,
        "Status": STATUS_LABELS[v.status],
        "State": STATE_LABELS[v.state],
        "Reviewer": v.reviewer,
        "Decided at": minute_utc(v.decided_at, v.decided_at),
        "Until": v.until or "",
        "What changed": what_changed(v),
        "Strategy": v.strategy,
    } for v in views], columns=TABLE_COLUMNS)


def filtered(views: Sequence[DecisionView], states: Sequence[str], statuses: Sequence[str],
             to_review_only: bool) -> list[DecisionView]:
    """The views in the chosen states and statuses (none chosen: all); with `to_review_only`,
    only those that no longer hold (needs re-review or expired)."""
    return [v for v in views
            if (not states or v.state in states) and (not statuses or v.status in statuses)
            and not (to_review_only and v.state == "current")]


def show_metrics(views: Sequence[DecisionView]) -> None:
    states = [v.state for v in views]
    decided, current, to_review, expired = st.columns(4)
    decided.metric("Decided", len(views), help="criteria with a decision recorded")
    current.metric("Current", states.count("current"),
                   help="the context is the one the decision was made on")
    to_review.metric("Needs re-review", states.count("needs_review"),
                     help="the context moved since the decision: a round, or a document")
    expired.metric("Expired", states.count("expired"), help="waivers past their date")


def short(criterion: str) -> str:
    return criterion if len(criterion) <= SHORT_CRITERION else criterion[:SHORT_CRITERION] + "..."


def render() -> None:
    """The page: the counts, the filters, the table of decided criteria, then the chosen
    criterion's decision, contradictions and history. It needs a vendor."""
    vendor = selected_vendor()
    widgets.header("Decisions", vendor)
    vendor = widgets.require_vendor(vendor)
    try:
        views = resources.decisions(vendor)
    except EvidenceError as exc:
        widgets.stop_on_error(exc, "The decisions could not be read")
    if not views:
        st.info(NO_DECISION)
        st.stop()

    show_metrics(views)
    states_col, statuses_col, toggle_col = st.columns([2, 2, 1], vertical_alignment="bottom")
    states = states_col.multiselect("State", list(STATES), format_func=STATE_LABELS.get,
                                    key="decisions_states", placeholder="Every state")
    statuses = statuses_col.multiselect("Status", list(STATUSES), format_func=STATUS_LABELS.get,
                                        key="decisions_statuses", placeholder="Every status")
    to_review_only = toggle_col.toggle(
        "Needs re-review only", key="decisions_to_review",
        help="Only the decisions that no longer hold: the evidence moved, or a waiver "
             "expired (as `evidence decisions --needs-review`).")
    shown = filtered(views, states, statuses, to_review_only)
    if not shown:
        st.info("No decision matches these filters.")
        st.stop()

    table = decision_rows(shown)
    st.dataframe(table, hide_index=True, key="decisions_table",
                 height=ROW_PX * (min(len(table), MAX_SHOWN_ROWS) + 1) + 3, column_config={
                     "Criterion": st.column_config.TextColumn(width="large"),
                     "State": st.column_config.TextColumn(
                         help="Current: the context is the one decided on. Needs re-review: "
                              "it changed since. Expired: a waiver past its date."),
                     "What changed": st.column_config.TextColumn(width="large"),
                     "Strategy": st.column_config.TextColumn(
                         help="the retrieval the decision was made on"),
                 })

    st.subheader("History")
    by_hash = {v.criterion_hash: v for v in shown}
    chosen = st.selectbox("Criterion", list(by_hash), key="decisions_history",
                          format_func=lambda key: short(by_hash[key].criterion),
                          help="One of the criteria in the table above.")
    view = by_hash.get(chosen) or shown[0]
    st.markdown(plain(view.criterion))
    show_state(view)
    show_contradictions(view)
    show_history(view, key="decisions_history_table")


# Streamlit runs a page file as __main__; importing it (as the Criterion overview does)
# defines the functions above without drawing the page or opening a store.
if __name__ == "__main__":
    render()
