"""Regenerate every PDF in the sample data tree.

Usage (from the repository root):

    .venv/bin/python sample_data/make_pdfs.py

Each PDF is rendered with fpdf2 from a plain-text source in
``sample_data/pdf_sources/``. The output is a real text PDF (core Helvetica
font, no images), so its text can be extracted with pypdf. The creation date
is pinned so that re-running the script gives stable output.

Source markup (one directive per line):

    @header <text>   running header printed on every page after the first
    # <text>         document title
    ## <text>        section heading
    ### <text>       subsection heading
    @pagebreak       start a new page
    @table ... @endtable
                     a table; the first row is the header, cells are
                     separated by " | "
    <blank line>     paragraph break
    anything else    a paragraph of body text
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from fpdf import FPDF
from fpdf.enums import XPos, YPos

SAMPLE_DIR = Path(__file__).resolve().parent
SOURCE_DIR = SAMPLE_DIR / "pdf_sources"

# source file (in pdf_sources/) -> output PDF (relative to sample_data/)
PDF_JOBS: dict[str, str] = {
    "acme_soc2_type2_excerpt.txt": "vendors/acme/documents/soc2_type2_excerpt.pdf",
    "northwind_soc2_type2_excerpt.txt": "vendors/northwind/documents/soc2_type2_excerpt.pdf",
    # Three years of one vendor's reports; the audit firm changed in the last, and its file
    # names with it.
    "lumen_soc2_2023.txt": "vendors/lumen/documents/Lumen-SOC2-Type-II-Report-2023.pdf",
    "lumen_soc2_2024.txt": "vendors/lumen/documents/Lumen-SOC2-Type-II-Report-2024.pdf",
    "lumen_soc2_fy25.txt": "vendors/lumen/documents/LMN-SOC2-FY25.pdf",
}

FIXED_DATE = dt.datetime(2024, 1, 5, 9, 0, 0, tzinfo=dt.timezone.utc)

# Core PDF fonts only cover Latin-1; map the few typographic characters that
# may slip into the sources.
_REPLACEMENTS = {
    "\u2014": " - ",
    "\u2013": "-",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u2026": "...",
    "\u00a0": " ",
}


def to_latin1(text: str) -> str:
    for src, dst in _REPLACEMENTS.items():
        text = text.replace(src, dst)
    return text.encode("latin-1", errors="replace").decode("latin-1")


class ReportPDF(FPDF):
    def __init__(self, header_text: str) -> None:
        super().__init__(orientation="P", unit="mm", format="Letter")
        self.header_text = header_text
        self.set_margins(left=20, top=20, right=20)
        self.set_auto_page_break(auto=True, margin=20)
        self.alias_nb_pages()

    def header(self) -> None:
        if self.page_no() == 1 or not self.header_text:
            return
        self.set_font("Helvetica", "I", 8)
        self.set_text_color(90, 90, 90)
        self.cell(0, 6, self.header_text, align="C", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.set_text_color(0, 0, 0)
        self.ln(4)

    def footer(self) -> None:
        self.set_y(-15)
        self.set_font("Helvetica", "", 8)
        self.set_text_color(90, 90, 90)
        self.cell(0, 8, f"Page {self.page_no()} of {{nb}}", align="C")
        self.set_text_color(0, 0, 0)


def _heading(pdf: ReportPDF, text: str, size: int, space_before: float) -> None:
    if pdf.get_y() > pdf.h - 45:  # keep headings with their first paragraph
        pdf.add_page()
    else:
        pdf.ln(space_before)
    pdf.set_font("Helvetica", "B", size)
    pdf.multi_cell(0, size * 0.55, text, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
    pdf.ln(2)


def _paragraph(pdf: ReportPDF, text: str) -> None:
    pdf.set_font("Helvetica", "", 10)
    pdf.multi_cell(0, 5, text, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
    pdf.ln(2.5)


def _table(pdf: ReportPDF, rows: list[list[str]]) -> None:
    widths = (14, 62, 58, 42) if len(rows[0]) == 4 else None
    pdf.set_font("Helvetica", "", 8)
    with pdf.table(
        col_widths=widths,
        text_align="LEFT",
        line_height=4,
        padding=1.5,
        first_row_as_headings=True,
    ) as table:
        for cells in rows:
            row = table.row()
            for cell in cells:
                row.cell(cell)
    pdf.ln(4)


def render(source: Path, target: Path) -> int:
    lines = to_latin1(source.read_text(encoding="utf-8")).splitlines()
    header_text = ""
    body: list[str] = []
    for line in lines:
        if line.startswith("@header "):
            header_text = line[len("@header ") :].strip()
        else:
            body.append(line)

    pdf = ReportPDF(header_text)
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_title(header_text or source.stem)
    pdf.set_author("Sample data generator (fictional content)")
    pdf.add_page()

    table_rows: list[list[str]] | None = None
    for raw in body:
        line = raw.rstrip()
        if table_rows is not None:
            if line == "@endtable":
                _table(pdf, table_rows)
                table_rows = None
            elif line:
                table_rows.append([c.strip() for c in line.split(" | ")])
            continue
        if not line:
            continue
        if line == "@pagebreak":
            pdf.add_page()
        elif line == "@table":
            table_rows = []
        elif line.startswith("### "):
            _heading(pdf, line[4:], 11, 3)
        elif line.startswith("## "):
            _heading(pdf, line[3:], 13, 4)
        elif line.startswith("# "):
            _heading(pdf, line[2:], 18, 0)
        else:
            _paragraph(pdf, line)
    if table_rows is not None:
        raise ValueError(f"{source.name}: @table without @endtable")

    target.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(target))
    return pdf.pages_count


def main() -> None:
    for source_name, target_rel in PDF_JOBS.items():
        source = SOURCE_DIR / source_name
        target = SAMPLE_DIR / target_rel
        pages = render(source, target)
        print(f"wrote {target.relative_to(SAMPLE_DIR)} ({pages} pages) from pdf_sources/{source_name}")


if __name__ == "__main__":
    main()
