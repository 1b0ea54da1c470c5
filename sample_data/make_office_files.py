"""Regenerate the sample Word document and spreadsheet round (python-docx, openpyxl).

    .venv/bin/python sample_data/make_office_files.py

- vendors/northwind/documents/security_awareness_programme.docx: a policy with numbered
  headings, a list and a table, as vendors send them.
- vendors/northwind/questionnaires/round_4.xlsx: follow-up round 4 as a vendor returns it,
  on a sheet "Answers" with the columns criterion, question and answer. Its first criterion
  was pasted from a word processor: "multi‑factor" carries a non-breaking hyphen (U+2011),
  so it is a typographic variant of the criteria line, and must link all the same. The
  workbook's creation time (2024-02-05) is the round's timestamp when the sample is ingested
  (`evidence ingest sample`); `evidence ingest questionnaire` takes it from --timestamp.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from docx import Document
from docx.shared import Pt
from openpyxl import Workbook
from openpyxl.styles import Alignment, Font

HERE = Path(__file__).resolve().parent
NORTHWIND = HERE / "vendors" / "northwind"
SAVED = datetime(2024, 2, 5, 9, 15, 0)


def security_awareness_docx(path: Path) -> None:
    doc = Document()
    doc.core_properties.author = "Northwind Analytics Ltd. Information Security"
    doc.core_properties.title = "Security Awareness Programme"
    doc.core_properties.created = doc.core_properties.modified = SAVED
    doc.styles["Normal"].font.size = Pt(11)
    doc.add_heading("Security Awareness Programme", level=0)
    doc.add_paragraph("Document owner: Head of Information Security. Version 3.1, approved "
                      "2023-12-04. Classification: shared with customers under NDA.")

    doc.add_heading("1. Scope", level=1)
    doc.add_paragraph(
        "This programme applies to every Northwind Analytics employee, to contractors with "
        "access to Northwind systems, and to interns. Nobody is granted access to customer "
        "data before completing the induction module.")

    doc.add_heading("2. Training requirements", level=1)
    doc.add_heading("2.1 Induction", level=2)
    doc.add_paragraph(
        "New joiners complete the induction module within their first five working days. "
        "Accounts that have not completed it by day ten are suspended until they do.")
    doc.add_heading("2.2 Annual refresher", level=2)
    doc.add_paragraph(
        "All employees and contractors complete the annual refresher every calendar year. "
        "The module covers phishing, data handling, password and MFA hygiene, reporting "
        "incidents, and clean-desk rules. Completion is tracked in the learning platform and "
        "reported to the Security Steering Group each quarter.")
    doc.add_paragraph("Modules and audiences:")
    table = doc.add_table(rows=1, cols=4)
    table.style = "Table Grid"
    for cell, text in zip(table.rows[0].cells,
                          ("Module", "Audience", "Frequency", "Completion in 2023"), strict=True):
        cell.text = text
    for row in (
        ("Security induction", "All new joiners", "Once, within 5 working days", "100%"),
        ("Annual security refresher", "All employees and contractors", "Every year", "98.6%"),
        ("Secure development", "Engineers", "Every year", "100%"),
        ("Privileged access handling", "Administrators", "Every six months", "100%"),
    ):
        cells = table.add_row().cells
        for cell, text in zip(cells, row, strict=True):
            cell.text = text

    doc.add_heading("3. Phishing simulations", level=1)
    for line in (
        "A simulated phishing campaign runs every quarter for all staff.",
        "Anyone who submits credentials twice in a year repeats the refresher within 14 days.",
        "Click and report rates are published to the whole company after each campaign.",
    ):
        doc.add_paragraph(line, style="List Bullet")

    doc.add_heading("4. Records and exceptions", level=1)
    doc.add_paragraph(
        "Completion records are kept for three years. Exceptions (long-term leave, for "
        "example) are approved by the Head of Information Security and expire after 90 days.")
    doc.save(path)


ROUND_4 = [
    ("Does the vendor enforce multi\u2011factor authentication for all administrative access?",
     "Are any administrative accounts exempt from MFA?",
     "Yes: two break-glass Global Administrator accounts are excluded from the Conditional "
     "Access MFA policy so that we can recover if Entra ID MFA fails. They use 64-character "
     "passwords kept in a safe, and every sign-in raises a high-severity alert."),
    ("Does the vendor require security awareness training for all employees at least "
     "annually?",
     "Do contractors complete the same annual training as employees?",
     "Yes. Contractors with access to Northwind systems complete the same annual refresher; "
     "completion was 98.6% in 2023 (Security Awareness Programme, section 2.2)."),
    ("Does the vendor assess the security of its subprocessors before onboarding and "
     "annually thereafter?",
     "How do you assess a subprocessor\u2019s security before onboarding?",
     "Before a contract is signed we review the subprocessor's SOC 2 Type II report or ISO "
     "27001 certificate and our own security questionnaire; the review is repeated every "
     "year and on any material change of service."),
    (None, "Who is your security contact?",
     "security@northwind.example, monitored around the clock."),
]


def round_4_xlsx(path: Path) -> None:
    book = Workbook()
    sheet = book.active
    sheet.title = "Answers"
    sheet.append(["Criterion", "Question", "Answer"])
    for criterion, question, answer in ROUND_4:
        sheet.append([criterion, question, answer])
    for cell in sheet[1]:
        cell.font = Font(bold=True)
    for column, width in zip("ABC", (60, 50, 90), strict=True):
        sheet.column_dimensions[column].width = width
    for row in sheet.iter_rows(min_row=2):
        for cell in row:
            cell.alignment = Alignment(wrap_text=True, vertical="top")
    sheet.freeze_panes = "A2"
    book.properties.creator = "Northwind Analytics Ltd."
    book.properties.created = book.properties.modified = SAVED
    book.save(path)


if __name__ == "__main__":
    security_awareness_docx(NORTHWIND / "documents" / "security_awareness_programme.docx")
    round_4_xlsx(NORTHWIND / "questionnaires" / "round_4.xlsx")
    print("wrote security_awareness_programme.docx and round_4.xlsx")
