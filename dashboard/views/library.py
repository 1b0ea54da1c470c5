"""Evidence library: what the store holds per vendor, its documents in time (each series with
its current and earlier versions, what is stale, and a reviewer's corrections), uploads of
documents and questionnaire rounds, and a browser over the stored chunks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, tzinfo
from typing import TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pandas as pd
import streamlit as st

from core.config import MAX_ROUND_NUMBER
from core.errors import EvidenceError
from core.ingest.package import Package, PackageFile
from core.ingest.rounds.payload import parse_payload_bytes
from core.ingest.rounds.tables import is_spreadsheet
from core.ingest.uploads import (
    UploadedRound,
    ingest_uploaded_documents,
    ingest_uploaded_questionnaires,
)
from core.reports import Progress, QuestionnaireIngestReport, VendorStatus
from core.timeline.series import DocumentVersion
from core.trace.analysis import kind_label
from core.trace.context import document_date
from core.workbench import Workbench
from dashboard import actions, auth, charts, resources, widgets
from dashboard.selection import selected_vendor
from dashboard.text import minute_utc, plain

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
    return pd.DataFrame([{"Type": kind_label(t), **{s.vendor_id: s.by_type.get(t, 0)
                                                      for s in statuses}}
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
        {s.vendor_id: {kind_label(t): n for t, n in s.by_type.items()} for s in statuses}),
        key="counts_figure")
    with by_type:
        st.markdown("**Records by type**")
        st.dataframe(type_table(statuses), hide_index=True)
    st.markdown("**By follow-up round**")
    st.dataframe(round_table(statuses, documents), hide_index=True)
    if any(s.incomplete_chunks for s in statuses):
        st.warning("Some chunks belong to an interrupted ingest and are not counted; "
                   "ingesting the same files again completes it.")


STANDING_HELP = ("Current: the newest version of its series. Superseded: a newer version "
                 "of the same evidence (next year's report, a re-issued certificate, the "
                 "policy's next version) replaced it. Stale: the newest there is, but a "
                 "report whose period ended over a year ago, or a certificate past its expiry.")


def standing_text(version: DocumentVersion) -> str:
    """A version's standing in words: current, superseded by what, stale and why."""
    if version.later_version is not None:
        said = f"superseded by {version.superseded_by.source} ({version.superseded_by.date})" \
            if version.superseded_by else "superseded"
    else:
        said = "current"
    return f"{said}; stale: {version.stale}" if version.stale else said


def versions_table(versions: Sequence[DocumentVersion]) -> pd.DataFrame:
    """One row per document version, series by series, each newest first: its date as its
    text states it, its standing, who issued it and what an auditor's report says."""
    return pd.DataFrame([{
        "Series": v.series,
        "Document": v.source,
        "Standing": standing_text(v),
        "Date": document_date(v.standing()),
        "Kind": v.kind.replace("_", " "),
        "Title": v.title or "",
        "Issuer": v.issuer or "",
        "Opinion": v.opinion or "",
        "Matters": " | ".join(v.matters),
        "Received": v.received_at[:10],
        "Corrected": ", ".join(f"{k}: {val}" for k, val in v.corrected.items()),
    } for v in versions], columns=["Document", "Date", "Standing", "Series", "Kind", "Title",
                                   "Issuer", "Opinion", "Matters", "Received", "Corrected"])


def pick_vendor(statuses: Sequence[VendorStatus], vendor: str | None, *, key: str,
                empty: str) -> str | None:
    """A section's choice of vendor, starting at the one chosen in the sidebar; None (and
    `empty` said) when the store holds no vendor."""
    vendors = [s.vendor_id for s in statuses]
    if not vendors:
        st.info(empty)
        return None
    return st.selectbox("Vendor", vendors, key=key,
                        index=vendors.index(vendor) if vendor in vendors else 0)


