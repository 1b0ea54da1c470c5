"""A questionnaire published as a PDF (a CAIQ, HECVAT or SIG printed from its workbook, a
vendor's own export of its answers): its table read back into answers, one per question id,
each with its page and its row on that page.

The table's rows are read off its pages' words and ruling lines by `pdf_rows`; what each
column holds is decided as for any table of question ids (`id_tables`).

pdfplumber parses every character of a page, 0.1 to 0.35 s a page on the CAIQs measured
(benchmarks/README.md): 8 to 13 s for a CAIQ of 75 pages. So a PDF whose first `SCAN_PAGES`
pages hold no column of ids is taken for a document after those pages, and a PDF of more than
`MAX_PAGES` pages is left to be read as a document instead of being parsed for minutes: 300
pages are four times the longest CAIQ measured, read in a minute and a half at most at that
rate. Each page is closed once its words and ruling lines are taken, so memory holds those
(about 20 MB at the peak for the CAIQs measured) and one parsed page at a time."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from core.errors import UserInputError
from core.ingest.rounds.answers import Layout, LayoutRead, one_per_id
from core.ingest.rounds.id_tables import IdRow, generic_roles, row_answers, standard_roles
from core.ingest.rounds.pdf_rows import (
    ANY_ID,
    Columns,
    Page,
    PageTable,
    Record,
    Word,
    bare,
    cell_text,
    column_edges,
    header_texts,
    id_column,
    line_key,
    page_ids,
    page_table,
    read_page,
    running_footers,
    table_records,
)

MAX_PAGES = 300
SCAN_PAGES = 12  # pages searched for a column of ids before the PDF is taken for a document
MIN_IDS = 3  # ids in one column for a table of questions

@dataclass(frozen=True)
class PdfQuestionnaire:
    """What a PDF is as a questionnaire: its answers (`read`), or why it is not read as one
    (`reason`, empty when read). `looks_like` says a column of question ids was found: a PDF
    not read as a questionnaire but that looks like one is kept as a document, and the user
    is told so."""

    read: LayoutRead | None
    looks_like: bool
    reason: str
    pages: int | None = None  # the PDF's page count, when its pages could be read


_TABLE = Layout(key="pdf-table", family="questionnaire table", id_pattern=ANY_ID,
                headers={}, required=())


# The API ------------------------------------------------------------------------------------

def read_pdf_questionnaire(name: str, data: bytes) -> PdfQuestionnaire:
    """The answers of a questionnaire published as a PDF, one per question id, or why the
    PDF is not read as one: no column of question ids on its pages (no questionnaire), or
    such a column but no table of answers that can be read beside it (it looks like one).
    An id answered twice differently is refused, as in a workbook, naming the file."""
    miner = logging.getLogger("pdfminer")
    level = miner.level
    miner.setLevel(logging.ERROR)  # it warns of every repair of a damaged file
    try:
        pages, total = _read_pages(data)
    except Exception as exc:  # a damaged or locked file can break any part of the parser
        detail = " ".join(str(exc).split())[:120] or type(exc).__name__
        return PdfQuestionnaire(None, False, f"its pages could not be read ({detail})")
    finally:
        miner.setLevel(level)
    try:
        return replace(_questionnaire(pages, total), pages=total)
    except UserInputError as exc:
        raise UserInputError(f"{name}, {exc}") from None


def _questionnaire(pages: list[Page], total: int) -> PdfQuestionnaire:
    found = {page.number: page_ids(page) for page in pages}
    span = id_column([i for ids in found.values() for i in ids])
    if span is not None:
        found = {n: [i for i in ids if i.x0 < span[1] and i.x1 > span[0]]
                 for n, ids in found.items()}
    count = sum(len(ids) for ids in found.values())
    if span is None or count < MIN_IDS:
        where = (f"its {total} page(s)" if len(pages) == total
                 else f"the first {len(pages)} of its {total} pages")
        return PdfQuestionnaire(None, False,
                                f"no table whose first column holds question ids is on {where}")
    if total > MAX_PAGES:
        return PdfQuestionnaire(None, True, f"it has {total:,} pages, and a questionnaire is "
                                f"read from a PDF of {MAX_PAGES} pages at most")
    numbered = [n for n, ids in found.items() if ids]
    tables: list[PageTable] = []
    printed: frozenset[str] = frozenset()
    for page in pages:
        if numbered[0] <= page.number <= numbered[-1] + 1:  # and the page a last row ends on
            table = page_table(page, found[page.number], span, printed)
            printed = printed or frozenset(line_key(line) for line in table.header)
            tables.append(table)
    lost = f"{count} question ids stand in a column, but"
    edges = column_edges(tables, span[0])
    if edges is None:
        return PdfQuestionnaire(None, True, f"{lost} the table's other columns cannot be "
                                "told apart")
    columns = Columns(edges)
    headers = header_texts(tables, columns)
    records = table_records(tables, columns, running_footers(pages))
    vocabulary = frozenset(bare(w.text) for table in tables for w in table.page.words)
    rows = _id_rows(records, vocabulary)
    standard = standard_roles(headers)
    layout: Layout | None = None
    if standard is not None:
        layout, roles = standard
    else:
        generic = generic_roles(headers, rows, len(edges))
        if generic is None and not headers and not any(
                re.search("[A-Za-z]", i.text) for ids in found.values() for i in ids):
            # Numbers alone ("1.2" set apart from "Scope"): the headings of a document.
            return PdfQuestionnaire(None, False, "its numbered lines are headings, not a table "
                                    "of question ids")
        if generic is None:
            return PdfQuestionnaire(None, True, f"{lost} no column of answers beside them "
                                    "can be read")
        roles = generic
    answers, notes = row_answers(rows, roles, layout)
    if not answers:
        return PdfQuestionnaire(None, True, f"{lost} no answer to them can be read from the "
                                "table")
    answers = one_per_id(answers, notes)
    version = _version(pages[:numbered[0]], layout.family if layout else "")
    return PdfQuestionnaire(
        LayoutRead(layout=layout or _TABLE, name=_name(layout, version),
                   sheets=[f"page {n}" for n in _pages_of(records)],
                   answers=answers, notes=notes),
        True, "")


# Pages --------------------------------------------------------------------------------------

def _read_pages(data: bytes) -> tuple[list[Page], int]:
    """The pages read, and the PDF's page count: the first `SCAN_PAGES`, and the rest when
    those hold `MIN_IDS` ids and the PDF has `MAX_PAGES` pages at most."""
    import pdfplumber

    with pdfplumber.open(io.BytesIO(data)) as pdf:
        total = len(pdf.pages)
        limit = min(total, SCAN_PAGES)
        pages: list[Page] = []
        ids = 0
        while len(pages) < limit:
            page = pdf.pages[len(pages)]
            try:
                pages.append(read_page(page, len(pages) + 1))
            finally:
                page.close()
            ids += len(page_ids(pages[-1]))
            if ids >= MIN_IDS and total <= MAX_PAGES:
                limit = total
    return pages, total


# Rows as answers ---------------------------------------------------------------------------

def _id_rows(records: Sequence[Record], vocabulary: frozenset[str]) -> list[IdRow]:
    """Each record's cells as text, a row cut by a page break joined across its pages."""
    rows = []
    for record in records:
        cells = {}
        for column, words in record.cells.items():
            by_page: dict[int, list[Word]] = {}
            for page, word in words:
                by_page.setdefault(page, []).append(word)
            text = " ".join(cell_text(ws, vocabulary) for _, ws in sorted(by_page.items()))
            if text:
                cells[column] = text
        rows.append(IdRow(record.identifier, f"page {record.page}", record.row, cells))
    return rows


