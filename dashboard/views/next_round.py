"""Next round: the follow-up questionnaire to send a vendor, drafted from a criteria list, each
criterion with the rounds that already answered it, downloaded as .xlsx, .csv or .json."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from core.config import MAX_ROUND_NUMBER
from core.criteria import check_question
from core.errors import EvidenceError, UserInputError
from core.outputs.draft import DraftFormat, DraftRow
from dashboard import actions, auth, resources, widgets
from dashboard.selection import selected_vendor
from dashboard.text import plain, rounds_label

EDITOR_KEY = "next_round_editor"
ROW_PX = 35  # a table row's height
MAX_SHOWN_ROWS = 25  # rows in view before the table scrolls
FORMATS: dict[DraftFormat, tuple[str, str]] = {  # label, MIME type
    "xlsx": ("Excel workbook (.xlsx)",
             "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    "csv": ("CSV (.csv)", "text/csv"),
    "json": ("JSON payload (.json)", "application/json"),
}


def editor_table(rows: Sequence[DraftRow], only_unanswered: bool) -> pd.DataFrame:
    """One row per criterion, indexed by its hash (a new criteria list starts the editor
    afresh); Ask preselected for every criterion, or only those without a linked answer."""
    return pd.DataFrame({
        "Ask": [not (only_unanswered and row.answered_rounds) for row in rows],
        "ID": [row.id or "" for row in rows],
        "Criterion": [row.criterion for row in rows],
        "Linked answers": [rounds_label(row.answered_rounds) for row in rows],
        "Question": [row.question for row in rows],
    }, index=pd.Index([row.criterion_hash for row in rows], name="criterion_hash"))


def chosen_rows(rows: Sequence[DraftRow], edited: pd.DataFrame) -> list[DraftRow]:
    """The rows ticked Ask, each with its question as edited (blank: the criterion text). The
    criterion itself is never taken from the editor: it is what links the answer."""
    chosen = []
    for number, row in enumerate(rows, start=1):
        cells = edited.loc[row.criterion_hash]
        if not bool(cells["Ask"]):
            continue
        typed = cells["Question"]
        question = typed if isinstance(typed, str) and typed.strip() else row.criterion
        try:
            question = check_question(question)
        except UserInputError as exc:
            reason = str(exc)
            raise UserInputError(
                f"Row {number} of the table: {reason[0].lower()}{reason[1:]}") from None
        chosen.append(row.model_copy(update={"question": question}))
    return chosen


def file_name(vendor_id: str, round_number: int, fmt: DraftFormat) -> str:
    return f"{vendor_id}_round_{round_number}.{fmt}"


def round_number_input(vendor_id: str) -> int:
    """The round being drafted: the vendor's last round plus one, again whenever the sidebar's
    vendor changes."""
    if (st.session_state.get("next_round_for") != vendor_id
            or "next_round_number" not in st.session_state):
        st.session_state["next_round_for"] = vendor_id
        st.session_state["next_round_number"] = min(actions.next_round_number(vendor_id),
                                                    MAX_ROUND_NUMBER)
    return int(st.number_input("Round number", min_value=1, max_value=MAX_ROUND_NUMBER, step=1,
                               key="next_round_number",
                               help="Defaults to the vendor's last round plus one."))


def show_downloads(chosen: Sequence[DraftRow], vendor_id: str, round_number: int) -> None:
    """One download button per format; a format that cannot hold the draft says why."""
    columns = st.columns(len(FORMATS) + 1)  # the buttons side by side on the left
    for column, (fmt, (label, mime)) in zip(columns, FORMATS.items(), strict=False):
        data, problem = b"", None
        if chosen:
            try:
                data = actions.draft_file(chosen, vendor_id, round_number, fmt)
            except EvidenceError as exc:
                problem = widgets.error_sentence(exc, f"The {fmt} draft failed")
        with column:
            st.download_button(label, data, file_name=file_name(vendor_id, round_number, fmt),
                               mime=mime, key=f"next_round_download_{fmt}",
                               icon=":material/download:",
                               on_click=auth.on_download(
                                   "export", vendor_id, f"round {round_number} draft as {fmt}"),
                               disabled=not chosen or problem is not None)
            if problem:
                st.error(problem)


def how_to_ingest(vendor_id: str, round_number: int) -> str:
    sheet = file_name(vendor_id, round_number, "xlsx")
    payload = file_name(vendor_id, round_number, "json")
    return plain(
        "The vendor fills in the Answer column and leaves the Criterion column as it is: it is "
        "what links each answer to its criterion. Ingest the filled file on the Evidence "
        f"library page (vendor {vendor_id}, round {round_number}), or with ") + (
        f"`evidence ingest questionnaire {sheet} --vendor {vendor_id} --round {round_number}` "
        f"(a .json file names its own vendor and round: `evidence ingest questionnaire "
        f"{payload}`).")


def render() -> None:
    """The page: the criteria, the table to choose and word the questions, the downloads. It
    needs a vendor, not a criterion."""
    vendor = selected_vendor()
    widgets.header("Next round", vendor)
    vendor = widgets.require_vendor(vendor)
    try:
        own = resources.vendor_criteria(vendor)
    except EvidenceError as exc:
        widgets.stop_on_error(exc, "The vendor's criteria could not be read")
    criteria = widgets.choose_criteria("next_round", own, actions.uploaded_criteria(vendor))
    if criteria is None:
        st.stop()
    try:
        rows = resources.draft_rows(vendor, criteria)
    except EvidenceError as exc:
        widgets.stop_on_error(exc, "The draft failed")

    settings, toggle = st.columns([1, 3], vertical_alignment="bottom")
    with settings:
        round_number = round_number_input(vendor)
    only_unanswered = toggle.toggle("Only criteria without a linked answer",
                                    key="next_round_only_unanswered",
                                    help="Preselects the criteria no round has answered yet.")
    held = [n for s in resources.vendor_statuses() if s.vendor_id == vendor for n in s.rounds]
    if round_number in held:
        st.warning(plain(f"Round {round_number} of {vendor} already holds answers; the filled "
                         "file's answers will join them."))

    st.caption("Tick Ask for each criterion to put to the vendor, and reword its question if "
               "you like: the question is what the vendor reads, the criterion stays as it is. "
               "Linked answers are the rounds whose answers already carry the criterion's hash.")
    edited = st.data_editor(
        editor_table(rows, only_unanswered), key=EDITOR_KEY, hide_index=True,
        num_rows="fixed", disabled=["ID", "Criterion", "Linked answers"],
        height=ROW_PX * (min(len(rows), MAX_SHOWN_ROWS) + 1) + 3,
        column_config={
            "Ask": st.column_config.CheckboxColumn("Ask", width=64),
            "ID": st.column_config.TextColumn("ID", width=64),
            "Criterion": st.column_config.TextColumn("Criterion", width=330),
            "Linked answers": st.column_config.TextColumn(
                "Linked answers", width=130,
                help="rounds with an answer linked to the criterion by its hash"),
            "Question": st.column_config.TextColumn(
                "Question", width=370,
                help="What the vendor is asked; left blank, the criterion text."),
        })
    try:
        chosen = chosen_rows(rows, edited)
    except UserInputError as exc:
        widgets.show_error(exc, "The draft failed")
        chosen = []
    answered = sum(1 for row in chosen if row.answered_rounds)
    st.markdown(plain(f"{len(chosen)} of {len(rows)} criteria asked in round {round_number}"
                      + (f" ({answered} of them already answered)" if answered else "") + "."))
    if not chosen and only_unanswered and all(row.answered_rounds for row in rows):
        st.info("Every criterion already has a linked answer; tick Ask to ask again.")
    show_downloads(chosen, vendor, round_number)
    st.markdown(how_to_ingest(vendor, round_number))


# Streamlit runs a page file as __main__; importing it (as the tests do) defines the functions
# above without drawing the page or opening a store.
if __name__ == "__main__":
    render()
