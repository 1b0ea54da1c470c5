"""Workbooks laid out as the standard questionnaires vendors send (CAIQ, HECVAT, SIG export,
statement of applicability), built with openpyxl: the same sheet names, title rows, header
texts, merged cells, hidden sheets and formulas with stored values as the real files, with
questions and answers of our own.

openpyxl writes a formula without the value a spreadsheet program stores beside it, so
`with_stored_values` puts those values into the saved file, as Excel leaves them."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

import openpyxl
from openpyxl.worksheet.datavalidation import DataValidation


@dataclass(frozen=True)
class Item:
    """One question of a questionnaire and the vendor's answer to it."""

    id: str
    question: str
    answer: str = ""
    explanation: str = ""


def saved(workbook: openpyxl.Workbook) -> bytes:
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def with_stored_values(data: bytes, values: Mapping[tuple[str, str], str]) -> bytes:
    """The workbook `data` with a stored (cached) text value for each formula cell named in
    `values` ((sheet title, cell) -> text), as a spreadsheet program saves it."""
    source = zipfile.ZipFile(io.BytesIO(data))
    book = source.read("xl/workbook.xml").decode()
    rels = source.read("xl/_rels/workbook.xml.rels").decode()
    targets = dict(re.findall(r'Id="(rId\d+)"[^>]*Target="/?(?:xl/)?([^"]+)"', rels))
    targets.update({rid: target for target, rid in
                    re.findall(r'Target="/?(?:xl/)?([^"]+)"[^>]*Id="(rId\d+)"', rels)})
    sheet_files = {name: "xl/" + targets[rid] for name, rid in
                   re.findall(r'<sheet [^>]*name="([^"]+)"[^>]*r:id="(rId\d+)"', book)}
    by_file: dict[str, dict[str, str]] = {}
    for (sheet, cell), text in values.items():
        by_file.setdefault(sheet_files[escape(sheet, {'"': "&quot;"})], {})[cell] = text
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for member in source.infolist():
            content = source.read(member.filename)
            cells = by_file.get(member.filename)
            if cells:
                xml = content.decode()
                for cell, text in cells.items():
                    pattern = re.compile(rf'<c r="{cell}"([^>]*)><f>(.*?)</f><v\s*/?>(?:</v>)?</c>')
                    found = pattern.search(xml)
                    if not found:
                        raise AssertionError(f"no formula cell {cell} in {member.filename}")
                    xml = (xml[:found.start()]
                           + f'<c r="{cell}"{_string_type(found.group(1))}><f>{found.group(2)}'
                           f'</f><v>{escape(text)}</v></c>' + xml[found.end():])
                content = xml.encode()
            target.writestr(member, content)
    return out.getvalue()


def _string_type(attributes: str) -> str:
    attributes = re.sub(r'\s+t="[^"]*"', "", attributes)
    return f'{attributes} t="str"'


# CAIQ v4.0.x -------------------------------------------------------------------------------

CAIQ_HEADERS = ("Question ID", "Question", "CSP CAIQ Answer", "SSRM Control Ownership",
                "CSP Implementation Description (Optional/Recommended)",
                "CSC Responsibilities  (Optional/Recommended)", "", "", "CCM Control ID",
                "CCM Control Specification", "CCM Control Title", "CCM Domain Title")