def show_documents_in_time(statuses: Sequence[VendorStatus], vendor: str | None) -> None:
    """Each series of the vendor's documents with its current and earlier versions, what is
    stale, and the form to correct a series the workbench read wrong."""
    st.subheader("Documents in time")
    chosen = pick_vendor(statuses, vendor, key="versions_vendor", empty="No documents yet.")
    if chosen is None:
        return
    versions = resources.document_versions(chosen)
    if not versions:
        st.info(f"Vendor {chosen} holds no documents, only questionnaire answers.")
        return
    series = len({v.series for v in versions})
    earlier = sum(not v.current for v in versions)
    st.caption(f"{len(versions)} document versions in {series} series; {earlier} superseded. "
               "A series is read from what each document says of itself (its kind, the "
               "standard it attests to, its title and scope), not from its file name. "
               + STANDING_HELP)
    stale = [v for v in versions if v.stale]
    if stale:
        st.warning("**Stale evidence:**\n" + "\n".join(
            f"- {plain(v.source)}: {plain(v.stale)}" for v in stale), icon=":material/history:")
    st.dataframe(versions_table(versions), hide_index=True, key="versions_table",
                 column_config={
                     "Standing": st.column_config.TextColumn(help=STANDING_HELP),
                     "Matters": st.column_config.TextColumn(width="large"),
                     "Title": st.column_config.TextColumn(width="medium")})
    if auth.may("decide", chosen):
        correction_form(chosen, versions)


def correction_form(vendor_id: str, versions: Sequence[DocumentVersion]) -> None:
    """Move a document to another series (or a new one), date it, or undo a correction."""
    with st.expander("Correct a series the workbench read wrong"):
        keys = [v.doc_key for v in versions]
        named = {v.doc_key: f"{v.source} ({document_date(v.standing())})" for v in versions}
        target = st.selectbox("Document", keys, format_func=named.get, key="correct_document")
        what = st.radio("Correction", ["Move it to a series", "Date it", "Undo its corrections"],
                        horizontal=True, key="correct_what")
        given: dict[str, object] = {}
        if what == "Move it to a series":
            offered = list(dict.fromkeys(v.series for v in versions))
            picked = st.selectbox("Series", [*offered, "a new series"], key="correct_series")
            if picked == "a new series":
                picked = st.text_input("Name of the new series", key="correct_new_series")
            given["series"] = picked
        elif what == "Date it":
            day = st.date_input("Its date (the period's end, the issue or the review)",
                                value=None, key="correct_dated", format="YYYY-MM-DD")
            given["dated"] = day.isoformat() if day else ""
        else:
            given["reset"] = True
        if st.button("Keep the correction", key="correct_keep", type="primary"):
            try:
                fixed = resources.get_workbench().series_corrections.correct(
                    vendor_id, target, reviewer=auth.identity(), **given)
            except EvidenceError as exc:
                widgets.show_error(exc, "The correction was not kept")
                return
            auth.record("correct_series", vendor=vendor_id, page="Evidence library",
                        detail=f"{fixed.source}: series {fixed.series}, dated {fixed.date}")
            finish("versions", f"{fixed.source} is now in series {fixed.series}, dated "
                   f"{fixed.date} ({'current' if fixed.current else 'superseded'}).")
    show_outcome("versions")


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
    files = st.file_uploader("Documents (.md, .txt, .pdf, .docx, .html, .htm)",
                             type=["md", "txt", "pdf", "docx", "html", "htm"],
                             accept_multiple_files=True, key="upload_documents")
    if (st.button("Ingest the documents", key="ingest_documents", disabled=not files)
            and may_ingest([vendor_id.strip()])):
        report = run_ingest("Ingesting documents:", lambda show: ingest_uploaded_documents(
            workbench, vendor_id.strip(), [(f.name, f.getvalue()) for f in files or []],
            doc_type, round_number, show))
        if report is not None:
            auth.record("ingest", vendor=report.vendor_id, page="Evidence library",
                        detail=f"{len(report.documents)} documents, "
                               f"{report.chunks_written} chunks written")
            finish("documents", f"{report.vendor_id}, {report.type}: "
                   + "; ".join(f"{d.source} {d.status} ({chunks_text(d.chunks)})"
                               for d in report.documents)
                   + f". {chunks_text(report.chunks_written)} written.")
    show_outcome("documents")


