"""The newest evidence across documents, end to end on a real store: `evidence documents`
lists every version with its series and standing, a reviewer's corrections are kept, every
retrieval marks superseded excerpts (`later_version`) and the project's own contexts bring
the current version in ahead of them, labelled; the seeds' contexts stay as they were."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.workbench import Workbench
from tests.fakes import point_the_command_at
from tests.support.cli import error_message, run_json, run_main
from tests.support.snapshot import assert_unchanged, store_snapshot

VENDOR = "acme"
CRITERION = "Does the vendor have a current SOC 2 Type II report on encryption at rest?"
REPORT = """# SOC 2 Type II Report

Report on Acme's Vault Storage System, relevant to security.

For the period {start} to {end}.

In our opinion, in all material respects, the controls over encryption at rest (AES-256) and
the SOC 2 Type II criteria operated effectively throughout the period {start} to {end}.

{firm}
"""
TODAY = datetime.now(UTC).date()
OLD_START = (TODAY - timedelta(days=1165)).isoformat()
OLD_END = (TODAY - timedelta(days=800)).isoformat()
NEW_START = (TODAY - timedelta(days=799)).isoformat()
NEW_END = (TODAY - timedelta(days=435)).isoformat()


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def vendor(workbench: Workbench, tmp_path: Path, monkeypatch) -> Workbench:
    """Two years of one report, the second under a new firm's file name, and a policy."""
    point_the_command_at(workbench, monkeypatch)
    docs = tmp_path / "docs"
    write(docs, "acme-soc2-report-2023.md", REPORT.format(
        start=OLD_START, end=OLD_END, firm="Old Firm LLP"))
    write(docs, "ACME-SOC2-FY25.md", REPORT.format(
        start=NEW_START, end=NEW_END, firm="New Firm LLP"))
    write(docs, "access.md", "# Acme — Access Control Policy\n\nVersion 2.0\n\n"
                             "Date of Last Review: June 18, 2025\n\nAccess is reviewed.\n")
    workbench.ingest_documents(VENDOR, [docs])
    return workbench


def test_documents_lists_every_version_with_the_contracts_keys(vendor, capsys):
    code, lines, err = run_json(capsys, "documents", "--vendor", VENDOR)
    assert code == 0, err
    by_source = {line["source"]: line for line in lines}
    assert set(by_source) == {"acme-soc2-report-2023.md", "ACME-SOC2-FY25.md", "access.md"}
    for line in lines:
        assert {"source", "kind", "title", "series", "issuer", "period_start", "period_end",
                "as_of", "valid_until", "version", "reviewed_on", "opinion", "matters",
                "date_stated", "received_at", "current", "superseded_by", "stale"} <= set(line)
    old, new = by_source["acme-soc2-report-2023.md"], by_source["ACME-SOC2-FY25.md"]
    assert old["series"] == new["series"] and old["kind"] == "report"
    assert (new["current"], old["current"]) == (True, False)
    assert old["superseded_by"]["source"] == "ACME-SOC2-FY25.md"
    assert old["superseded_by"]["date"] == NEW_END
    assert (new["period_start"], new["period_end"], new["issuer"], new["opinion"]) == (
        NEW_START, NEW_END, "New Firm LLP", "unmodified")
    assert new["stale"] == f"The report's period ended {NEW_END}, over a year ago."
    assert by_source["access.md"]["reviewed_on"] == "2025-06-18"
    assert by_source["access.md"]["version"] == "2.0"


def test_documents_as_text_groups_each_series_current_first(vendor, capsys):
    code, out, err = run_main(capsys, "documents", "--vendor", VENDOR, "--format", "text")
    assert code == 0, err
    lines = out.splitlines()
    report = next(i for i, line in enumerate(lines) if line.startswith("Series report/"))
    assert lines[report].endswith("(2 versions)")
    assert lines[report + 1].startswith("  current ACME-SOC2-FY25.md")
    assert "STALE: The report's period ended" in lines[report + 1]
    assert lines[report + 2].startswith("  earlier acme-soc2-report-2023.md")
    assert f"SUPERSEDED report for the period {OLD_START}" in lines[report + 2]


