"""Evidence pack: one vendor's evidence for a criteria list under the sidebar's strategy (each
criterion's linked rounds, the excerpts in its context, and its stored verdict), downloaded as
Markdown, one HTML page, or JSON lines."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.errors import EvidenceError
from core.outputs.report import EvidencePack, ReportFormat
from core.retrieval.strategies import DEFAULT_STRATEGY
from dashboard import actions, auth, resources, widgets
from dashboard.selection import selected_vendor
from dashboard.text import plain, rounds_label

FORMATS: dict[ReportFormat, tuple[str, str, str]] = {  # label, file ending, MIME type
    "md": ("Markdown (.md)", "md", "text/markdown"),
    "html": ("One HTML page (.html)", "html", "text/html"),
    "jsonl": ("JSON lines (.jsonl)", "jsonl", "application/jsonl"),
}
ROW_PX = 35  # a table row's height
MAX_SHOWN_ROWS = 25  # rows in view before the table scrolls


def pack_table(pack: EvidencePack) -> pd.DataFrame:
    """One row per criterion: its linked rounds, how many reached the context, the excerpts,
    and the verdict shown."""
    return pd.DataFrame([{
        "ID": c.id or "",
        "Criterion": c.criterion,
        "Linked rounds": rounds_label([r.round_number for r in c.rounds]),
        "In context": f"{sum(r.in_context for r in c.rounds)} of {len(c.rounds)}",
        "Excerpts": len(c.excerpts),
        "Verdict": (c.verdict.verdict.counted_text if c.verdict.verdict
                    else widgets.NO_VERDICT_CELL),
        "Verdict state": c.verdict.state,
    } for c in pack.criteria], columns=["ID", "Criterion", "Linked rounds", "In context",
                                        "Excerpts", "Verdict", "Verdict state"])


def verdict_counts(pack: EvidencePack) -> tuple[int, int]:
    """(criteria with a verdict, of them stale)."""
    states = [c.verdict.state for c in pack.criteria]
    return sum(state != "none" for state in states), states.count("stale")


def file_name(pack: EvidencePack, fmt: ReportFormat) -> str:
    return f"evidence_pack_{pack.vendor_id}_{pack.strategy}.{FORMATS[fmt][1]}"


def render() -> None:
    """The page: the criteria, what the pack holds per criterion, and the downloads. It needs
    a vendor; the strategy is the sidebar's."""
    vendor = selected_vendor()
    widgets.header("Evidence pack", vendor)
    vendor = widgets.require_vendor(vendor)
    strategy = st.session_state.get("strategy") or DEFAULT_STRATEGY
    st.caption(plain(f"Strategy {strategy} (the sidebar's). For each criterion: every "
                     "follow-up answer linked to it, newest round first, the excerpts its "
                     "context holds with their sources, and the stored verdict if any. No "
                     "language model is asked here; verdicts are given on the LLM context "
                     "page."))
    try:
        own = resources.vendor_criteria(vendor)
    except EvidenceError as exc:
        widgets.stop_on_error(exc, "The vendor's criteria could not be read")
    criteria = widgets.choose_criteria("pack", own, actions.uploaded_criteria(vendor))
    if criteria is None:
        st.stop()
    try:
        pack = resources.evidence_pack(vendor, criteria, strategy)
    except EvidenceError as exc:
        widgets.stop_on_error(exc, "The evidence pack failed")

    with_verdict, stale = verdict_counts(pack)
    total, verdicts, answered = st.columns(3)
    total.metric("Criteria", len(pack.criteria))
    verdicts.metric("With a verdict", f"{with_verdict} of {len(pack.criteria)}",
                    help=f"{with_verdict - stale} current, {stale} stale")
    answered.metric("With a linked answer",
                    f"{sum(bool(c.rounds) for c in pack.criteria)} of {len(pack.criteria)}")
    if stale:
        st.caption(f"{stale} of the verdicts are stale: the evidence changed since they were "
                   "given; assess again on the LLM context page.")

    columns = st.columns(len(FORMATS) + 1)  # the buttons side by side on the left
    for column, (fmt, (label, _, mime)) in zip(columns, FORMATS.items(), strict=False):
        with column:
            st.download_button(label, actions.pack_file(pack, fmt),
                               file_name=file_name(pack, fmt), mime=mime,
                               key=f"pack_download_{fmt}", icon=":material/download:",
                               on_click=auth.on_download("export", pack.vendor_id,
                                                         f"evidence pack as {fmt}"))

    table = pack_table(pack)
    st.dataframe(table, hide_index=True, key="pack_table",
                 height=ROW_PX * (min(len(table), MAX_SHOWN_ROWS) + 1) + 3, column_config={
                     "ID": st.column_config.TextColumn(width=70),
                     "Criterion": st.column_config.TextColumn(width=360),
                     "Linked rounds": st.column_config.TextColumn(width=140),
                     "In context": st.column_config.TextColumn(
                         width=80,
                         help="linked answers that reached the context, of those linked"),
                     "Excerpts": st.column_config.NumberColumn(
                         width=70, format="%d", help="excerpts in the criterion's context"),
                     "Verdict": st.column_config.TextColumn(width=120),
                     "Verdict state": st.column_config.TextColumn(
                         width=100, help="current; stale when the evidence changed since the "
                                         "verdict was given; none"),
                 })
    cap = resources.get_workbench().settings.max_followup_rounds
    st.caption(f"In context: the linked answers the {strategy} strategy put in the context, "
               f"of all linked to the criterion (every design keeps at most the latest {cap} "
               "rounds). Excerpts: document excerpts in the context. The downloads hold each "
               "answer, excerpt and verdict in full.")


# Streamlit runs a page file as __main__; importing it (as the tests do) defines the functions
# above without drawing the page or opening a store.
if __name__ == "__main__":
    render()