def may_ingest(vendor_ids: Sequence[str]) -> bool:
    """Whether this user may write evidence for every one of these vendors (an admin's right
    in a team's dashboard); a refusal is shown and recorded."""
    return all(auth.refuse_action("ingest", vendor,
                                  f"You may not ingest evidence for vendor '{vendor}': that "
                                  "needs the admin role on it.")
               for vendor in dict.fromkeys(vendor_ids))


def responses_text(count: int) -> str:
    return f"{count} response" + ("" if count == 1 else "s")


def rounds_outcome(reports: Sequence[QuestionnaireIngestReport]) -> str:
    stored = "; ".join(f"{r.vendor_id} round {r.round_number}: "
                       f"{responses_text(r.indexed_count)}" for r in reports) + " stored."
    return " ".join([stored, *(f"Round {r.round_number} of {r.vendor_id} replaced: "
                               f"{answers_removed_text(r.removed_count)}."
                               for r in reports if r.removed_count is not None)])


def answers_removed_text(count: int) -> str:
    return f"{count} answer{'' if count == 1 else 's'} removed"


def rounds_named(uploads: Sequence[tuple[str, bytes]]) -> list[tuple[str, int]]:
    """The (vendor, round) each uploaded JSON round that reads names, in upload order."""
    named: list[tuple[str, int]] = []
    for name, data in uploads:
        try:
            payload = parse_payload_bytes(name, data)
        except EvidenceError:
            continue
        named.append((payload.vendor_id, payload.round_number))
    return list(dict.fromkeys(named))


def replace_box(named: Sequence[tuple[str, int]]) -> bool:
    """The choice to replace the round with the upload rather than add to it; off unless
    ticked. Its label names the round when the upload names exactly one."""
    label = "Replace the round with this upload"
    if len(named) == 1:
        (vendor_id, number), = named
        label = f"Replace round {number} of {vendor_id} with this upload"
    return st.checkbox(
        label, value=False, key="replace_round",
        help="Off: the uploaded answers join those the round already holds. On: the round "
             "becomes exactly the uploaded files (all of one vendor and round): its answers "
             "missing from them are removed, in the same atomic step.")


def ingest_label(rounds: Sequence[UploadedRound]) -> str:
    """'Ingest 12 responses into round 5 for vendor northwind' (and the other rounds)."""
    counts: Counter[tuple[str, int]] = Counter()
    for loaded in rounds:
        counts[(loaded.payload.vendor_id, loaded.payload.round_number)] += len(
            loaded.payload.responses)
    parts = [f"{responses_text(n)} into round {number} for vendor {vendor}"
             for (vendor, number), n in counts.items()]
    return "Ingest " + " and ".join(", ".join(parts).rsplit(", ", 1))


def preview_table(loaded: UploadedRound) -> pd.DataFrame:
    """The responses of one round as they will be stored, by row of the file."""
    table = pd.DataFrame(loaded.preview(), columns=["row", "criterion", "question", "answer"])
    table["criterion"] = table["criterion"].fillna("")
    return table


def browser_zone() -> tuple[tzinfo, str]:
    """The reviewer's time zone as the browser reports it, else UTC, and its name."""
    name = st.context.timezone
    if name:
        try:
            return ZoneInfo(name), name
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return UTC, "UTC"


def answer_timestamp(answered_at: datetime | None, zone: tzinfo) -> str | None:
    """The picked date and time (in the reviewer's zone) as ISO 8601; None means now."""
    if answered_at is None:
        return None
    return answered_at.replace(tzinfo=zone).isoformat()