def caiq_v4(items: Sequence[Item], *, version: str = "4.0.3",
            owners: Mapping[str, str] | None = None) -> bytes:
    """A filled CAIQ v4.0.x: sheets Introduction and CAIQv4.0.x; row 1 the title (B1:D1
    merged), row 2 the header, one row per question from row 3, the CCM columns merged down
    each control's questions and the domain title down the domain's, then "End of
    Standard" and the copyright line, each merged A:D."""
    workbook = openpyxl.Workbook()
    intro = workbook.active
    intro.title = "Introduction"
    intro["A1"] = f"v{version}"
    intro["B1"] = f"CONSENSUS ASSESSMENTS INITIATIVE QUESTIONNAIRE v{version}"
    intro.merge_cells("B1:D1")
    intro["A2"] = "Introduction"
    intro["A3"] = "The questionnaire's questions are answered by the cloud service provider."
    intro.merge_cells("A3:D3")
    sheet = workbook.create_sheet(f"CAIQv{version}")
    sheet["A1"] = f"v{version}"
    sheet["B1"] = f"CONSENSUS ASSESSMENTS INITIATIVE QUESTIONNAIRE v{version}"
    sheet.merge_cells("B1:D1")
    for column, header in enumerate(CAIQ_HEADERS, start=1):
        sheet.cell(row=2, column=column, value=header)
    sheet.freeze_panes = "E3"
    answers = DataValidation(type="list", formula1='"Yes,No,NA"', allow_blank=True)
    sheet.add_data_validation(answers)
    row = 3
    controls: dict[str, list[int]] = {}
    domains: dict[str, list[int]] = {}
    for item in items:
        control = item.id.rsplit(".", 1)[0]
        domain = control.split("-")[0]
        sheet.cell(row=row, column=1, value=item.id)
        sheet.cell(row=row, column=2, value=item.question + "\n")
        if item.answer:
            sheet.cell(row=row, column=3, value=item.answer)
            sheet.cell(row=row, column=4, value=(owners or {}).get(item.id, "CSP-owned"))
        if item.explanation:
            sheet.cell(row=row, column=5, value=item.explanation)
        answers.add(f"C{row}")
        controls.setdefault(control, []).append(row)
        domains.setdefault(domain, []).append(row)
        row += 1
    for control, rows in controls.items():
        sheet.cell(row=rows[0], column=9, value=control)
        sheet.cell(row=rows[0], column=10, value=f"The specification of control {control}.")
        sheet.cell(row=rows[0], column=11, value=f"Control {control}")
        if len(rows) > 1:
            for column in "IJK":
                sheet.merge_cells(f"{column}{rows[0]}:{column}{rows[-1]}")
    for domain, rows in domains.items():
        sheet.cell(row=rows[0], column=12, value=f"Domain {domain}")
        if len(rows) > 1:
            sheet.merge_cells(f"L{rows[0]}:L{rows[-1]}")
    sheet.cell(row=row, column=1, value="End of Standard")
    sheet.merge_cells(f"A{row}:D{row}")
    sheet.cell(row=row + 1, column=1,
               value="© Copyright 2023 Cloud Security Alliance - All rights reserved.")
    sheet.merge_cells(f"A{row + 1}:D{row + 1}")
    return saved(workbook)


# HECVAT 3.x -----------------------------------------------------------------------------------

HECVAT_GENERAL = ("Vendor Name", "Product Name", "Product Description",
                  "Web Link to Product Privacy Notice", "Vendor Contact Name")