def test_a_reviewers_correction_is_kept_and_undone(vendor, capsys):
    code, lines, err = run_json(capsys, "documents", "--vendor", VENDOR, "--series",
                                "ACME-SOC2-FY25.md=a separate report", "--reviewer", "dana")
    assert code == 0, err
    assert "ACME-SOC2-FY25.md is now in series a separate report" in err
    by_source = {line["source"]: line for line in lines}
    assert by_source["ACME-SOC2-FY25.md"]["corrected"] == {"series": "a separate report"}
    assert by_source["acme-soc2-report-2023.md"]["current"] is True  # alone in its series now
    # A new store reader sees the correction: it is kept in the store.
    assert Workbench(vendor.settings, embedder=vendor.embedder).catalog.document_versions(
        VENDOR)[0].series in ("a separate report", by_source["access.md"]["series"],
                              by_source["acme-soc2-report-2023.md"]["series"])
    code, lines, err = run_json(capsys, "documents", "--vendor", VENDOR, "--dated",
                                "acme-soc2-report-2023.md=2020-01-31")
    assert code == 0, err
    dated = {line["source"]: line for line in lines}["acme-soc2-report-2023.md"]
    assert (dated["date"], dated["date_basis"]) == ("2020-01-31", "corrected")
    code, lines, err = run_json(capsys, "documents", "--vendor", VENDOR, "--reset",
                                "ACME-SOC2-FY25.md")
    assert code == 0, err
    by_source = {line["source"]: line for line in lines}
    assert by_source["ACME-SOC2-FY25.md"]["corrected"] == {}
    assert by_source["acme-soc2-report-2023.md"]["current"] is False


@pytest.mark.parametrize("argv, message", [
    (["--series", "nothing.pdf=x"], "Vendor 'acme' holds no document named 'nothing.pdf'; "
                                    "`evidence documents --vendor acme` lists them."),
    (["--series", "access.md"], "--series takes DOCUMENT=VALUE (a file name as `evidence "
                                "documents` lists it, then =), not 'access.md'."),
    (["--dated", "access.md=31/01/2025"], "'31/01/2025' is not a date as YYYY-MM-DD."),
    (["--series", "access.md=x", "--dated", "ACME-SOC2-FY25.md=2025-01-01"],
     "--series and --dated name two documents; correct one document at a time."),
    (["--reset", "access.md", "--series", "access.md=x"],
     "--reset undoes a document's corrections; give it alone, without --series or --dated."),
])
def test_a_bad_correction_is_one_sentence_and_writes_nothing(vendor, capsys, argv, message):
    before = store_snapshot(vendor)
    code, _, err = run_main(capsys, "documents", "--vendor", VENDOR, *argv)
    assert code == 2
    assert error_message(err) == message
    assert_unchanged(before, store_snapshot(vendor))


def test_every_trace_marks_superseded_excerpts_and_the_seeds_contexts_do_not_change(vendor):
    for strategy in ("semantic", "hash_extraction", "doc_boost", "tiered"):
        trace = vendor.retrieve(VENDOR, CRITERION, strategy)
        for excerpt in trace.evidence:
            assert excerpt.document is not None
            superseded = excerpt.source == "acme-soc2-report-2023.md"
            assert (excerpt.later_version is not None) is superseded
            if superseded:
                assert excerpt.later_version.model_dump() == {"source": "ACME-SOC2-FY25.md",
                                                              "date": NEW_END}
        assert "SUPERSEDED" not in trace.context and "SUPERSEDED" not in trace.prompt


@pytest.mark.parametrize("strategy", ["precedence", "hybrid"])
def test_the_projects_context_brings_the_current_version_ahead_and_labels_both(vendor,
                                                                              strategy):
    trace = vendor.retrieve(VENDOR, CRITERION, strategy)
    sources = [c.source for c in trace.evidence]
    assert "acme-soc2-report-2023.md" in sources
    old = sources.index("acme-soc2-report-2023.md")
    assert "ACME-SOC2-FY25.md" in sources[:old]  # the current version stands ahead of it
    section = "\u00a7 SOC 2 Type II Report"
    assert (f"acme-soc2-report-2023.md {section}: SUPERSEDED report for the period "
            f"{OLD_START} to {OLD_END}; the current version is ACME-SOC2-FY25.md ({NEW_END})"
            ) in trace.context
    assert (f"ACME-SOC2-FY25.md {section}: CURRENT VERSION, report for the period "
            f"{NEW_START} to {NEW_END}; STALE: The report's period ended {NEW_END}, over a "
            "year ago") in trace.context
    assert "An excerpt labelled SUPERSEDED comes" in trace.prompt
    assert f"[Document {old + 1}: acme-soc2-report-2023.md {section}: SUPERSEDED" in trace.prompt