def round_options(vendor: str | None) -> tuple[str, int, str | None]:
    """Vendor id, round number and answer time of the spreadsheet rounds; the round number
    starts at the vendor's last round plus one, and again whenever the vendor id changes."""
    vendor_id = st.text_input("Vendor id of the spreadsheet answers", value=vendor or "",
                              key="sheet_vendor",
                              help="A JSON round names its own vendor, round and time.").strip()
    if (st.session_state.get("sheet_round_for") != vendor_id
            or "sheet_round" not in st.session_state):
        st.session_state["sheet_round_for"] = vendor_id
        st.session_state["sheet_round"] = min(actions.next_round_number(vendor_id),
                                              MAX_ROUND_NUMBER)
    number_col, time_col = st.columns(2)
    round_number = int(number_col.number_input(
        "Round number", min_value=1, max_value=MAX_ROUND_NUMBER, step=1, key="sheet_round"))
    zone, zone_name = browser_zone()
    answered_at = time_col.datetime_input(
        f"Answered at ({zone_name}; leave empty for now)", value=None, key="sheet_time",
        format="YYYY-MM-DD", step=60)
    return vendor_id, round_number, answer_timestamp(answered_at, zone)


def show_preview(rounds: Sequence[UploadedRound], statuses: Sequence[VendorStatus], *,
                 replace: bool = False) -> None:
    """What will be written, round by round, with every note on how a cell was read."""
    held = {s.vendor_id: set(s.rounds) for s in statuses}
    for loaded in rounds:
        payload = loaded.payload
        where = f"{loaded.source}, sheet {loaded.sheet}" if loaded.sheet else loaded.source
        st.markdown(plain(f"{where}: {responses_text(len(payload.responses))} for vendor "
                          f"{payload.vendor_id}, round {payload.round_number}, answered "
                          f"{minute_utc(payload.timestamp, payload.timestamp)}"))
        for note in loaded.notes:
            st.caption(plain(note))
        if payload.round_number in held.get(payload.vendor_id, set()):
            st.caption(plain(
                f"Round {payload.round_number} of {payload.vendor_id} already holds answers; "
                + ("the upload replaces them: the round's answers missing from it are removed."
                   if replace else "these join them (an answer to the same criterion and "
                   "question replaces the stored one).")))
        st.dataframe(preview_table(loaded), hide_index=True, column_config={
            "row": st.column_config.NumberColumn(
                "Row" if loaded.from_spreadsheet else "Response", format="%d",
                help="the spreadsheet row, as Excel numbers it" if loaded.from_spreadsheet
                else "the response's place in the file"),
            "criterion": st.column_config.TextColumn(
                "Criterion", width="medium",
                help="the criterion the answer is linked to; blank for an ad-hoc question"),
            "question": widgets.question_column(),
            "answer": widgets.answer_column(),
        })


