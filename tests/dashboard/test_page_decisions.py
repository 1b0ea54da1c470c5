"""The reviewer's decisions in the dashboard: recorded on the Criterion overview, listed on the
Decisions page, re-opened when the evidence moves (fake models over the sample data)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from streamlit.testing.v1 import AppTest

from core.ingest.rounds.payload import parse_payload
from dashboard import resources
from dashboard.views.decisions import NO_DECISION
from dashboard.views.overview import WAIVER_NEEDS_DATE
from tests.conftest import AES_CRITERION
from tests.dashboard.conftest import DASHBOARD, page
from tests.support import payloads
from tests.support.sentences import one_sentence

TLS_CRITERION = "Does the vendor encrypt data in transit using TLS 1.2 or higher?"
NOTE = "Round 3 says AES-128 for the archive; the KMS document says AES-256."


def shown(text: str) -> str:
    """Text as the reader sees it: the markdown escapes taken out."""
    return text.replace("\\", "")


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def table(at: AppTest, first_column: str):
    return next(df.value for df in at.dataframe if df.value.columns[0] == first_column)


def fill(at: AppTest, status: str, *, note: str = "", reviewer: str | None = None,
         until: date | None = None) -> AppTest:
    """The decision form filled in, Record decision not pressed yet."""
    at.selectbox(key="decision_status").select(status).run()
    if until is not None:
        at.date_input(key="decision_until").set_value(until).run()
    if note:
        at.text_area(key="decision_note").input(note).run()
    if reviewer is not None:
        at.text_input(key="decision_reviewer").input(reviewer).run()
    return at


def record(at: AppTest) -> AppTest:
    return at.button(key="decision_record").click().run()


def new_round(workbench, answer: str) -> None:
    """Round 6 of acme, one answer linked to the AES criterion."""
    payload = payloads.round_payload(6, [payloads.response(
        "Is the archive encrypted with AES-256 now?", answer, AES_CRITERION)],
        timestamp="2024-09-01T09:00:00Z")
    list(workbench.ingest_questionnaires([parse_payload(payload)]))


def test_a_decision_recorded_on_the_overview_shows_on_the_decisions_page(dashboard_workbench):
    decisions_page = page("decisions").run()
    assert not decisions_page.exception
    assert decisions_page.title[0].value == "Decisions"
    assert [i.value for i in decisions_page.info] == [NO_DECISION]
    assert not decisions_page.metric

    at = page("overview").run()
    assert not at.exception
    assert any(m.value == "No decision is recorded for this criterion yet." for m in at.markdown)
    assert at.button(key="decision_record").disabled  # no status chosen yet
    assert not [d for d in at.get("date_input")]  # a date is asked for a waiver only

    record(fill(at, "partially_met", note=NOTE, reviewer="alice"))

    assert not at.exception and not at.error
    [success] = at.success
    assert shown(success.value).startswith("Current: **Partially met**, decided by alice on ")
    assert any(c.value == "Recorded just now." for c in at.caption)
    assert at.text_area(key="decision_note").value == ""  # the form is ready for the next
    assert at.selectbox(key="decision_status").value is None
    history = table(at, "When")
    assert history[["Reviewer", "Status", "Rounds seen", "Note"]].values.tolist() == [
        ["alice", "Partially met", "rounds 3, 4, 5", NOTE]]

    [view] = dashboard_workbench.decisions("acme")
    assert (view.criterion, view.status, view.reviewer, view.note, view.strategy,
            view.state) == (AES_CRITERION, "partially_met", "alice", NOTE, "precedence",
                            "current")
    assert view.seen.rounds == [3, 4, 5]

    decisions_page.run()
    assert not decisions_page.exception
    assert metrics(decisions_page) == {"Decided": "1", "Current": "1", "Needs re-review": "0",
                                       "Expired": "0"}
    rows = table(decisions_page, "Criterion")
    assert rows[["Criterion", "Status", "State", "Reviewer", "Until", "What changed"]
                ].values.tolist() == [
        [AES_CRITERION, "Partially met", "Current", "alice", "", ""]]
    assert shown(decisions_page.success[0].value).startswith("Current: **Partially met**")

    # A second decision on the same criterion is its current one at once; the first is kept.
    at.run()
    record(fill(at, "met", reviewer="bob"))
    assert not at.error
    decisions_page.run()
    assert table(decisions_page, "Criterion")[["Status", "Reviewer"]].values.tolist() == [
        ["Met", "bob"]]
    assert table(decisions_page, "When")["Reviewer"].tolist() == ["bob", "alice"]  # newest first
    assert [d.status for d in dashboard_workbench.decisions("acme")[0].history] == [
        "partially_met", "met"]


def test_a_waiver_without_a_date_is_refused_and_nothing_is_written(dashboard_workbench):
    at = fill(page("overview").run(), "waived", note="Accepted until the migration ends.")
    assert at.date_input(key="decision_until").value is None

    record(at)

    assert not at.exception
    [error] = at.error
    assert error.value == WAIVER_NEEDS_DATE and one_sentence(error.value)
    assert not at.success
    assert dashboard_workbench.decisions("acme") == []
    assert dashboard_workbench.store.decisions("acme") is None  # not even its collection
    assert at.text_area(key="decision_note").value == "Accepted until the migration ends."

    # With the date the same waiver is recorded; the refusal is gone.
    until = datetime.now(UTC).date() + timedelta(days=30)
    at.date_input(key="decision_until").set_value(until).run()
    record(at)
    assert not at.error
    assert shown(at.success[0].value).startswith(
        f"Current: **Waived until {until.isoformat()}**")
    [view] = dashboard_workbench.decisions("acme")
    assert (view.status, view.until) == ("waived", until.isoformat())


def test_a_refusal_of_the_workbench_is_one_sentence_and_writes_nothing(dashboard_workbench):
    at = record(fill(page("overview").run(), "met", reviewer=" "))

    assert not at.exception
    [error] = at.error
    assert error.value == "The reviewer's name must be 1 to 80 characters."
    assert dashboard_workbench.store.decisions("acme") is None


def test_a_new_round_makes_the_decision_need_re_review_on_both_pages(dashboard_workbench):
    dashboard_workbench.decide("acme", AES_CRITERION, "met", strategy="precedence",
                               note="AES-256 everywhere.", reviewer="alice")
    decisions_page = page("decisions").run()
    assert table(decisions_page, "Criterion")["State"].tolist() == ["Current"]

    # As the command line ingests: nothing tells the dashboard, the store's state moves.
    new_round(dashboard_workbench, "No, the archive still uses AES-128.")
    [view] = dashboard_workbench.decisions("acme")
    assert view.state == "needs_review"
    assert view.changes[0].startswith("Round 6 answers No where round 5 answered ")
    assert "Round 3 is no longer in the context." in view.changes

    decisions_page.run()
    assert not decisions_page.exception
    assert metrics(decisions_page)["Needs re-review"] == "1"
    rows = table(decisions_page, "Criterion")
    assert rows["State"].tolist() == ["Needs re-review"]
    assert rows["What changed"].tolist() == [" ".join(view.changes)]
    [warning] = decisions_page.warning
    assert shown(warning.value).startswith("Needs re-review: **Met**, decided by alice on ")
    assert all(change in shown(warning.value) for change in view.changes)

    at = page("overview").run()
    assert not at.exception
    [warning] = decision_warnings(at)  # beside the contradiction between rounds 3 and 5
    assert shown(warning.value).startswith("Needs re-review: **Met**")
    assert all(change in shown(warning.value) for change in view.changes)
    assert not at.success

    # Decided again on the context as it is now, the criterion is current again.
    record(fill(at, "not_met", reviewer="alice"))
    assert not decision_warnings(at)
    assert shown(at.success[0].value).startswith("Current: **Not met**")
    decisions_page.run()
    assert table(decisions_page, "Criterion")["State"].tolist() == ["Current"]


def test_filters_metrics_and_an_expired_waiver(dashboard_workbench, monkeypatch):
    today = datetime.now(UTC).date()
    until = today + timedelta(days=10)
    dashboard_workbench.decide("acme", AES_CRITERION, "waived", until=until.isoformat(),
                               reviewer="alice")
    dashboard_workbench.decide("acme", TLS_CRITERION, "met", reviewer="bob")
    monkeypatch.setattr(resources, "_today", lambda: until + timedelta(days=1))

    at = page("decisions").run()
    assert not at.exception
    assert metrics(at) == {"Decided": "2", "Current": "1", "Needs re-review": "0",
                           "Expired": "1"}
    rows = table(at, "Criterion")
    assert rows[["Criterion", "State", "What changed"]].values.tolist() == [
        [AES_CRITERION, "Expired", "The waiver is past its date."],
        [TLS_CRITERION, "Current", ""]]
    assert shown(at.warning[0].value).startswith(
        f"Expired: **Waived until {until.isoformat()}**")

    at.toggle(key="decisions_to_review").set_value(True).run()
    assert table(at, "Criterion")["Criterion"].tolist() == [AES_CRITERION]
    at.toggle(key="decisions_to_review").set_value(False).run()

    at.multiselect(key="decisions_statuses").select("met").run()
    assert table(at, "Criterion")["Criterion"].tolist() == [TLS_CRITERION]
    at.multiselect(key="decisions_states").select("expired").run()
    assert not [df for df in at.dataframe if df.value.columns[0] == "Criterion"]
    assert [i.value for i in at.info] == ["No decision matches these filters."]
    at.multiselect(key="decisions_statuses").unselect("met").run()
    assert table(at, "Criterion")["Criterion"].tolist() == [AES_CRITERION]

    # The overview shows the waiver as expired too.
    overview = page("overview").run()
    [expired] = decision_warnings(overview)
    assert shown(expired.value).startswith("Expired: ")


def decision_warnings(at) -> list:
    """The overview's warnings about the decision (not the contradictions between answers,
    which it shows under the current answer)."""
    return [w for w in at.warning if not w.value.startswith("**Contradictions")]


def test_the_decisions_page_opens_from_the_frame(dashboard_workbench):
    at = AppTest.from_file(str(DASHBOARD / "app.py"), default_timeout=300).run()
    at.switch_page("views/decisions.py").run()
    assert not at.exception
    assert at.title[0].value == "Decisions"
    assert [i.value for i in at.info] == [NO_DECISION]


def test_an_unknown_vendor_is_one_error(dashboard_workbench):
    at = page("decisions", vendor="nobody").run()
    assert not at.exception
    [error] = at.error
    assert "nobody" in error.value and one_sentence(error.value)