def test_a_superseded_excerpt_alone_brings_in_the_current_versions_best_excerpt(
        workbench, tmp_path):
    """The current version no search ranked (its text far from the question) is read and
    brought in ahead of the superseded excerpt, and says why it is there."""
    docs = tmp_path / "docs"
    write(docs, "report-2023.md", REPORT.format(start=OLD_START, end=OLD_END,
                                                firm="Old Firm LLP"))
    write(docs, "report-2024.md", "# SOC 2 Type II Report\n\nReport on Acme's Vault Storage "
                                  f"System. For the period {NEW_START} to {NEW_END}.\n\n"
                                  "Quarterly badge audits.\n")
    workbench.ingest_documents(VENDOR, [docs])
    trace = workbench.retrieve(VENDOR, "encryption at rest AES-256 controls operated", "precedence")
    sources = [c.source for c in trace.evidence]
    old = sources.index("report-2023.md")
    current = sources.index("report-2024.md")
    assert current == old - 1
    assert trace.evidence[current].brought_in == trace.evidence[old].id
    # A newer year's report arrives: the same process now brings that one in, not the
    # version it read the last time.
    newest_start = (TODAY - timedelta(days=434)).isoformat()
    newest_end = (TODAY - timedelta(days=70)).isoformat()
    write(tmp_path / "later", "report-2025.md",
          "# SOC 2 Type II Report\n\nReport on Acme's Vault Storage System. For the period "
          f"{newest_start} to {newest_end}.\n\nVisitor logs are kept.\n")
    workbench.ingest_documents(VENDOR, [tmp_path / "later"])
    trace = workbench.retrieve(VENDOR, "encryption at rest AES-256 controls operated", "precedence")
    sources = [c.source for c in trace.evidence]
    assert "report-2025.md" in sources
    newest = sources.index("report-2025.md")
    assert trace.evidence[newest].brought_in is not None
    assert "Visitor logs" in trace.evidence[newest].text


def test_a_file_sent_again_keeps_its_earlier_version_readable_as_superseded(workbench,
                                                                          tmp_path):
    path = write(tmp_path / "v1", "encryption.md",
                 "# Acme — Encryption Policy\n\nVersion 1.0\n\nDate of Last Review: "
                 "March 1, 2024\n\nArchives use AES-128.\n")
    workbench.ingest_documents(VENDOR, [path])
    path = write(tmp_path / "v2", "encryption.md",
                 "# Acme — Encryption Policy\n\nVersion 2.0\n\nDate of Last Review: "
                 "March 1, 2025\n\nEverything uses AES-256.\n")
    [outcome] = workbench.ingest_documents(VENDOR, [path]).documents
    assert (outcome.status, outcome.earlier_version_kept) == ("replaced", True)
    new, old = workbench.catalog.document_versions(VENDOR)
    assert (new.version, new.current, old.version, old.current) == ("2.0", True, "1.0", False)
    assert old.superseded_by.source == "encryption.md"
    trace = workbench.retrieve(VENDOR, "Do archives use AES-128?", "precedence")
    assert any("AES-128" in c.text and c.later_version is not None for c in trace.evidence)
    [status] = workbench.status(VENDOR)
    assert (status.documents, status.earlier_versions) == (1, 1)
    # Sent back as it was, the file's first version is its current one again, and not also
    # an earlier version of itself.
    path = write(tmp_path / "v3", "encryption.md", (tmp_path / "v1" / "encryption.md").read_text())
    workbench.ingest_documents(VENDOR, [path])
    versions = workbench.catalog.document_versions(VENDOR)
    assert [(v.version, v.current) for v in versions] == [("2.0", True), ("1.0", False)]