def show_round_upload(workbench: Workbench, vendor: str | None,
                      statuses: Sequence[VendorStatus]) -> None:
    """The questionnaire form: JSON bulk payloads ingest at once; spreadsheets (and JSON rounds
    beside them) are previewed first and written by an explicit button. Every file is checked
    before any is written."""
    st.subheader("Upload questionnaire rounds")
    st.caption("The seed-003 bulk payload as .json (vendor_id, round_number, timestamp, "
               "responses), or a .csv or .xlsx spreadsheet with the columns criterion, question "
               "and answer, such as a filled-in draft from the Next round page. Every file is "
               "checked before any is written.")
    files = st.file_uploader("Questionnaire rounds (.json, .csv, .xlsx)",
                             type=["json", "csv", "xlsx"], accept_multiple_files=True,
                             key="upload_questionnaires")
    uploads = [(f.name, f.getvalue()) for f in files or []]
    if not any(is_spreadsheet(name) for name, _ in uploads):
        replace = replace_box(rounds_named(uploads))
        if (st.button("Ingest the rounds", key="ingest_questionnaires", disabled=not uploads)
                and may_ingest([v for v, _ in rounds_named(uploads)])):
            reports = run_ingest("Ingesting rounds:", lambda show: ingest_uploaded_questionnaires(
                workbench, uploads, show, replace=replace))
            if reports is not None:
                for report in reports:
                    auth.record("ingest", vendor=report.vendor_id, page="Evidence library",
                                detail=f"round {report.round_number}: "
                                       f"{report.indexed_count} answers")
                finish("rounds", rounds_outcome(reports))
        show_outcome("rounds")
        return

    vendor_id, round_number, timestamp = round_options(vendor)
    try:
        rounds = actions.read_rounds(uploads, vendor_id=vendor_id, round_number=round_number,
                                     timestamp=timestamp)
    except EvidenceError as exc:
        widgets.show_error(exc, "The rounds could not be read")
        show_outcome("rounds")
        return
    st.markdown("**Preview**: nothing is written until you press the button below.")
    replace = replace_box(list(dict.fromkeys(
        (r.payload.vendor_id, r.payload.round_number) for r in rounds)))
    show_preview(rounds, statuses, replace=replace)
    if (st.button(ingest_label(rounds), key="ingest_spreadsheet_rounds", type="primary")
            and may_ingest([r.payload.vendor_id for r in rounds])):
        reports = run_ingest("Ingesting rounds:",
                             lambda show: actions.ingest_rounds(rounds, show, replace=replace))
        if reports is not None:
            finish("rounds", rounds_outcome(reports))
    show_outcome("rounds")


BECAME = {"document": "document", "round": "questionnaire round", "skipped": "skipped"}


def package_table(package: Package) -> pd.DataFrame:
    """One row per file of the package: what it becomes, from which sheets, and why."""
    return pd.DataFrame([{
        "File": item.file,
        "Becomes": ("cannot be read" if item.unreadable else BECAME[item.became]),
        "Kind": item.layout or "",
        "Round": item.round_number,
        "Sheets": sheets_text(item.sheets),
        "Why": item.reason,
    } for item in package.files], columns=["File", "Becomes", "Kind", "Round", "Sheets", "Why"])


def sheets_text(sheets: dict | None) -> str:
    """'read: On-Premises, Hosted; left out: Instructions (no header)', or nothing."""
    if not sheets:
        return ""
    parts = [f"read: {', '.join(sheets['read'])}"] if sheets["read"] else []
    if sheets["left_out"]:
        parts.append("left out: " + ", ".join(f"{s['sheet']} ({s['why']})"
                                             for s in sheets["left_out"]))
    return "; ".join(parts)


def needs_mapping(item: PackageFile) -> bool:
    """A table the workbench could not place, or placed by a guess: it offers the column
    mapping step (to map it, or to correct the guess)."""
    return is_spreadsheet(item.file) and (
        (item.unreadable and "--columns" in item.reason)
        or (item.layout or "").startswith("guessed"))


def package_outcome(lines: Sequence[dict]) -> str:
    documents = [line for line in lines if line["became"] == "document"]
    rounds = [line for line in lines if line["became"] == "round"]
    skipped = [line for line in lines if line["became"] == "skipped"]
    parts = [f"{len(documents)} document{'s' if len(documents) != 1 else ''} "
             f"({sum(line.get('chunks', 0) for line in documents)} chunks)"]
    parts += [f"{line['file']} as round {line['round_number']} "
              f"({responses_text(line.get('indexed_count', 0))})" for line in rounds]
    if skipped:
        parts.append(f"{len(skipped)} skipped ({', '.join(line['file'] for line in skipped)})")
    return "Package ingested: " + "; ".join(parts) + "."


