"""Criteria and controls: each criteria list's mapping to the controls that answer it, as the
ranking over the shipped catalog proposed it and as reviewers accepted or edited it; a list
uploaded here is mapped, and a reviewer accepts or edits its rows. The mappings are the
store's, used for every vendor: an answer keyed by a mapped control links to the criterion in
the control tier."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.config import MAX_CRITERION_CHARS
from core.controls.mappings import FRAMEWORKS, CriterionMapping, parse_controls
from core.errors import EvidenceError, UserInputError
from core.ingest.criteria_lists import read_uploaded_criteria
from dashboard import auth, resources, widgets

SAVED_KEY = "controls_saved"
EDITOR_KEY = "controls_editor"


def catalog_caption() -> None:
    catalog = resources.get_workbench().controls.proposer.catalog
    st.caption(f"Proposals rank the {catalog.name} catalog (release {catalog.version}, "
               f"{len(catalog.current())} current controls and enhancements, {catalog.terms}) "
               "by the embedding model and BM25 over each control's title and statement. "
               "ISO/IEC 27001:2013 Annex A ids join through NIST's published mapping; no "
               "licensed text (ISO's, CSA's, the SIG's) ships.")


def mapping_rows(items: list[CriterionMapping]) -> pd.DataFrame:
    """One row per criterion: its controls as a reviewer edits them (the accepted ones, or
    the confident proposals until someone decides), who decided, and the proposals."""
    rows = []
    for item in items:
        in_use = item.in_use()
        rows.append({
            "accept": False,
            "criterion": item.criterion,
            "controls": "; ".join(link.id for link in in_use),
            "status": ("accepted" if item.decided and item.accepted else
                       "decided: no control" if item.decided else
                       "proposed" if in_use else "no confident proposal"),
            "proposals": "; ".join(
                f"{link.id}{f' {link.title}' if link.title else ''} ({link.score:.2f})"
                for link, _ in item.proposals[:3] if link.score is not None),
        })
    return pd.DataFrame(rows)


def map_upload() -> None:
    """A criteria list uploaded and mapped: its proposals kept under its file name."""
    with st.form("map_criteria", border=True):
        upload = st.file_uploader("Criteria list (.csv, .xlsx or one criterion per line)",
                                  type=["csv", "xlsx", "txt"], key="map_upload")
        framework = st.selectbox("Framework", list(FRAMEWORKS), format_func=FRAMEWORKS.get,
                                 key="map_framework")
        pressed = st.form_submit_button("Propose controls", icon=":material/auto_awesome:")
    if not pressed or upload is None:
        return
    try:
        entries = read_uploaded_criteria(upload.name, upload.getvalue(),
                                         max_chars=MAX_CRITERION_CHARS)
        with st.spinner("Ranking the catalog for each criterion..."):
            resources.get_workbench().controls.map_list(upload.name, entries,
                                                        framework=framework)
    except EvidenceError as exc:
        st.error(str(exc))
        return
    auth.record("map_controls", page="Criteria and controls",
                detail=f"{upload.name}: {len(entries)} criteria proposed")
    resources.store_changed()
    st.session_state["controls_list"] = upload.name
    st.success(f"Mapped {len(entries)} criteria of {upload.name}: the confident proposals "
               "link until a reviewer decides.")


def save_decisions(name: str, items: list[CriterionMapping], edited: pd.DataFrame) -> None:
    """The rows ticked Accept, kept as accepted with the controls their cells name; a cell
    naming an id the workbench does not know refuses the whole save in one sentence."""
    decisions = {}
    for row, item in zip(edited.itertuples(index=False), items, strict=True):
        if not row.accept:
            continue
        try:
            decisions[item.canonical_hash] = parse_controls(
                str(row.controls or ""), f"The criterion {item.criterion[:60]!r}")
        except UserInputError as exc:
            st.error(str(exc))
            return
    if not decisions:
        st.info("Tick Accept on the rows to keep as accepted.")
        return
    resources.get_workbench().controls.decide(name, decisions)
    auth.record("map_controls", page="Criteria and controls",
                detail=f"{name}: {len(decisions)} criteria mapped to accepted controls")
    resources.store_changed()
    st.session_state[SAVED_KEY] = (f"Kept {len(decisions)} accepted mapping"
                                   f"{'' if len(decisions) == 1 else 's'} of {name}.")
    st.rerun()


def render() -> None:
    widgets.header("Criteria and controls", None)
    catalog_caption()
    controls = resources.get_workbench().controls
    kept = controls.kept()
    may_decide = auth.may("decide")
    if may_decide:
        with st.expander("Map a criteria list", expanded=not kept):
            map_upload()
        kept = controls.kept()
    if not kept:
        st.info("No criteria list is mapped yet: upload one above, or run `evidence criteria "
                "map --criteria-file FILE`.")
        return
    names = [name for name, _when, _items in kept]
    name = st.selectbox("Criteria list", names, key="controls_list")
    when, items = next((w, i) for n, w, i in kept if n == name)
    decided = sum(item.decided for item in items)
    st.caption(f"{len(items)} {'criterion' if len(items) == 1 else 'criteria'}, {decided} "
               f"decided by a reviewer; last changed "
               f"{when[:19].replace('T', ' ')} UTC. Edit a row's controls (ids separated by "
               "';', such as AC-7; AC-2(1); A.9.4.2), tick Accept and save.")
    if message := st.session_state.pop(SAVED_KEY, None):
        st.success(message)
    edited = st.data_editor(
        mapping_rows(items), hide_index=True, key=f"{EDITOR_KEY}_{name}",
        disabled=True if not may_decide else ["criterion", "status", "proposals"],
        column_config={
            "accept": st.column_config.CheckboxColumn("Accept", help="keep this row's "
                                                      "controls as accepted"),
            "criterion": st.column_config.TextColumn("Criterion", width="large"),
            "controls": st.column_config.TextColumn(
                "Controls", help="the controls its answers link by: accepted, or the "
                                 "confident proposals until a reviewer decides"),
            "status": st.column_config.TextColumn("Status"),
            "proposals": st.column_config.TextColumn(
                "Best proposals", width="large",
                help="the ranking's first three, with their fused scores"),
        })
    if not may_decide:
        st.caption("Your role (viewer) may read the mappings; accepting them needs the "
                   "reviewer role.")
        return
    if st.button("Save accepted mappings", key="save_controls", type="primary",
                 icon=":material/check:"):
        save_decisions(name, items, edited)


if __name__ == "__main__":
    render()
