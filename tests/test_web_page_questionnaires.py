"""Questionnaires published as web pages (core/ingest/rounds/web_pages.py): a Markdown or HTML
page holding answers keyed by question ids is a round, in either layout vendors publish
(a table with an id column; a block per question), for `ingest questionnaire` (with --vendor
and --round) and for `ingest package`; a page without such answers stays a document.

The pages are built from the layout facts of real published pages (a CAIQ-Lite table with
bold ids and a control-ownership column; a HECVAT answered as "**GNRL-01** — question" blocks
with "**Answer:**" and "**Notes:**" lines, two trailing spaces breaking the line; a CAIQ
answered under "CAIQ ID: **...**" with the question quoted), never their content."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.ingest.rounds.web_pages import page_text, read_page_questionnaire
from core.workbench import Workbench
from tests.fakes import point_the_command_at
from tests.support.cli import error_message, run_json

TABLE_PAGE = """---
title: Security Assessment Questionnaire
---

# Example Cloud - Consensus Assessment Initiative Questionnaire

Our answers to the CAIQ Lite v4.0.3.

## Responses

| Domain | Question ID | Question | Answer | Control Ownership |
|---|---|---|---|---|
| Audit | **A&A-02.1** | Are independent audits conducted at least annually? | No | CSP-owned |
| Crypto | **CEK-03.1** | Is data encrypted at rest and in transit? | Yes | Shared CSP and CSC |
| IAM | **IAM-14.1** | Is multi-factor authentication required for admins? | Yes | CSP-owned |
| Logging | **LOG-08.1** | Are audit logs retained for at least a year? | \\| Yes, 400 days | CSP |
"""

BLOCK_PAGE = """# CAIQ Lite v4.0.3 - Example Cloud

## Audit & Assurance

CAIQ ID: **A&A-02.1**

> Are independent audits conducted at least annually?

Yes. Our SOC 2 Type II and ISO 27001:2022 audits run every year.

## Cryptography

CAIQ ID: **CEK-03.1**

> Is data encrypted at rest and in transit?

Yes, AES-256 at rest and TLS 1.2 or later in transit.

## Identity & Access

CAIQ ID: **IAM-14.1**

> Is multi-factor authentication required for admins?

Yes.
"""

HECVAT_PAGE = """# HECVAT 4.1.6 (Core) - Example Dashboard

## General Information

**GNRL-01** — Solution Provider Name

**Answer:** Example Foundation

## Documentation

**DOCU-01** — Do you have a business continuity plan that is tested annually?

**Answer:** No  \n**Notes:** The plan exists but is not tested every year.

**DOCU-02** — Do you have a disaster recovery plan?

