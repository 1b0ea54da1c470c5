"""Word (.docx) with python-docx: the body's paragraphs and tables in document order as
Markdown-like text, headings as `#` lines, list items as `- ` lines, tables as pipe tables.
The zip package is checked (size, parts, macros) before anything is parsed."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.errors import UserInputError
from core.ingest import describe_size, shown_path
from core.ingest.documents.chunks import DocumentText, _detail
from core.ingest.documents.text import MarkdownText

# A .docx is a zip package; what it unpacks to is checked before anything is parsed.
MAX_DOCX_UNPACKED_BYTES = 250_000_000
MAX_DOCX_PARTS = 10_000
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_HEADING_STYLE = re.compile(r"heading ([1-9])", re.IGNORECASE)
_LIST_STYLE = re.compile(r"list (?:bullet|number|paragraph)(?: ([2-9]))?", re.IGNORECASE)
_MAX_STYLE_DEPTH = 20  # styles based on styles; a loop in a damaged file must end


def _read_docx(path: Path, data: bytes) -> DocumentText:
    """A Word document's body, paragraphs and tables in document order, as Markdown-like
    text. Headers, footers, footnotes and comments are not body text and are left out."""
    shown = shown_path(path)
    if data.startswith(_OLE_MAGIC):
        raise UserInputError(
            f"{shown} is an encrypted Word document or a legacy .doc file; remove its password "
            "or save it as a .docx in Word, then ingest it again.")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except Exception:  # any damage to the zip directory
        raise UserInputError(
            f"{shown} is not a readable Word document (it is not a .docx zip package).") from None
    with archive:
        names = _check_docx_package(shown, archive)

    import docx
    from docx.oxml.ns import qn

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # a damaged or foreign package can break any part of the parser
        if "word/document.xml" not in names:
            raise UserInputError(f"{shown} is not a Word document (its zip package has no "
                                 "word/document.xml).") from None
        raise UserInputError(
            f"{shown} is not a readable Word document ({_detail(exc)}).") from None
    text = MarkdownText()
    try:
        for element in _docx_blocks(document.element.body, qn):
            if element.tag == qn("w:tbl"):
                text.table(_docx_rows(_docx_table(element, document)))
            else:
                _docx_paragraph(element, document, text)
    except Exception as exc:
        raise UserInputError(
            f"{shown} is not a readable Word document ({_detail(exc)}).") from None
    return text.result()


def _check_docx_package(shown: str, archive: zipfile.ZipFile) -> set[str]:
    """Refuse a zip bomb, and a macro-enabled document, before any part is parsed."""
    infos = archive.infolist()
    if len(infos) > MAX_DOCX_PARTS:
        raise UserInputError(f"{shown} holds {len(infos):,} files in its zip package; a Word "
                             f"document may hold at most {MAX_DOCX_PARTS:,}.")
    unpacked = sum(info.file_size for info in infos)
    if unpacked > MAX_DOCX_UNPACKED_BYTES:
        raise UserInputError(
            f"{shown} would unpack to {describe_size(unpacked)}, more than the "
            f"{describe_size(MAX_DOCX_UNPACKED_BYTES)} a Word document may unpack to, so it is "
            "refused as a possible zip bomb.")
    names = {info.filename for info in infos}
    content_types = b""
    if "[Content_Types].xml" in names:
        try:
            content_types = archive.read("[Content_Types].xml")
        except Exception as exc:
            raise UserInputError(
                f"{shown} is not a readable Word document ({_detail(exc)}).") from None
    if (any(name.lower().endswith("vbaproject.bin") for name in names)
            or b"macroenabled" in content_types.lower()):
        raise UserInputError(
            f"{shown} contains macros, which are not accepted; save it in Word as a plain "
            "Word Document (.docx) and ingest that.")
    return names


def _docx_blocks(container: Any, qn: Any) -> Iterator[Any]:
    """The paragraphs and tables of the body in document order, content controls opened."""
    for child in container.iterchildren():
        if child.tag in (qn("w:p"), qn("w:tbl")):
            yield child
        elif child.tag == qn("w:sdt"):
            for content in child.iterchildren(qn("w:sdtContent")):
                yield from _docx_blocks(content, qn)
        elif child.tag == qn("w:customXml"):
            yield from _docx_blocks(child, qn)


def _docx_table(element: Any, parent: Any) -> Any:
    from docx.table import Table

    return Table(element, parent)


def _docx_paragraph(element: Any, parent: Any, text: MarkdownText) -> None:
    from docx.text.paragraph import Paragraph

    paragraph = Paragraph(element, parent)
    level = _docx_heading_level(element, paragraph)
    if level:
        text.heading(level, paragraph.text)
        return
    depth = _docx_list_depth(element, paragraph)
    if depth is None:
        text.paragraph(paragraph.text)
    else:
        text.item(paragraph.text, depth)


def _outline_level(element: Any) -> int | None:
    """w:outlineLvl of a paragraph or a style: 0-8 are heading levels 1-9, 9 is body text."""
    values = element.xpath("./w:pPr/w:outlineLvl/@w:val")
    if values and str(values[0]).isdigit():
        return int(values[0])
    return None


def _styles(paragraph: Any) -> Iterator[Any]:
    """A paragraph's style and the styles it is based on."""
    style = paragraph.style
    for _ in range(_MAX_STYLE_DEPTH):
        if style is None:
            return
        yield style
        style = style.base_style


def _docx_heading_level(element: Any, paragraph: Any) -> int | None:
    """The heading level of a paragraph: its own outline level, else its style's ("Title",
    "Heading N", or an outline level set on the style or one it is based on)."""
    own = _outline_level(element)
    if own is not None:
        return own + 1 if own < 9 else None
    for style in _styles(paragraph):
        name = (style.name or "").strip()
        if name.lower() == "title":
            return 1
        if match := _HEADING_STYLE.fullmatch(name):
            return int(match[1])
        level = _outline_level(style.element)
        if level is not None:
            return level + 1 if level < 9 else None
    return None


def _docx_list_depth(element: Any, paragraph: Any) -> int | None:
    """How deep a list paragraph is (0 for the outer list), or None for another paragraph."""
    if element.xpath("./w:pPr/w:numPr/w:numId[@w:val!='0']"):
        levels = element.xpath("./w:pPr/w:numPr/w:ilvl/@w:val")
        return int(levels[0]) if levels and str(levels[0]).isdigit() else 0
    for style in _styles(paragraph):
        if match := _LIST_STYLE.fullmatch((style.name or "").strip()):
            return int(match[1]) - 1 if match[1] else 0
        if style.element.xpath("./w:pPr/w:numPr/w:numId[@w:val!='0']"):
            return 0
    return None


def _docx_rows(table: Any) -> list[list[str]]:
    """A table's rows as cell texts. A cell merged across columns, which python-docx repeats
    for every grid column it spans, gives its text once and empty cells after it, so the
    columns stay in line; a cell merged down several rows is shown in each of them."""
    rows = []
    for row in table.rows:
        cells: list[str] = []
        previous = None
        for cell in row.cells:
            cells.append("" if cell is previous else _docx_cell_text(cell))
            previous = cell
        rows.append(cells)
    return rows


def _docx_cell_text(cell: Any) -> str:
    from docx.text.paragraph import Paragraph

    parts = []
    for block in cell.iter_inner_content():
        if isinstance(block, Paragraph):
            parts.append(block.text)
        else:  # a table inside the cell: its rows, one after another
            parts.extend(" ".join(row) for row in _docx_rows(block))
    return " ".join(" ".join(parts).split())