def hecvat_3(sections: Mapping[str, Sequence[Item]], *, kind: str = "Full",
             version: str = "3.04", vendor: str = "Example Vendor") -> bytes:
    """A filled HECVAT 3.x (Full or Lite): the sheets in their order with the hidden
    Questions and Values sheets; on the vendor-response sheet the title (A1:D1) and version
    (E1), the date, the General Information block, then each section's title row (A:B
    merged) with the headers Vendor Answers, Additional Information, Guidance, Analyst Notes,
    and its questions: the id in A, the question a VLOOKUP into the hidden Questions sheet
    (stored value: the question), the answer in C, its explanation in D, the guidance and
    analyst notes formulas."""
    workbook = openpyxl.Workbook()
    workbook.active.title = "Introduction"
    workbook.create_sheet("Instructions")
    title = f"HECVAT - {kind} | Vendor Response"
    sheet = workbook.create_sheet(title)
    for name in ("Analyst Report", "Analyst Reference", "Summary Report"):
        workbook.create_sheet(name)
    questions = workbook.create_sheet("Questions")
    questions.sheet_state = "hidden"
    values = workbook.create_sheet("Values")
    values.sheet_state = "hidden"
    workbook.create_sheet("Standards Crosswalk")
    workbook.create_sheet("ChangeLog")
    values["A4"], values["A5"], values["A6"] = "Yes", "No", "N/A"
    workbook.defined_names["yes"] = openpyxl.workbook.defined_name.DefinedName(
        "yes", attr_text="Values!$A$4:$A$5")

    stored: dict[tuple[str, str], str] = {}
    sheet["A1"] = title
    sheet.merge_cells("A1:D1")
    sheet["E1"] = f"Version {version}"
    sheet["A2"] = "Vendor Response"
    sheet.merge_cells("A2:E2")
    sheet["A3"], sheet["B3"], sheet["C3"] = "DATE-01", "Date", "2024-03-21"
    sheet.merge_cells("C3:E3")
    sheet["A4"] = "General Information"
    sheet["A5"] = ("In order to protect the Institution and its systems, vendors must complete "
                   "this assessment.")
    sheet.merge_cells("A5:E5")
    row = 6
    for number, label in enumerate(HECVAT_GENERAL, start=1):
        sheet.cell(row=row, column=1, value=f"GNRL-{number:02d}")
        sheet.cell(row=row, column=2, value=label)
        sheet.cell(row=row, column=3, value=vendor if number == 1 else f"{label} of {vendor}")
        sheet.merge_cells(f"C{row}:E{row}")
        row += 1
    sheet.cell(row=row, column=1, value="Instructions")
    sheet.merge_cells(f"A{row}:B{row}")
    sheet.cell(row=row + 1, column=1, value="Step 1: Complete each section in order.")
    sheet.merge_cells(f"A{row + 1}:E{row + 1}")
    row += 2
    answers = DataValidation(type="list", formula1="yes", allow_blank=True)
    sheet.add_data_validation(answers)
    order = 3
    questions["A2"], questions["B2"], questions["C2"] = "Order", "ID", "Question"
    for section, items in sections.items():
        sheet.cell(row=row, column=1, value=section)
        sheet.merge_cells(f"A{row}:B{row}")
        for column, header in zip("CDEF", ("Vendor Answers", "Additional Information",
                                           "Guidance", "Analyst Notes"), strict=True):
            sheet[f"{column}{row}"] = header
        row += 1
        for item in items:
            questions.cell(row=order, column=1, value=order - 2)
            questions.cell(row=order, column=2, value=item.id)
            questions.cell(row=order, column=3, value=item.question)
            order += 1
            sheet.cell(row=row, column=1, value=item.id)
            sheet.cell(row=row, column=2,
                       value=f"=VLOOKUP(A{row},Questions!$B$3:$C$256,2,FALSE)")
            stored[(title, f"B{row}")] = item.question
            if item.answer:
                sheet.cell(row=row, column=3, value=item.answer)
            if item.explanation:
                sheet.cell(row=row, column=4, value=item.explanation)
            answers.add(f"C{row}")
            sheet.cell(row=row, column=5, value=(
                f'=IF((C{row}=""),VLOOKUP(A{row},Questions!B$18:G$258,4,FALSE),"N/A")'))
            stored[(title, f"E{row}")] = "No Guidance" if not item.answer else "N/A"
            sheet.cell(row=row, column=6,
                       value=f"=VLOOKUP(A{row},'Analyst Report'!$A$38:$E$287,5,FALSE)")
            stored[(title, f"F{row}")] = " "
            row += 1
    return with_stored_values(saved(workbook), stored)


# SIG (an export as Whistic writes it) ---------------------------------------------------------

SIG_HEADERS = ("Section Heading", "Control Heading", "Control Text", "Control Comment",
               "Question Identifier", "Question Original Identifier", "Question Text",
               "Question Answer", "Question Comment")


def sig_export(items: Sequence[tuple[str, Item]]) -> bytes:
    """A SIG questionnaire as exported by Whistic: one sheet, Questionnaire Response
    Records, its nine-column header in row 1; `items` are (section heading, item)."""
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Questionnaire Response Records"
    sheet.append(list(SIG_HEADERS))
    for number, (section, item) in enumerate(items, start=1):
        sheet.append([section, section.split(". ", 1)[-1], None, None, f"2.1.{number}",
                      item.id, item.question, item.answer, item.explanation or None])
    return saved(workbook)


# CAIQ v3.0.1 ----------------------------------------------------------------------------------

