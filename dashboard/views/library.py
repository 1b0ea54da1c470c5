"""Evidence library: what the store holds per vendor, uploads of documents and questionnaire
rounds, and a browser over the stored chunks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import pandas as pd
import streamlit as st

from core.config import MAX_ROUND_NUMBER
from core.errors import EvidenceError
from core.ingest.uploads import ingest_uploaded_documents, ingest_uploaded_questionnaires
from core.reports import Progress, VendorStatus
from core.workbench import Workbench
from dashboard import charts, resources, widgets

T = TypeVar("T")
DOC_TYPES = {
    "tc_files": "tc_files: original vendor documents",
    "followup_document": "followup_document: uploaded with a follow-up round",
    "soc2_summary": "soc2_summary:TRACK: a reviewer summary of a SOC 2 report",
}
BROWSE_COLUMNS = ["id", "type", "source", "page", "round_number", "text"]


def vendor_table(statuses: Sequence[VendorStatus]) -> pd.DataFrame:
    """One row per vendor: what it holds in total."""
    return pd.DataFrame([{
        "Vendor": s.vendor_id,
        "Documents": s.documents,
        "Document chunks": s.chunks,
        "Follow-up responses": s.followup_responses,
        "Rounds": ", ".join(map(str, s.rounds)),
    } for s in statuses])


def type_table(statuses: Sequence[VendorStatus]) -> pd.DataFrame:
    """One row per `type`, one column per vendor: the records stored."""
    types = sorted({t for s in statuses for t in s.by_type})
    return pd.DataFrame([{"Type": t, **{s.vendor_id: s.by_type.get(t, 0) for s in statuses}}
                         for t in types])


def round_table(statuses: Sequence[VendorStatus],
                documents: dict[str, list[dict]]) -> pd.DataFrame:
    """One row per vendor and round: follow-up responses and follow-up documents."""
    rows = []
    for s in statuses:
        files = [d for d in documents.get(s.vendor_id, []) if d.get("type") == "followup_document"]
        rounds = sorted(set(s.rounds) | {int(d["round_number"]) for d in files
                                         if "round_number" in d})
        for number in rounds:
            in_round = [d for d in files if d.get("round_number") == number]
            rows.append({
                "Vendor": s.vendor_id,
                "Round": number,
                "Follow-up responses": s.by_type.get(f"followup_response:{number}", 0),
                "Follow-up documents": len(in_round),
                "Follow-up document chunks": sum(int(d.get("chunks", 0)) for d in in_round),
            })
    return pd.DataFrame(rows, columns=["Vendor", "Round", "Follow-up responses",
                                       "Follow-up documents", "Follow-up document chunks"])


def progress_bar(text: str) -> tuple[Progress, Callable[[], None]]:
    """A progress callback driving an st.progress bar, and a function to remove it."""
    bar = st.progress(0.0, text=text)

    def show(stage: str, done: int, total: int) -> None:
        bar.progress(min(done / total, 1.0) if total else 1.0,
                     text=f"{text} {stage} {done} of {total}")

    return show, bar.empty


def run_ingest(label: str, ingest: Callable[[Progress], T]) -> T | None:
    """Run an ingest under a progress bar; a refusal or failure becomes one st.error and
    None (nothing was written: the ingest functions validate before they write)."""
    show, done = progress_bar(label)
    try:
        return ingest(show)
    except EvidenceError as exc:
        done()
        widgets.show_error(exc, "The ingest failed")
    return None


def chunks_text(count: int) -> str:
    return f"{count} chunk" + ("" if count == 1 else "s")


def finish(section: str, message: str) -> None:
    """Keep the outcome for the next run, drop stale caches, and redraw with new counts."""
    st.session_state["library_outcome"] = (section, message)
    resources.store_changed()
    st.rerun()


def show_outcome(section: str) -> None:
    """The success message of the last ingest, under the button that started it."""
    outcome = st.session_state.get("library_outcome")
    if outcome and outcome[0] == section:
        st.success(st.session_state.pop("library_outcome")[1])


def show_counts(workbench: Workbench, statuses: Sequence[VendorStatus]) -> None:
    """What the store holds: per vendor, per type, per follow-up round."""
    st.subheader("What the store holds")
    if not statuses:
        st.info("The store is empty: upload documents or a questionnaire round below.")
        return
    documents = {s.vendor_id: workbench.documents(s.vendor_id) for s in statuses}
    st.caption("Counts of committed records; a follow-up response is one answered question.")
    st.dataframe(vendor_table(statuses), hide_index=True)
    chart, by_type = st.columns([3, 2])
    chart.plotly_chart(charts.library_counts_figure(
        {s.vendor_id: s.by_type for s in statuses}), key="counts_figure")
    with by_type:
        st.markdown("**Records by type**")
        st.dataframe(type_table(statuses), hide_index=True)
    st.markdown("**By follow-up round**")
    st.dataframe(round_table(statuses, documents), hide_index=True)
    if any(s.incomplete_chunks for s in statuses):
        st.warning("Some chunks belong to an interrupted ingest and are not counted; "
                   "ingesting the same files again completes it.")


def show_document_upload(workbench: Workbench, vendor: str | None) -> None:
    """The document form: vendor, type (and its round or track), files."""
    st.subheader("Upload documents")
    vendor_id = st.text_input("Vendor id", value=vendor or "", key="upload_vendor",
                              help="Letters, digits, '_' or '-'; a new id creates a vendor.")
    kind = st.selectbox("Document type", list(DOC_TYPES), format_func=DOC_TYPES.get,
                        key="upload_type")
    round_number = None
    doc_type = kind
    if kind == "followup_document":
        round_number = int(st.number_input("Follow-up round", min_value=1,
                                           max_value=MAX_ROUND_NUMBER, value=1, step=1,
                                           key="upload_round"))
    elif kind == "soc2_summary":
        doc_type = "soc2_summary:" + st.text_input("SOC 2 summary track", value="overview",
                                                   key="upload_track").strip()
    files = st.file_uploader("Documents (.md, .txt, .pdf)", type=["md", "txt", "pdf"],
                             accept_multiple_files=True, key="upload_documents")
    if st.button("Ingest the documents", key="ingest_documents", disabled=not files):
        report = run_ingest("Ingesting documents:", lambda show: ingest_uploaded_documents(
            workbench, vendor_id.strip(), [(f.name, f.getvalue()) for f in files or []],
            doc_type, round_number, show))
        if report is not None:
            finish("documents", f"{report.vendor_id}, {report.type}: "
                   + "; ".join(f"{d.source} {d.status} ({chunks_text(d.chunks)})"
                               for d in report.documents)
                   + f". {chunks_text(report.chunks_written)} written.")
    show_outcome("documents")


def show_round_upload(workbench: Workbench) -> None:
    """The questionnaire form: bulk payload files, all checked before any is written."""
    st.subheader("Upload questionnaire rounds")
    st.caption("The seed-003 bulk payload: vendor_id, round_number, timestamp, responses. "
               "Every file is checked before any is written.")
    rounds = st.file_uploader("Questionnaire rounds (.json)", type=["json"],
                              accept_multiple_files=True, key="upload_questionnaires")
    if st.button("Ingest the rounds", key="ingest_questionnaires", disabled=not rounds):
        reports = run_ingest("Ingesting rounds:", lambda show: ingest_uploaded_questionnaires(
            workbench, [(f.name, f.getvalue()) for f in rounds or []], show))
        if reports is not None:
            finish("rounds", "; ".join(f"{r.vendor_id} round {r.round_number}: "
                                       f"{r.indexed_count} responses" for r in reports)
                   + " stored.")
    show_outcome("rounds")


def show_browser(workbench: Workbench, statuses: Sequence[VendorStatus],
                 vendor: str | None) -> None:
    """One vendor's stored chunks, filtered by text and type."""
    st.subheader("Browse and search the stored chunks")
    vendors = [s.vendor_id for s in statuses]
    if not vendors:
        st.info("Nothing to browse yet.")
        return
    browse_vendor = st.selectbox("Vendor", vendors, key="browse_vendor",
                                 index=vendors.index(vendor) if vendor in vendors else 0)
    types = sorted(next(s.by_type for s in statuses if s.vendor_id == browse_vendor))
    search, type_filter = st.columns([2, 1])
    contains = search.text_input("Text contains (exact, case-sensitive)", key="library_search")
    chosen_type = type_filter.selectbox("Type", ["all types", *types], key="library_type")
    chunks = workbench.browse_chunks(
        browse_vendor, contains=contains or None,
        doc_type=None if chosen_type == "all types" else chosen_type)
    st.caption(f"{len(chunks)} records" + (" (the first 200)" if len(chunks) >= 200 else ""))
    st.dataframe(pd.DataFrame(chunks).reindex(columns=BROWSE_COLUMNS), hide_index=True,
                 column_config={
                     "id": st.column_config.TextColumn(width="small"),
                     "text": st.column_config.TextColumn(width="large"),
                     "page": st.column_config.NumberColumn(format="%d"),
                     "round_number": st.column_config.NumberColumn(format="%d"),
                 })


def render() -> None:
    """The page: counts, the two upload forms, and the chunk browser. It needs no criterion,
    nor a vendor: on an empty store it offers the uploads."""
    vendor = resources.selected_vendor()
    widgets.header("Evidence library", vendor)
    if vendor is None:
        st.caption("No vendor selected in the sidebar.")
    statuses = resources.vendor_statuses()
    workbench = resources.get_workbench()
    show_counts(workbench, statuses)
    show_document_upload(workbench, vendor)
    show_round_upload(workbench)
    show_browser(workbench, statuses, vendor)


# Streamlit runs a page file as __main__; importing it (as the tests do) defines the functions
# above without drawing the page or opening a store.
if __name__ == "__main__":
    render()