def _pages_of(records: Sequence[Record]) -> list[int]:
    """The pages the table's rows are on."""
    pages = {r.page for r in records}
    pages.update(page for r in records for words in r.cells.values() for page, _ in words)
    return sorted(pages)


def _version(pages: Sequence[Page], family: str) -> str | None:
    """The questionnaire's version as a line naming it states it ("CSA CAIQ standard,
    v4.0.2"; not the "TLS v1.2" of its introduction)."""
    pattern = re.compile(r"(?:\bv|\bversion\s+)(\d+\.\d+(?:\.\d+)?)\b", re.IGNORECASE)
    names = tuple(n for n in (family.lower(), "questionnaire") if n)
    for page in pages:
        for line in page.lines:
            text = " ".join(w.text for w in line)
            match = pattern.search(text)
            if match and any(n in text.lower() for n in names):
                return match.group(1)
    return None


def _name(layout: Layout | None, version: str | None) -> str:
    """"CAIQ v4.0.2 (PDF)", "SIG questionnaire (PDF)", "questionnaire table (PDF)"."""
    if layout is None:
        return "questionnaire table (PDF)"
    if layout.family in ("CAIQ", "HECVAT"):
        return f"{layout.family} v{version} (PDF)" if version else f"{layout.family} (PDF)"
    if layout.family == "SIG":
        return "SIG questionnaire (PDF)"
    return f"{layout.family} (PDF)"