def caiq_v3(items: Sequence[Item], *, version: str = "3.0.1") -> bytes:
    """A filled CAIQ v3.0.1: sheets CSA CAIQ v3.0.1, Guiding Principles and CAIQ Change Log;
    the title in C1 (C1:D1 merged), a header over rows 2 to 4 (A to E and I merged over rows
    2-3, Consensus Assessment Answers over F2:H3 with Yes / No / Not Applicable in row 4),
    questions from row 5 with the answer marked "x" in its column and the control columns
    merged down each control's questions."""
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = f"CSA CAIQ v{version}"
    workbook.create_sheet("Guiding Principles")
    workbook.create_sheet("CAIQ Change Log")
    sheet["C1"] = f"CONSENSUS ASSESSMENTS INITIATIVE QUESTIONNAIRE v{version}"
    sheet.merge_cells("C1:D1")
    for column, header in zip("ABCDE", ("Control Domain", "Control ID", "Question ID",
                                        "Control Specification",
                                        "Consensus Assessment Questions"), strict=True):
        sheet[f"{column}2"] = header
        sheet.merge_cells(f"{column}2:{column}3")
    sheet["F2"] = "Consensus Assessment Answers"
    sheet.merge_cells("F2:H3")
    sheet["I2"] = "Notes"
    sheet.merge_cells("I2:I3")
    sheet["J2"] = "CCM v3.0.1 Compliance Mapping"
    sheet["F4"], sheet["G4"], sheet["H4"] = "Yes", "No", "Not Applicable"
    sheet.freeze_panes = "E5"
    row = 5
    controls: dict[str, list[int]] = {}
    for item in items:
        control = item.id.rsplit(".", 1)[0]
        controls.setdefault(control, []).append(row)
        sheet.cell(row=row, column=3, value=item.id)
        sheet.cell(row=row, column=5, value=item.question)
        column = {"Yes": 6, "No": 7, "Not Applicable": 8}.get(item.answer)
        if column:
            sheet.cell(row=row, column=column, value="x")
        if item.explanation:
            sheet.cell(row=row, column=9, value=item.explanation)
        row += 1
    for control, rows in controls.items():
        sheet.cell(row=rows[0], column=1, value=f"Domain of {control}\nControl {control}")
        sheet.cell(row=rows[0], column=2, value=control)
        sheet.cell(row=rows[0], column=4, value=f"The specification of {control}.")
        if len(rows) > 1:
            for column in "ABD":
                sheet.merge_cells(f"{column}{rows[0]}:{column}{rows[-1]}")
    sheet.cell(row=row + 1, column=1, value="© Copyright 2014 Cloud Security Alliance")
    return saved(workbook)


# HECVAT 4.x -----------------------------------------------------------------------------------

def hecvat_4(sheets: Mapping[str, Mapping[str, Sequence[Item]]], *,
             version: str = "4.1.4") -> bytes:
    """A filled HECVAT 4.x: START HERE and one sheet per part (Organization, Product, ...),
    each with the instruction line in A1, its title in A2 and the version in F2 (a formula
    into the hidden Auto Responses sheet, stored value "Version 4.1.4"); per section a title
    row (a leading space) with the headers Answer, Additional Information, Guidance, Analyst
    Notes, its questions (id in A, question in B), and End Table Data in G after the last."""
    workbook = openpyxl.Workbook()
    start = workbook.active
    start.title = "START HERE"
    auto = workbook.create_sheet("Auto Responses")
    auto.sheet_state = "hidden"
    auto["A36"] = f"Version {version}"
    stored: dict[tuple[str, str], str] = {}
    for title, sections in {"START HERE": {}, **sheets}.items():
        sheet = start if title == "START HERE" else workbook.create_sheet(title)
        sheet["A1"] = ("Cells contained in this worksheet may contain cells with dropdown lists "
                       "as well as autopopulated formulas. ")
        sheet["A2"] = f"HECVAT Solution Provider Response - {title.title()}"
        sheet["F2"] = "='Auto Responses'!$A$36"
        stored[(title, "F2")] = f"Version {version}"
        sheet["A3"] = "Date Completed"
        sheet["A4"] = "Instructions for Solution Providers"
        row = 12
        for section, items in sections.items():
            sheet.cell(row=row, column=1, value=f" {section}")
            for column, header in zip("CDEF", ("Answer", "Additional Information", "Guidance",
                                               "Analyst Notes"), strict=True):
                sheet[f"{column}{row}"] = header
            row += 1
            for item in items:
                sheet.cell(row=row, column=1, value=item.id)
                sheet.cell(row=row, column=2, value=item.question)
                if item.answer:
                    sheet.cell(row=row, column=3, value=item.answer)
                if item.explanation:
                    sheet.cell(row=row, column=4, value=item.explanation)
                row += 1
            sheet.cell(row=row - 1, column=7, value="End Table Data")
    return with_stored_values(saved(workbook), stored)


