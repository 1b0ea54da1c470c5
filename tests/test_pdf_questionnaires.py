"""Questionnaires published as PDFs, as vendors print them from their workbooks: a ruled
CAIQ-style table over several pages with its header repeated, the same table as text set in
columns without a rule (the header printed once, a row cut by the page break), a table of
another layout, and PDFs that are no questionnaire. Each PDF is built here with the layout of
real ones (column order, header texts, cells of several lines); the questions are our own."""

from __future__ import annotations

import io
from dataclasses import dataclass

import pytest
from fpdf import FPDF
from pypdf import PdfReader

from core.errors import UserInputError
from core.ingest.rounds import pdf_tables
from core.ingest.rounds.pdf_tables import PdfQuestionnaire, read_pdf_questionnaire
from core.ingest.rounds.table_round import layout_round
from core.models import PayloadLimits
from tests.support.packages import locked

HEADER = ("Question ID", "Question", "CSP CAIQ Answer", "SSRM Control Ownership",
          "CSP Implementation Description (Optional/Recommended)", "CCM Control ID")
WIDTHS = (24.0, 72.0, 22.0, 28.0, 100.0, 24.0)  # millimetres, landscape A4

SUBJECTS = [
    ("A&A", "the audit plan for the hosting platform"),
    ("AIS", "the release checklist for customer-facing services"),
    ("BCR", "the plan for restoring the billing platform after an outage"),
    ("CEK", "the register of encryption keys and their owners"),
    ("DSP", "the inventory of personal data held for customers"),
    ("HRS", "the onboarding checklist for new engineers"),
    ("IAM", "the list of accounts with administrative rights"),
    ("LOG", "the retention schedule for audit logs"),
    ("TVM", "the schedule of external penetration tests"),
]


@dataclass(frozen=True)
class Row:
    identifier: str
    question: str
    answer: str
    owner: str
    notes: str

    @property
    def control(self) -> str:
        return self.identifier.split(".")[0]

    def cells(self) -> tuple[str, ...]:
        return (self.identifier, self.question, self.answer, self.owner, self.notes,
                self.control)


def caiq_rows(count: int) -> list[Row]:
    """`count` questions, two to a control, with notes of one to six lines."""
    rows = []
    for n in range(count):
        domain, subject = SUBJECTS[n % len(SUBJECTS)]
        control, part = divmod(n, 2)
        answer = ("Yes", "No", "NA", "Yes")[n % 4]
        notes = " ".join(["Reviewed by the service owner and the security team."]
                         * (1 + n % 6)) + f" Last review number {n + 1}."
        question = (f"Is {subject} kept up to date, approved by a named owner and reviewed "
                    f"at least once a year (check {n + 1})?")
        if part:
            question = f"Are changes to {subject} recorded with their reason (check {n + 1})?"
        rows.append(Row(f"{domain}-{control + 1:02d}.{part + 1}", question, answer,
                        "CSP-owned" if n % 3 else "Shared CSP and CSC",
                        notes if answer != "NA" else ""))
    return rows


