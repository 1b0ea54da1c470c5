"""Documents in series (core/timeline/series.py): which documents are versions of one another,
which is current, what superseded each earlier one, and which current evidence went stale."""

from __future__ import annotations

from datetime import date, timedelta

from core.models import DocumentFacts
from core.timeline.series import SeriesCorrection, StoredDocument, timeline

TODAY = date(2026, 11, 28)


def doc(key: str, source: str, received: str = "2026-01-05T10:00:00+00:00",
        archived_of: str | None = None, **facts) -> StoredDocument:
    return StoredDocument(doc_key=key, source=source, type="tc_files", received_at=received,
                          facts=DocumentFacts(**facts) if facts else None,
                          archived_of=archived_of)


def soc3(key: str, source: str, start: str, end: str, issuer: str, **more) -> StoredDocument:
    return doc(key, source, kind="report", family="SOC 3", issuer=issuer,
               title="SOC 3 Report", period_start=start, period_end=end, **more)


def test_a_firm_change_renaming_every_file_keeps_one_series():
    versions = timeline([
        soc3("a", "Example-2023-WebReport.pdf", "2022-09-01", "2023-08-31", "Old Firm LLP"),
        soc3("b", "Example-2024-WebReport.pdf", "2023-09-01", "2024-08-31", "Old Firm LLP"),
        soc3("c", "EX-SOC3-FY25.pdf", "2024-09-01", "2025-08-31", "New Firm LLP"),
    ], today=TODAY)
    assert len({v.series for v in versions.values()}) == 1
    assert [k for k, v in versions.items() if v.current] == ["c"]
    assert versions["a"].superseded_by.source == "Example-2024-WebReport.pdf"
    assert versions["b"].superseded_by.source == "EX-SOC3-FY25.pdf"
    assert versions["a"].later_version.model_dump() == {"source": "EX-SOC3-FY25.pdf",
                                                        "date": "2025-08-31"}
    assert versions["c"].superseded_by is None and versions["c"].later_version is None
    assert versions["c"].earlier_versions == 2
    # The current report's period ended more than a year ago: stale, in words.
    assert versions["c"].stale == "The report's period ended 2025-08-31, over a year ago."
    assert versions["a"].stale is None  # superseded, which says more


def test_a_recent_report_is_not_stale_and_the_limit_is_a_setting():
    recent = (TODAY - timedelta(days=200)).isoformat()
    versions = timeline([soc3("a", "soc3.pdf", "2025-01-01", recent, "Firm LLP")],
                        today=TODAY)
    assert versions["a"].stale is None
    versions = timeline([soc3("a", "soc3.pdf", "2025-01-01", recent, "Firm LLP")],
                        today=TODAY, stale_after_days=90)
    assert versions["a"].stale == f"The report's period ended {recent}, over 90 days ago."


def test_reports_of_two_products_are_two_series():
    versions = timeline([
        soc3("a", "lms-2024.pdf", "2023-07-01", "2024-06-30", "Firm LLP",
             scope="the Example Learning Management System"),
        soc3("b", "lms-2025.pdf", "2024-07-01", "2025-06-30", "Firm LLP",
             scope="the Example Learning Management System"),
        soc3("c", "grades-2025.pdf", "2024-07-01", "2025-06-30", "Firm LLP",
             scope="the Gradebook Analytics Platform"),
    ], today=TODAY)
    assert versions["a"].series == versions["b"].series != versions["c"].series
    assert versions["b"].current and versions["c"].current and not versions["a"].current


def test_a_reissued_certificate_supersedes_the_old_one_and_expiry_makes_it_stale():
    versions = timeline([
        doc("old", "ISO_27001_Certificate_2022.pdf", kind="certificate",
            family="ISO/IEC 27001", as_of="2022-11-25", valid_until="2025-10-31"),
        doc("new", "iso-cert.pdf", kind="certificate", family="ISO/IEC 27001",
            as_of="2024-05-16", valid_until="2026-10-31"),
    ], today=TODAY)
    assert versions["new"].current and not versions["old"].current
    assert versions["new"].stale == "The certificate expired on 2026-10-31."