# ISO 27001 statement of applicability ----------------------------------------------------------

SOA_HEADERS = ("Control Reference", "Control Title", "Applicable (Yes/No)", "Justification",
               "Implementation Summary", "Related Document / Evidence", "Control Owner",
               "Review Date")


def statement_of_applicability(items: Sequence[Item], *, owner: str = "CISO") -> bytes:
    """An ISO/IEC 27001:2022 statement of applicability: a title row, a blank row, then the
    header (Control Reference, Control Title, Applicable (Yes/No), Justification, ...) and
    one row per Annex A control, grouped under theme rows."""
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Statement of Applicability"
    sheet["A1"] = "ISO/IEC 27001:2022 Statement of Applicability"
    sheet.merge_cells("A1:H1")
    sheet.append([])
    sheet.append(list(SOA_HEADERS))
    theme = None
    for item in items:
        number = item.id.removeprefix("A.").split(".")[0]
        if number != theme:
            theme = number
            sheet.append([f"Theme {number}"])
        sheet.append([item.id, item.question, item.answer, item.explanation,
                      f"Implemented by the {owner}'s programme." if item.answer == "Yes" else None,
                      None, owner, "2025-01-31"])
    return saved(workbook)


SOA_MAPPING_HEADERS = ("ISO/IEC 27001:2013 Annex A Controls", "ISO/IEC 27001:2022 Clause Controls",
                       "ISO/IEC 27001:2022 Clause Titles", "Control", "Applicable (N or Y)",
                       "Controlled by 3rd Party", "3rd Party Name",
                       "Selection Justification/Execution - Explanation",
                       "Implemented (Full, Partial, Not at All)", "Justification for Exclusion")


@dataclass(frozen=True)
class MappedControl:
    """One row of a statement of applicability that maps 2013 Annex A controls to 2022 ones."""

    iso_2013: str  # "5.1.1", "NEW" for a control the 2022 edition added, or with a space
    iso_2022: str  # "5.10"
    title: str
    control: str
    applicable: str  # "Y" / "N"
    justification: str = ""
    third_party: str = ""  # a name when a third party controls it


def soa_2013_2022(rows: Sequence[MappedControl], *, withdrawn: Sequence[str] = ()) -> bytes:
    """An ISO 27001 statement of applicability as vendors publish the 2013 -> 2022 transition:
    a document-version sheet first (title block and legend in column B), then sheet SOA with
    its header in row 1 (the texts of SOA_MAPPING_HEADERS), one row per 2013 control mapped to
    a 2022 clause (a 2022 id under several rows; "NEW" where 2013 had none), the 2022 id
    stored as a number (so 5.10 is the number 5.1, shown by its format), the title "5.10:
    ...", Y/N applicability, and withdrawn 2013 controls at the end with "N/A" for the
    2022 id and nothing else."""
    workbook = openpyxl.Workbook()
    cover = workbook.active
    cover.title = "Document Version"
    cover["B2"] = "Statement of Applicability"
    cover["B3"] = "Legend (for Selected Controls and Reasons for controls selection)"
    cover["B5"], cover["D5"] = "Version Number:", "1.1"
    sheet = workbook.create_sheet("SOA")
    sheet.append(list(SOA_MAPPING_HEADERS))
    for row in rows:
        third = bool(row.third_party)
        sheet.append([row.iso_2013, float(row.iso_2022), f"{row.iso_2022}: {row.title}",
                      row.control, row.applicable, "Y" if third else None,
                      row.third_party or None,
                      row.justification or None if row.applicable == "Y" else None, None,
                      None if row.applicable == "Y" else row.justification or None])
        sheet.cell(sheet.max_row, 2).number_format = "0.00" if len(
            row.iso_2022.split(".")[1]) == 2 else "0.0"
    for iso_2013 in withdrawn:
        sheet.append([iso_2013, "N/A"])
    return saved(workbook)