def ruled_caiq(rows: list[Row], *, title: str = "Consensus Assessments Initiative "
               "Questionnaire v4.0.3", widths: tuple[float, ...] = WIDTHS) -> bytes:
    """A ruled table as fpdf2 draws it, its header repeated on every page."""
    pdf = FPDF(orientation="L", format="A4")
    pdf.set_auto_page_break(True, margin=12)
    pdf.add_page()
    pdf.set_font("helvetica", "B", 13)
    pdf.cell(0, 8, title, new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("helvetica", size=8)
    pdf.cell(0, 6, "Example Cloud Ltd, answers as of March 2025", new_x="LMARGIN",
             new_y="NEXT")
    pdf.ln(3)
    with pdf.table(col_widths=widths, text_align="LEFT", v_align="TOP",
                   line_height=4) as table:
        table.row(HEADER)
        for row in rows:
            table.row(row.cells())
    return bytes(pdf.output())


def positioned(rows: list[tuple[str, ...]], *, ruled: bool = False,
               repeat_header: bool = False, header: tuple[str, ...] = HEADER,
               widths: tuple[float, ...] = WIDTHS, bottom: float = 190.0,
               sections: bool = False) -> tuple[bytes, set[str]]:
    """The table as text set in columns (and, when `ruled`, lines drawn between them), the
    way a vendor's own export lays it out: a running title and a page number on every page,
    the header on the first page only unless `repeat_header`, a title row before each
    domain's questions when `sections`, and a row that does not fit at a page's foot cut
    there and continued at the top of the next, its id cell empty. Also gives the ids of
    the rows cut."""
    pdf = FPDF(orientation="L", format="A4")
    pdf.set_auto_page_break(False)
    pdf.set_font("helvetica", size=9)
    step, pad, left = 4.2, 1.5, 10.0
    edges = [left]
    for width in widths:
        edges.append(edges[-1] + width)
    cut: set[str] = set()

    def lines_of(texts: tuple[str, ...]) -> list[list[str]]:
        return [pdf.multi_cell(w - 2 * pad, step, text, dry_run=True, output="LINES")
                if text else [] for w, text in zip(widths, texts, strict=True)]

    def put(y: float, cells: list[list[str]], count: int) -> None:
        for x, lines in zip(edges, cells, strict=False):
            for at, line in enumerate(lines[:count]):
                pdf.set_xy(x + pad, y + at * step)
                pdf.cell(0, step, line)

    def rules(top: float, low: float, across: bool) -> None:
        if not ruled:
            return
        if across:
            pdf.line(edges[0], top, edges[-1], top)
        for x in edges:
            pdf.line(x, top, x, low)

    def new_page() -> float:
        pdf.add_page()
        pdf.set_xy(left, 6)
        pdf.cell(0, step, "Example Cloud Ltd - security questionnaire answers")
        pdf.set_xy(left, 200)
        pdf.cell(0, step, f"Confidential - page {pdf.page}")
        y = 15.0
        if pdf.page == 1 or repeat_header:
            pdf.set_font("helvetica", "B", 9)
            cells = lines_of(header)
            height = max(len(c) for c in cells) * step + 2
            rules(y, y + height, True)
            put(y + 1, cells, 99)
            pdf.set_font("helvetica", size=9)
            y += height
            if ruled:
                pdf.line(edges[0], y, edges[-1], y)
        return y

    y = new_page()
    domain = ""
    for row in rows:
        if sections and row[0].split("-")[0] != domain:
            domain = row[0].split("-")[0]
            if bottom - y - 2 < 2 * step:
                y = new_page()
            rules(y, y + step + 2, True)
            pdf.set_font("helvetica", "B", 9)
            put(y + 1, [[f"{domain} - {dict(SUBJECTS)[domain].capitalize()}"]], 1)
            pdf.set_font("helvetica", size=9)
            y += step + 2
        cells = lines_of(row)
        needed = max(len(c) for c in cells)
        fits = int((bottom - y - 2) // step)
        if needed > fits and fits >= 1:
            rules(y, bottom, True)
            put(y + 1, cells, fits)
            cut.add(row[0])
            rest = [c[fits:] for c in cells]
            rest[0] = []
            y = new_page()
            needed = max(len(c) for c in rest)
            cells = rest
            height = needed * step + 2
            rules(y, y + height, False)
        else:
            if needed > fits:
                y = new_page()
            height = needed * step + 2
            rules(y, y + height, True)
        put(y + 1, cells, needed)
        y += height
        if ruled:
            pdf.line(edges[0], y, edges[-1], y)
    return bytes(pdf.output()), cut


def page_of(data: bytes, identifier: str) -> int:
    """The page whose text shows the id, as a person reading the PDF finds it."""
    pages = [page.extract_text() for page in PdfReader(io.BytesIO(data)).pages]
    found = [number for number, text in enumerate(pages, start=1) if identifier in text.split()]
    assert found, identifier
    return found[0]


def expected_answer(row: Row) -> str:
    return f"{row.answer}. {row.notes}" if row.notes else row.answer


def read(data: bytes, name: str = "caiq.pdf") -> PdfQuestionnaire:
    return read_pdf_questionnaire(name, data)


# Ruled tables -------------------------------------------------------------------------------

def test_a_ruled_caiq_over_three_pages_gives_each_id_one_answer_on_its_page():
    rows = caiq_rows(26)
    data = ruled_caiq(rows)
    assert len(PdfReader(io.BytesIO(data)).pages) == 3
    result = read(data)
    assert (result.looks_like, result.reason) == (True, "")
    found = result.read
    assert found is not None
    assert found.name == "CAIQ v4.0.3 (PDF)"
    assert found.sheets == ["page 1", "page 2", "page 3"]
    assert [a.questionnaire_id for a in found.answers] == [r.identifier for r in rows]
    for row, answer in zip(rows, found.answers, strict=True):
        assert answer.question == row.question
        assert answer.answer == expected_answer(row)
        assert answer.sheet == f"page {page_of(data, row.identifier)}"
        assert answer.extras["control_ownership"] == row.owner
        assert answer.extras["ccm_control_id"] == row.control
    by_page: dict[str, list[int]] = {}
    for answer in found.answers:
        by_page.setdefault(answer.sheet, []).append(answer.row)
    assert all(numbers == list(range(1, len(numbers) + 1)) for numbers in by_page.values())
    assert found.notes == []


def test_ids_wrapped_in_a_narrow_id_column_are_read_whole():
    rows = caiq_rows(9)
    data = ruled_caiq(rows, widths=(12.0, *WIDTHS[1:]))
    assert "A&A-01.1" not in PdfReader(io.BytesIO(data)).pages[0].extract_text()
    found = read(data).read
    assert found is not None
    assert [a.questionnaire_id for a in found.answers] == [r.identifier for r in rows]
    assert [a.answer for a in found.answers] == [expected_answer(r) for r in rows]


def test_a_read_pdf_becomes_a_round_whose_answers_name_their_page():
    rows = caiq_rows(6)
    found = read(ruled_caiq(rows)).read
    assert found is not None
    round_ = layout_round("Example CAIQ.pdf", found, vendor_id="acme", round_number=1,
                          timestamp="2025-03-01T00:00:00Z", limits=PayloadLimits())
    assert round_.layout == "CAIQ v4.0.3 (PDF)"
    assert round_.ids == [r.identifier for r in rows]
    response = round_.payload.responses[0]
    assert response.question_text == rows[0].question
    assert response.answer_text == expected_answer(rows[0])
    assert (response.origin.file, response.origin.sheet, response.origin.row) == (
        "Example CAIQ.pdf", "page 1", 1)
    assert round_.notes[0].startswith("Read as CAIQ v4.0.3 (PDF): 6 answers from page 1;")


def test_an_answer_with_notes_reads_as_the_answer_then_the_notes():
    rows = [Row("CEK-03.1", "Are customer data keys rotated on a schedule?", "Yes",
                "CSP-owned", "Keys are rotated every 90 days by the key service."),
            Row("CEK-03.2", "Is the key rotation schedule reviewed every year?", "No", "",
                "Not yet: the first review is planned for June."),
            Row("CEK-04.1", "Are key ceremonies witnessed by two people?", "NA", "", "")]
    found = read(ruled_caiq(rows)).read
    assert found is not None
    assert [a.answer for a in found.answers] == [
        "Yes. Keys are rotated every 90 days by the key service.",
        "No. Not yet: the first review is planned for June.",
        "NA"]


def test_a_ruled_row_cut_by_the_page_break_is_read_as_one_answer():
    rows = caiq_rows(30)
    data, cut = positioned([r.cells() for r in rows], ruled=True, repeat_header=True,
                           sections=True)
    assert cut
    found = read(data).read
    assert found is not None
    assert [a.questionnaire_id for a in found.answers] == [r.identifier for r in rows]
    for row, answer in zip(rows, found.answers, strict=True):
        assert (answer.question, answer.answer) == (row.question, expected_answer(row))
        assert answer.sheet == f"page {page_of(data, row.identifier)}"


# Tables without rules -----------------------------------------------------------------------

@pytest.mark.parametrize("repeat_header", [False, True], ids=["header-once", "header-repeated"])
def test_a_table_without_rules_is_read_by_its_columns(repeat_header):
    rows = caiq_rows(30)
    data, cut = positioned([r.cells() for r in rows], repeat_header=repeat_header,
                           sections=True)
    assert len(PdfReader(io.BytesIO(data)).pages) >= 3 and cut
    result = read(data)
    assert (result.looks_like, result.reason) == (True, "")
    found = result.read
    assert found is not None
    assert found.name == "CAIQ (PDF)"  # no title states the version
    assert [a.questionnaire_id for a in found.answers] == [r.identifier for r in rows]
    for row, answer in zip(rows, found.answers, strict=True):
        assert answer.question == row.question
        assert answer.answer == expected_answer(row)
        assert answer.sheet == f"page {page_of(data, row.identifier)}"
        assert answer.extras["ccm_control_id"] == row.control


def test_a_table_of_another_layout_is_read_by_its_answer_column():
    header = ("Ref", "Requirement", "Response", "Comments")
    widths = (22.0, 110.0, 25.0, 110.0)
    ids = ["AC-2", "AC-2(1)", "AC-3", "IA-5(1)", "SC-13"]
    rows = [Row(identifier, f"Describe how requirement {identifier} is met for hosted "
                f"customer environments, number {n}.", ("Yes", "Partial", "No")[n % 3],
                "", f"Comment on {identifier}: handled by the platform team." * (n % 2))
            for n, identifier in enumerate(ids)]
    data, _ = positioned([(r.identifier, r.question, r.answer, r.notes) for r in rows],
                         header=header, widths=widths)
    found = read(data, "controls.pdf").read
    assert found is not None
    assert found.name == "questionnaire table (PDF)"
    assert [(a.questionnaire_id, a.answer) for a in found.answers] == [
        (r.identifier, f"{r.answer}. {r.notes}" if r.notes else r.answer) for r in rows]


def test_a_statement_of_applicability_is_read_by_its_layout():
    header = ("Control", "Control title", "Applicable", "Justification")
    rows = [("A.5.1", "Policies for information security", "Yes",
             "Approved by the board and reviewed every year."),
            ("A.5.2", "Information security roles and responsibilities", "Yes",
             "Roles are named in the security organisation chart."),
            ("A.7.4", "Physical security monitoring", "No",
             "Excluded: the company runs no premises of its own.")]
    data, _ = positioned(rows, header=header, widths=(22.0, 90.0, 25.0, 130.0), ruled=True)
    found = read(data, "soa.pdf").read
    assert found is not None
    assert found.name == "ISO 27001 statement of applicability (PDF)"
    assert [(a.questionnaire_id, a.question, a.answer) for a in found.answers] == [
        (identifier, title, f"Applicable: {applicable}. {why}")
        for identifier, title, applicable, why in rows]


# What is not read as a questionnaire ----------------------------------------------------------

def policy_pdf(tabbed: bool) -> bytes:
    """A policy whose headings are numbered: "1.2 Scope", or the number set apart from the
    title at a tab stop, as a word processor sets numbered headings."""
    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    pdf.add_page()
    sections = [("1 Purpose", ["1.1 Scope", "1.2 Audience", "1.3 Review"]),
                ("2 Access control", ["2.1 Accounts", "2.2 Reviews", "2.3 Removal"]),
                ("3 Encryption", ["3.1 At rest", "3.2 In transit", "3.3 Keys"])]
    for title, headings in sections:
        pdf.set_font("helvetica", "B", 14)
        pdf.multi_cell(0, 8, title, new_x="LMARGIN", new_y="NEXT")
        for heading in headings:
            pdf.set_font("helvetica", "B", 11)
            if tabbed:
                number, words = heading.split(" ", 1)
                pdf.cell(20, 7, number)
                pdf.multi_cell(0, 7, words, new_x="LMARGIN", new_y="NEXT")
            else:
                pdf.multi_cell(0, 7, heading, new_x="LMARGIN", new_y="NEXT")
            pdf.set_font("helvetica", size=11)
            pdf.multi_cell(0, 6, f"This section sets out what the company requires for "
                           f"{heading.split(' ', 1)[1].lower()}. Yes, every team follows it, "
                           "and exceptions are approved by the security officer in writing.",
                           new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def test_a_policy_with_numbered_headings_is_not_a_questionnaire():
    result = read(policy_pdf(tabbed=False), "policy.pdf")
    assert (result.read, result.looks_like) == (None, False)
    assert result.reason == "no table whose first column holds question ids is on its 1 page(s)"


def test_a_policy_whose_heading_numbers_stand_apart_is_not_a_questionnaire():
    result = read(policy_pdf(tabbed=True), "policy.pdf")
    assert (result.read, result.looks_like) == (None, False)
    assert result.reason == "its numbered lines are headings, not a table of question ids"


def test_a_blank_questionnaire_looks_like_one_but_has_no_answer_to_read():
    rows = [Row(r.identifier, r.question, "", "", "") for r in caiq_rows(8)]
    result = read(ruled_caiq(rows))
    assert (result.read, result.looks_like) == (None, True)
    assert result.reason == ("8 question ids stand in a column, but no answer to them can "
                             "be read from the table")


def test_numbered_questions_answered_in_paragraphs_look_like_a_questionnaire():
    """A letter of answers: each question numbered, set apart from its number, its answer
    in the paragraph below. The ids stand in a column, but no table holds the answers."""
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=10)
    for n in range(1, 7):
        pdf.set_x(15)
        pdf.cell(15, 6, f"Q{n}")
        pdf.multi_cell(0, 6, f"Is the backup of service {n} restored in a test every year?",
                       new_x="LMARGIN", new_y="NEXT")
        pdf.set_x(15)
        pdf.multi_cell(0, 6, f"Answer: Yes. Service {n} was last restored in a test in May.",
                       new_x="LMARGIN", new_y="NEXT")
        pdf.ln(4)
    result = read(bytes(pdf.output()), "answers letter.pdf")
    assert (result.read, result.looks_like) == (None, True)
    assert result.reason == ("6 question ids stand in a column, but no column of answers "
                             "beside them can be read")


def test_a_pdf_locked_with_an_owner_password_only_is_read():
    rows = caiq_rows(4)
    found = read(locked(ruled_caiq(rows), user="", owner="vendor-legal")).read
    assert found is not None
    assert [a.answer for a in found.answers] == [expected_answer(r) for r in rows]


def test_a_pdf_that_needs_a_password_is_left_to_the_document_reader():
    result = read(locked(ruled_caiq(caiq_rows(4)), user="open-sesame", owner="owner"))
    assert (result.read, result.looks_like) == (None, False)
    assert result.reason.startswith("its pages could not be read")


def test_what_is_not_a_readable_pdf_is_no_questionnaire():
    result = read(b"%PDF-1.7 this is not really a PDF", "broken.pdf")
    assert (result.read, result.looks_like) == (None, False)
    assert result.reason.startswith("its pages could not be read")


def test_a_pdf_longer_than_the_page_cap_is_left_as_a_document(monkeypatch):
    monkeypatch.setattr(pdf_tables, "MAX_PAGES", 2)
    result = read(ruled_caiq(caiq_rows(26)))
    assert (result.read, result.looks_like) == (None, True)
    assert result.reason == ("it has 3 pages, and a questionnaire is read from a PDF of 2 "
                             "pages at most")


def test_an_id_answered_twice_differently_is_refused_naming_the_file():
    rows = caiq_rows(3)
    rows.append(Row(rows[0].identifier, rows[0].question, "No", "CSP-owned", "Changed."))
    with pytest.raises(UserInputError) as caught:
        read(ruled_caiq(rows), "twice.pdf")
    assert str(caught.value).startswith(f"twice.pdf, sheet page 1, row 4: question "
                                        f"{rows[0].identifier} is answered again")