def test_policies_are_series_by_what_their_title_names():
    versions = timeline([
        doc("p1", "access_v3.md", kind="policy", title="Example — Access Control Policy",
            reviewed_on="2023-08-01", version="3.0"),
        doc("p2", "access-control.md", kind="policy", title="Example — Access Control Policy",
            reviewed_on="2025-06-18", version="4.0"),
        # A title that names only the owner says nothing of what the document is: two such
        # policies are told apart by their file names.
        doc("p3", "incident_plan.txt", kind="policy", title="EXAMPLE INC.",
            reviewed_on="2023-09-01"),
        doc("p4", "backup_plan.txt", kind="policy", title="EXAMPLE INC.",
            reviewed_on="2024-09-01"),
    ], today=TODAY)
    assert versions["p1"].series == versions["p2"].series
    assert versions["p2"].current and not versions["p1"].current
    assert versions["p3"].series != versions["p4"].series
    assert versions["p3"].current and versions["p4"].current


def test_key_ceremonies_are_events_never_versions_of_each_other():
    versions = timeline([
        doc("k1", "ceremony-a.pdf", kind="report", family="key ceremony", as_of="2024-09-03"),
        doc("k2", "ceremony-b.pdf", kind="report", family="key ceremony", as_of="2025-09-03"),
    ], today=TODAY)
    assert versions["k1"].current and versions["k2"].current


def test_a_document_without_a_stated_date_is_dated_by_when_it_was_received():
    versions = timeline([
        doc("x", "notes.md", received="2026-02-01T09:00:00+00:00", kind="other",
            title="Example — Key configuration evidence"),
    ], today=TODAY)
    assert (versions["x"].date, versions["x"].date_basis, versions["x"].date_stated) == (
        "2026-02-01", "received_at", False)


def test_a_file_sent_again_keeps_its_earlier_version_in_its_series():
    versions = timeline([
        doc("k", "policy.md", received="2026-03-01T00:00:00+00:00", kind="policy",
            title="Example — Encryption Policy", reviewed_on="2026-02-20"),
        doc("k-old", "policy.md", received="2026-01-01T00:00:00+00:00", archived_of="k",
            kind="policy", title="Example — Encryption Standard", reviewed_on="2025-12-01"),
    ], today=TODAY)
    # The earlier version's title differs, but it is the same file: one series.
    assert versions["k-old"].series == versions["k"].series
    assert versions["k"].current and versions["k-old"].superseded_by.source == "policy.md"


def test_a_reviewers_correction_moves_and_dates_a_document():
    documents = [
        soc3("a", "report-2024.pdf", "2023-09-01", "2024-08-31", "Firm LLP"),
        doc("b", "summary-2025.pdf", kind="report", title="Assurance summary"),
    ]
    before = timeline(documents, today=TODAY)
    assert before["b"].series != before["a"].series
    corrections = {"b": SeriesCorrection("b", "summary-2025.pdf", series=before["a"].series,
                                         dated="2025-08-31")}
    after = timeline(documents, corrections, today=TODAY)
    assert after["b"].series == after["a"].series
    assert after["b"].current and after["b"].date_basis == "corrected"
    assert after["a"].superseded_by.source == "summary-2025.pdf"
    assert after["b"].corrected == {"series": before["a"].series, "dated": "2025-08-31"}


def test_a_version_that_states_no_date_stands_after_those_received_before_it():
    versions = timeline([  # one file sent four times: v4 is it now, v1 to v3 its archives
        # The first version sent had a placeholder for its date ("X Y, 2023"), so states none.
        doc("v1", "cp.md", received="2026-01-01T00:00:00+00:00", archived_of="v4",
            kind="policy", title="CP"),
        doc("v2", "cp.md", received="2026-01-02T00:00:00+00:00", archived_of="v4",
            kind="policy", title="CP", reviewed_on="2023-05-16"),
        doc("v3", "cp.md", received="2026-01-03T00:00:00+00:00", archived_of="v4",
            kind="policy", title="CP", reviewed_on="2024-02-06"),
        # Sent last, undated: the vendor's newest, after every dated version before it.
        doc("v4", "cp.md", received="2026-01-04T00:00:00+00:00", kind="policy", title="CP"),
    ], today=TODAY)
    order = sorted(versions.values(), key=lambda v: v.earlier_versions)
    assert [v.doc_key for v in order] == ["v1", "v2", "v3", "v4"]
    assert versions["v4"].current and versions["v1"].superseded_by.source == "cp.md"
    assert (versions["v1"].date_stated, versions["v1"].date) == (False, "2026-01-01")


def test_documents_that_state_no_date_nor_version_are_no_versions_of_each_other():
    # Thirty pages of one package, one title, numbered names: nothing says which came first.
    versions = timeline([doc(f"p{i}", f"patching_{i:02d}.md", kind="other",
                             title="Patching of build systems") for i in range(3)],
                        today=TODAY)
    assert all(v.current for v in versions.values())
    assert len({v.series for v in versions.values()}) == 3