def show_package_upload(vendor: str | None) -> None:
    """A whole vendor package at once: every file sorted and previewed (documents, one round
    per questionnaire, what cannot be read and why, with a column mapping for a table of an
    unknown layout), written only when the reviewer confirms."""
    st.subheader("Upload a vendor package")
    st.caption("Every file the vendor sent, at once: policies, reports and certificates "
               "become documents, each filled questionnaire (CAIQ, HECVAT, SIG, statement of "
               "applicability, VSAQ answers, a criterion/question/answer table) a round of its "
               "own. Nothing is written until you confirm.")
    vendor_id = st.text_input("Vendor id of the package", value=vendor or "",
                              key="package_vendor").strip()
    files = st.file_uploader("The package's files", accept_multiple_files=True,
                             key="upload_package")
    uploads = [(f.name, f.getvalue()) for f in files or []]
    choose = st.checkbox("Number the rounds from a round I choose", key="package_choose_round",
                         help="Off: the next rounds the vendor has not used; a file already "
                              "ingested keeps its round.")
    first_round = None
    if choose:
        first_round = int(st.number_input(
            "First round", min_value=1, max_value=MAX_ROUND_NUMBER, step=1,
            value=min(actions.next_round_number(vendor_id), MAX_ROUND_NUMBER),
            key="package_first_round"))
    if not uploads:
        show_outcome("package")
        return
    names = {name for name, _ in uploads}
    columns = {name: text for name, text in st.session_state.get("package_columns", {}).items()
               if text and name in names}
    sheets = {name: chosen for name, chosen in st.session_state.get("package_sheets", {}).items()
              if chosen and name in names}
    try:
        package = actions.read_package(vendor_id, uploads, first_round=first_round,
                                       columns=columns, sheets=sheets)
    except EvidenceError as exc:
        widgets.show_error(exc, "The package could not be read")
        show_outcome("package")
        return
    st.markdown("**Preview**: what each file becomes. Nothing is written until you press the "
                "button below.")
    st.dataframe(package_table(package), hide_index=True, column_config={
        "Round": st.column_config.NumberColumn(format="%d"),
        "Why": st.column_config.TextColumn(width="large")})
    show_mappings(package)
    for item in package.files:
        if item.preview:
            with st.expander(f"{item.file}: the first rows" if item.became == "round"
                             else f"{item.file}: the first chunks"):
                st.dataframe(pd.DataFrame(item.preview[:50]), hide_index=True)
    unreadable = package.unreadable
    skip = False
    if unreadable:
        st.warning(f"{len(unreadable)} file{'s' if len(unreadable) != 1 else ''} cannot be "
                   "read (see Why above). Fix or map them, or ingest the rest without them.")
        skip = st.checkbox("Ingest the rest and skip the files that cannot be read",
                           key="package_skip")
    usable = len(package.documents) + len(package.rounds)
    label = (f"Ingest the package: {len(package.documents)} documents and "
             f"{len(package.rounds)} rounds for vendor {package.vendor_id}")
    if (st.button(label, key="ingest_package", type="primary",
                  disabled=not usable or bool(unreadable and not skip))
            and may_ingest([package.vendor_id])):
        lines = run_ingest("Ingesting the package:",
                           lambda show: actions.ingest_package(package, show))
        if lines is not None:
            finish("package", package_outcome(lines))
    show_outcome("package")


def show_mappings(package: Package) -> None:
    """The mapping step: for each table of an unknown layout, the columns to read it by."""
    unmapped = [item for item in package.files if needs_mapping(item)]
    mapped = st.session_state.get("package_columns", {})
    chosen = st.session_state.get("package_sheets", {})
    if not unmapped and not mapped and not chosen:
        return
    for item in unmapped:
        if item.round is not None and item.round.notes:
            guessed = [n for n in item.round.notes if n.startswith("Guessed")]
            if guessed:
                st.info(guessed[0])
    st.markdown("**Column mapping** for a table of a layout the workbench does not know, or "
                "to correct a guessed one: name the columns to read, by letter or header "
                "text, `+` joining columns (for example `id=A,question=B,answer=C+E`), and "
                "the sheets to read (none chosen: every sheet with those columns).")
    with st.form("package_mapping"):
        given: dict[str, str] = {}
        picked: dict[str, list[str]] = {}
        for item in unmapped + [i for i in package.files
                                if (i.file in mapped or i.file in chosen)
                                and not needs_mapping(i)]:
            given[item.file] = st.text_input(f"Columns of {item.file}",
                                             value=mapped.get(item.file, ""),
                                             key=f"package_map_{item.file}")
            offered = workbook_sheets(item)
            if offered:
                picked[item.file] = st.multiselect(
                    f"Sheets of {item.file} to read", offered,
                    default=[s for s in chosen.get(item.file, []) if s in offered],
                    key=f"package_sheets_{item.file}")
        if st.form_submit_button("Read the tables with these columns"):
            st.session_state["package_columns"] = {k: v.strip() for k, v in given.items()}
            st.session_state["package_sheets"] = {k: v for k, v in picked.items() if v}
            st.rerun()