**Answer:** Yes
"""

HTML_PAGE = """<html><head><title>Security questionnaire</title></head><body>
<h1>CAIQ Lite answers</h1>
<table>
<tr><th>Question ID</th><th>Question</th><th>Answer</th><th>Notes</th></tr>
<tr><td><b>A&amp;A-02.1</b></td><td>Are independent audits conducted?</td><td>Yes</td>
<td>Yearly.</td></tr>
<tr><td>CEK-03.1</td><td>Is data encrypted at rest?</td><td>Yes</td><td></td></tr>
<tr><td>IAM-14.1</td><td>Is MFA required for admins?</td><td>Yes</td><td>Hardware keys.</td></tr>
</table></body></html>
"""


def answers_of(name: str, text: str) -> list[tuple[str, str, str]]:
    found = read_page_questionnaire(name, text)
    assert found.read is not None, found.reason
    return [(a.questionnaire_id, a.question, a.answer) for a in found.read.answers]


def test_a_table_with_an_id_column_is_read_by_its_columns():
    found = read_page_questionnaire("caiq.md", TABLE_PAGE)
    assert found.read.name == "CAIQ-Lite 4.0.3 web page (Markdown, a table)"
    assert [(a.questionnaire_id, a.answer) for a in found.read.answers] == [
        ("A&A-02.1", "No"), ("CEK-03.1", "Yes"), ("IAM-14.1", "Yes"),
        ("LOG-08.1", "| Yes, 400 days")]
    first = found.read.answers[0]
    assert first.question == "Are independent audits conducted at least annually?"
    # Read by the CAIQ's own layout (its header names "Question ID" and "Question"), which
    # keeps the control ownership beside each answer.
    assert first.extras == {"control ownership": "CSP-owned", "section": "Responses"}


def test_a_block_per_question_is_read_with_its_quoted_question():
    assert answers_of("caiq.md", BLOCK_PAGE) == [
        ("A&A-02.1", "Are independent audits conducted at least annually?",
         "Yes. Our SOC 2 Type II and ISO 27001:2022 audits run every year."),
        ("CEK-03.1", "Is data encrypted at rest and in transit?",
         "Yes, AES-256 at rest and TLS 1.2 or later in transit."),
        ("IAM-14.1", "Is multi-factor authentication required for admins?", "Yes."),
    ]


def test_an_answer_and_its_notes_on_two_lines_of_one_paragraph_are_both_read():
    assert answers_of("hecvat.md", HECVAT_PAGE) == [
        ("GNRL-01", "Solution Provider Name", "Example Foundation"),
        ("DOCU-01", "Do you have a business continuity plan that is tested annually?",
         "No. The plan exists but is not tested every year."),
        ("DOCU-02", "Do you have a disaster recovery plan?", "Yes"),
    ]


def test_an_html_page_is_read_as_its_markdown():
    found = read_page_questionnaire("caiq.html",
                                    page_text(Path("caiq.html"), HTML_PAGE.encode()))
    assert found.read.name == "CAIQ web page (HTML, a table)"
    assert [(a.questionnaire_id, a.answer) for a in found.read.answers] == [
        ("A&A-02.1", "Yes. Yearly."), ("CEK-03.1", "Yes"), ("IAM-14.1", "Yes. Hardware keys.")]


def test_a_policy_is_no_questionnaire():
    policy = "# Access Control Policy\n\nVersion 2.0\n\n## Purpose\n\nAccess is reviewed.\n"
    found = read_page_questionnaire("policy.md", policy)
    assert (found.read, found.looks_like) == (None, False)


@pytest.fixture
def cli(workbench: Workbench, monkeypatch) -> Workbench:
    point_the_command_at(workbench, monkeypatch)
    return workbench


def test_two_versions_in_two_layouts_link_by_id_and_the_second_is_current(cli, capsys,
                                                                          tmp_path):
    first, second = tmp_path / "caiq-2024.md", tmp_path / "caiq.md"
    first.write_text(TABLE_PAGE, encoding="utf-8")
    second.write_text(BLOCK_PAGE, encoding="utf-8")
    for number, page in ((1, first), (2, second)):
        code, lines, err = run_json(capsys, "ingest", "questionnaire", page, "--vendor", "acme",
                                    "--round", number, "--timestamp", f"2025-0{number}-01")
        assert code == 0, err
        assert lines[-1]["indexed_count"] == (4 if number == 1 else 3)
    trace = cli.retrieve("acme", "Does the vendor have independent audits every year?",
                         "precedence")
    old = [c for c in trace.evidence if c.metadata.get("questionnaire_id") == "A&A-02.1"
           and c.round_number == 1]
    for excerpt in old:  # round 1's "No" is an earlier answer, round 2's "Yes" just ahead
        assert excerpt.later_answer is not None and excerpt.later_answer.round_number == 2
        ahead = trace.evidence[trace.evidence.index(excerpt) - 1]
        assert ahead.round_number == 2 and ahead.text.endswith("run every year.")
    assert old, "round 1's answer to A&A-02.1 is among the excerpts"


def test_a_dry_run_shows_the_page_as_a_round_and_writes_nothing(cli, capsys, tmp_path):
    page = tmp_path / "hecvat.md"
    page.write_text(HECVAT_PAGE, encoding="utf-8")
    code, [line], err = run_json(capsys, "ingest", "questionnaire", page, "--vendor", "acme",
                                 "--round", "1", "--dry-run")
    assert code == 0, err
    assert line["became"] == "round"
    assert line["layout"] == "HECVAT 4.1.6 web page (Markdown, a block per question)"
    assert [a["id"] for a in line["preview"]] == ["GNRL-01", "DOCU-01", "DOCU-02"]
    assert cli.vendor_ids() == []


def test_a_page_without_answers_by_id_is_refused_as_a_round_in_one_sentence(cli, capsys,
                                                                             tmp_path):
    page = tmp_path / "policy.md"
    page.write_text("# Access Control Policy\n\nAccess is reviewed quarterly.\n",
                    encoding="utf-8")
    code, _, err = run_json(capsys, "ingest", "questionnaire", page, "--vendor", "acme",
                            "--round", "1")
    assert code == 2
    assert error_message(err) == (
        f"{page} holds no questionnaire answers keyed by question ids (no question ids with "
        "answers); ingest it as a document with `evidence ingest docs`.")
    assert cli.vendor_ids() == []


def test_a_page_needs_a_vendor_and_a_round_and_the_sentence_says_what_it_is(cli, capsys,
                                                                             tmp_path):
    page = tmp_path / "caiq.md"
    page.write_text(TABLE_PAGE, encoding="utf-8")
    code, _, err = run_json(capsys, "ingest", "questionnaire", page)
    assert code == 2
    assert error_message(err) == (
        f"{page} is a questionnaire published as a web page; give --vendor and --round for "
        "it (and --timestamp for when it was answered, default now).")


def test_in_a_package_a_questionnaire_page_is_a_round_and_a_policy_page_a_document(
        cli, capsys, tmp_path):
    folder = tmp_path / "package"
    folder.mkdir()
    (folder / "caiq.md").write_text(TABLE_PAGE, encoding="utf-8")
    (folder / "answers.html").write_text(HTML_PAGE, encoding="utf-8")
    (folder / "access-policy.md").write_text(
        "# Access Control Policy\n\nVersion 3.1. Effective date: 2025-02-01.\n\n"
        "Access is reviewed quarterly.\n", encoding="utf-8")
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", folder)
    assert code == 0, err
    became = {line["file"]: (line["became"], line["layout"]) for line in lines}
    assert became == {
        "access-policy.md": ("document", "policy"),
        "answers.html": ("round", "CAIQ web page (HTML, a table)"),
        "caiq.md": ("round", "CAIQ-Lite 4.0.3 web page (Markdown, a table)"),
    }
    [policy] = [line for line in lines if line["file"] == "access-policy.md"]
    assert policy["reason"] == "a policy document (reviewed 2025-02-01): 1 chunk."
