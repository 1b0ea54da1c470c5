"""The Criteria and controls page and the overview's controls, as a reviewer sees them (fake
models): a mapped list's rows with their proposals, a row's controls edited and accepted, a
bad id refused in one sentence with nothing kept, and the criterion overview naming the
controls and the answers linked through them."""

from __future__ import annotations

from core.criteria import CriterionEntry
from tests.dashboard.conftest import page
from tests.support.control_matrix import CLOUD, ON_PREMISES, write_matrix

LOCKOUT = "Unsuccessful logon attempts lock the account"


def _mapped(bench) -> None:
    bench.controls.map_list("reviewer-list.csv", [CriterionEntry(LOCKOUT),
                                                  CriterionEntry("Staff get screened")])


def test_lists_a_mapped_list_with_its_proposals(dashboard_workbench):
    _mapped(dashboard_workbench)
    at = page("criteria").run()
    assert not at.exception
    assert at.title[0].value == "Criteria and controls"
    assert any("NIST SP 800-53 Rev. 5" in c.value and "5.0.1" in c.value for c in at.caption)
    [table] = at.data_editor
    rows = table.value
    assert rows["criterion"].tolist() == [LOCKOUT, "Staff get screened"]
    first = rows.iloc[0]
    assert "AC-7" in first["proposals"] and first["status"] == "proposed"
    # The controls a retrieval links by until a reviewer decides: the confident proposals.
    assert first["controls"] and not first["accept"]


def test_a_row_is_accepted_with_edited_controls(dashboard_workbench):
    _mapped(dashboard_workbench)
    at = page("criteria").run()
    editor_key = "controls_editor_reviewer-list.csv"
    at.session_state[editor_key] = {
        "edited_rows": {0: {"accept": True, "controls": "AC-7; IA-2(1)"}},
        "added_rows": [], "deleted_rows": []}
    at.button(key="save_controls").click().run()
    assert not at.exception
    assert any("Kept 1 accepted mapping of reviewer-list.csv" in s.value for s in at.success)
    item = next(m for m in dashboard_workbench.controls.kept()[0][2] if m.criterion == LOCKOUT)
    assert item.decided and [c.id for c in item.accepted] == ["AC-7", "IA-2(1)"]
    assert {c.status for c in item.accepted} == {"accepted"}


def test_an_unknown_id_is_refused_and_nothing_is_kept(dashboard_workbench):
    _mapped(dashboard_workbench)
    at = page("criteria").run()
    at.session_state["controls_editor_reviewer-list.csv"] = {
        "edited_rows": {0: {"accept": True, "controls": "AC-7; ZZ-1"}},
        "added_rows": [], "deleted_rows": []}
    at.button(key="save_controls").click().run()
    assert not at.exception
    [error] = at.error
    assert "'ZZ-1' is not a control id" in error.value
    assert not any(m.decided for m in dashboard_workbench.controls.kept()[0][2])


def test_the_overview_names_the_controls_and_their_linked_answers(dashboard_workbench,
                                                                  tmp_path):
    book = write_matrix(tmp_path / "crm.xlsx",
                        {"On-Premises CRM": ON_PREMISES, "Cloud CRM": CLOUD})
    [loaded] = dashboard_workbench.load_rounds([book], vendor_id="acme", round_number=9)
    dashboard_workbench.ingest_questionnaire(loaded.payload)
    dashboard_workbench.controls.map_list("lockout.txt", [CriterionEntry(LOCKOUT)])
    at = page("overview", criterion=LOCKOUT).run()
    assert not at.exception
    assert any(h.value == "Controls" for h in at.subheader)
    controls = next(df.value for df in at.dataframe if df.value.columns[0] == "control")
    row = controls[controls["control"] == "AC-7"].iloc[0]
    assert row["status"] == "proposed" and row["answers"] == 2
    assert row["answered in"] == "round 9, Cloud CRM; round 9, On-Premises CRM"
    followups = next(df.value for df in at.dataframe if df.value.columns[0] == "round")
    assert {"Cloud CRM", "On-Premises CRM"} <= set(followups["sheet"])
    # The current answer says how it is linked (no round answers the criterion's hash).
    assert any("This answer is linked by control" in c.value and ", proposed" in c.value
               for c in at.caption)