def workbook_sheets(item: PackageFile) -> list[str]:
    """The sheets of a workbook the package read or left out, in the workbook's terms."""
    if not item.sheets:
        return []
    return [*item.sheets["read"], *(s["sheet"] for s in item.sheets["left_out"])]


def show_browser(workbench: Workbench, statuses: Sequence[VendorStatus],
                 vendor: str | None) -> None:
    """One vendor's stored chunks, filtered by text and type."""
    st.subheader("Browse and search the stored chunks")
    browse_vendor = pick_vendor(statuses, vendor, key="browse_vendor",
                                empty="Nothing to browse yet.")
    if browse_vendor is None:
        return
    types = sorted(next(s.by_type for s in statuses if s.vendor_id == browse_vendor))
    search, type_filter = st.columns([2, 1])
    contains = search.text_input("Text contains (exact, case-sensitive)", key="library_search")
    chosen_type = type_filter.selectbox("Type", ["all types", *types], key="library_type",
                                        format_func=lambda t: t if t == "all types"
                                        else kind_label(t))
    if contains and st.session_state.get("_searched") != (browse_vendor, contains):
        st.session_state["_searched"] = (browse_vendor, contains)
        auth.record("search", vendor=browse_vendor, page="Evidence library", detail=contains)
    chunks = workbench.browse_chunks(
        browse_vendor, contains=contains or None,
        doc_type=None if chosen_type == "all types" else chosen_type)
    st.caption(f"{len(chunks)} records" + (" (the first 200)" if len(chunks) >= 200 else ""))
    table = pd.DataFrame(chunks).reindex(columns=BROWSE_COLUMNS)
    table["type"] = [kind_label(str(t), r if r == r else None)  # NaN: no round
                     for t, r in zip(table["type"], table["round_number"], strict=True)]
    st.dataframe(table, hide_index=True,
                 column_config={
                     "id": st.column_config.TextColumn(width="small"),
                     "text": st.column_config.TextColumn(width="large"),
                     "page": st.column_config.NumberColumn(format="%d"),
                     "round_number": st.column_config.NumberColumn(format="%d"),
                 })


def render() -> None:
    """The page: counts, the two upload forms, and the chunk browser. It needs no criterion,
    nor a vendor: on an empty store it offers the uploads."""
    vendor = selected_vendor()
    widgets.header("Evidence library", vendor)
    if vendor is None:
        st.caption("No vendor selected in the sidebar.")
    every = resources.vendor_statuses()
    visible = set(auth.visible([s.vendor_id for s in every]))
    statuses = [s for s in every if s.vendor_id in visible]
    workbench = resources.get_workbench()
    show_counts(workbench, statuses)
    show_documents_in_time(statuses, vendor)
    if auth.may("ingest"):
        show_document_upload(workbench, vendor)
        show_round_upload(workbench, vendor, statuses)
        show_package_upload(vendor)
    else:
        st.caption("Uploading evidence needs the admin role; yours may read what is stored.")
    show_browser(workbench, statuses, vendor)


# Streamlit runs a page file as __main__; importing it (as the tests do) defines the functions
# above without drawing the page or opening a store.
if __name__ == "__main__":
    render()
