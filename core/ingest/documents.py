"""Vendor documents (.md .txt .pdf .docx .html .htm) read, validated and chunked before
anything is written.

Word files and web pages are turned into Markdown-like text (headings as `#` lines, list
items as `- ` lines, tables as pipe tables) and then split like Markdown. Every chunk of a
document with headings carries the heading path in force where it starts (its section)."""

from __future__ import annotations

import bisect
import codecs
import io
import logging
import os
import re
import warnings
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.config import MAX_DOCUMENT_BYTES, MAX_ROUND_NUMBER
from core.errors import UserInputError
from core.hashing import file_digest
from core.ingest import (
    decode_utf8,
    describe_size,
    read_user_file,
    refuse_too_large,
    shown_path,
    unreadable_reason,
)

SUPPORTED_SUFFIXES = (".md", ".txt", ".pdf", ".docx", ".html", ".htm")
SUPPORTED_LIST = ".md, .txt, .pdf, .docx, .html or .htm"
# Documents whose text is Markdown, or is turned into it: split at their headings.
MARKDOWN_SUFFIXES = (".md", ".docx", ".html", ".htm")
# A .docx is a zip package; what it unpacks to is checked before anything is parsed.
MAX_DOCX_UNPACKED_BYTES = 250_000_000
MAX_DOCX_PARTS = 10_000
# A heading longer than this is cut in the section path (a whole paragraph styled as one).
MAX_HEADING_CHARS = 200
SECTION_SEPARATOR = " > "
DOCUMENT_TYPES = ("tc_files", "followup_document", "soc2_summary:TRACK")
_SOC2_TRACK = re.compile(r"soc2_summary:[A-Za-z0-9][A-Za-z0-9_-]{0,62}")


@dataclass(frozen=True)
class DocumentFile:
    """A file found on disk and the name it is stored under."""

    path: Path
    source: str


@dataclass(frozen=True)
class Chunk:
    """One piece of a document as stored: its text, the PDF page it is on, and the heading
    path in force where it starts ("Access control > Passwords"; None before any heading)."""

    text: str
    page: int | None = None
    section: str | None = None


@dataclass(frozen=True)
class Heading:
    """A heading of a document's text: where its line starts, its level (1 for `#`) and title."""

    offset: int
    level: int
    title: str


@dataclass(frozen=True)
class DocumentText:
    """The text of a document, or of one PDF page, with the headings found in it."""

    text: str
    page: int | None = None
    headings: tuple[Heading, ...] = ()


@dataclass
class PreparedDocument:
    """A document read and chunked, ready to embed: nothing is written yet."""

    source: str
    path: Path
    digest: str
    chunks: list[Chunk] = field(default_factory=list)
    pages: int | None = None


def check_document_type(doc_type: str, round_number: int | None) -> None:
    """Refuse a `type` outside seed 002's values, and a round where it makes no sense."""
    if not isinstance(doc_type, str):
        raise UserInputError(f"Document type {doc_type!r} is not text.")
    if round_number is not None and (isinstance(round_number, bool)
                                     or not isinstance(round_number, int)):
        raise UserInputError(f"--round must be a whole number, not {round_number!r}.")
    if doc_type == "followup_document":
        if round_number is None:
            raise UserInputError("--type followup_document needs --round N (the follow-up round).")
    elif doc_type == "tc_files" or _SOC2_TRACK.fullmatch(doc_type):
        if round_number is not None:
            raise UserInputError("--round applies only to --type followup_document.")
    else:
        raise UserInputError(
            f"Document type '{shown_path(doc_type)}' is not one of tc_files, followup_document "
            "or soc2_summary:TRACK."
        )
    if round_number is not None and round_number < 1:
        raise UserInputError(f"--round must be 1 or more, not {round_number}.")
    if round_number is not None and round_number > MAX_ROUND_NUMBER:
        raise UserInputError(f"--round must be {MAX_ROUND_NUMBER} or less, not {round_number}.")


def collect_files(paths: Iterable[Path]) -> list[DocumentFile]:
    """Files to ingest: explicit files by name, folders walked. Links to folders are not
    followed, but one that leads back into the walk (a loop) is refused, as is any folder
    the walk cannot read."""
    found: list[DocumentFile] = []
    for path in paths:
        path = Path(path)
        _check_given_path(path)
        if path.is_dir():
            found.extend(_walk(path))
        elif path.suffix.lower() in SUPPORTED_SUFFIXES:
            found.append(DocumentFile(path, _source_name(path, path.name)))
        else:
            raise UserInputError(
                f"{shown_path(path)} is not a supported document; use {SUPPORTED_LIST} files."
            )
    by_source: dict[str, Path] = {}
    for doc in found:
        if doc.source in by_source and not _same_file(by_source[doc.source], doc.path):
            raise UserInputError(
                f"{shown_path(by_source[doc.source])} and {shown_path(doc.path)} would both be "
                f"stored as '{doc.source}'; ingest them in separate commands or rename one."
            )
        by_source[doc.source] = doc.path
    unique = {doc.source: doc for doc in found}
    if not unique:
        raise UserInputError(f"No {SUPPORTED_LIST} files were found in the given paths.")
    return list(unique.values())


def _check_given_path(path: Path) -> None:
    if "\x00" in str(path):
        raise UserInputError(
            f"{shown_path(path)} is not a usable path (it contains a NUL character).")
    try:
        path.stat()
    except OSError as exc:
        raise UserInputError(unreadable_reason(path, exc)) from None


def _walk(folder: Path) -> list[DocumentFile]:
    def refuse(exc: OSError) -> None:
        raise UserInputError(
            f"{shown_path(exc.filename or folder)} cannot be read ({exc.strerror}).")

    found = []
    for root, dirs, files in os.walk(folder, followlinks=False, onerror=refuse):
        dirs.sort()
        for name in dirs:
            linked = Path(root) / name
            if linked.is_symlink():
                _refuse_folder_loop(linked, Path(root))
        for name in sorted(files):
            file = Path(root) / name
            if file.suffix.lower() in SUPPORTED_SUFFIXES and not name.startswith("."):
                found.append(DocumentFile(file, _source_name(file,
                                                             file.relative_to(folder).as_posix())))
    return found


def _refuse_folder_loop(link: Path, parent: Path) -> None:
    """A link to a folder is skipped, unless it leads back to where the walk already is."""
    try:
        target = link.resolve(strict=True)
        inside = parent.resolve(strict=True)
    except (OSError, RuntimeError):  # it is not followed, so what it leads to does not matter
        return
    if inside.is_relative_to(target):
        raise UserInputError(
            f"{shown_path(link)} is a symbolic link loop (it leads back to a folder that "
            "contains it); remove the link or ingest the files another way.")


def _source_name(path: Path, source: str) -> str:
    """The name a document is stored under; it must be text the store and a reader can hold."""
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        raise UserInputError(
            f"{shown_path(path)} has a name that is not valid UTF-8; rename the file.") from None
    return source


def _same_file(first: Path, second: Path) -> bool:
    try:
        return first.resolve(strict=True) == second.resolve(strict=True)
    except (OSError, RuntimeError):
        return False


def check_documents(paths: Iterable[Path], *, doc_type: str, round_number: int | None,
                    max_bytes: int = MAX_DOCUMENT_BYTES) -> list[DocumentFile]:
    """Every check of a document ingest that needs neither the store nor the file contents:
    type, round, the files found and their sizes."""
    check_document_type(doc_type, round_number)
    files = collect_files(paths)
    for doc in files:
        try:
            size = doc.path.stat().st_size
        except OSError:
            continue  # reading it reports why, in its own sentence
        refuse_too_large(shown_path(doc.path), size, max_bytes, "a document")
    return files


def read_document(path: Path, data: bytes) -> list[DocumentText]:
    """The text of a document: one part per PDF page, one part for any other file."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        return _read_pdf(path, data)
    if data.startswith(b"%PDF-"):
        raise UserInputError(
            f"{shown_path(path)} is a PDF file with a {path.suffix} name; rename it to .pdf.")
    if suffix == ".docx":
        return [_read_docx(path, data)]
    if suffix in (".html", ".htm"):
        return [_read_html(path, data)]
    if b"\x00" in data:
        raise UserInputError(f"{shown_path(path)} is not a text file (it contains NUL bytes).")
    text = decode_utf8(path, data)
    return [DocumentText(text, None, markdown_headings(text) if suffix == ".md" else ())]


def _read_pdf(path: Path, data: bytes) -> list[DocumentText]:
    from pypdf import PdfReader

    shown = shown_path(path)
    if not data.startswith(b"%PDF-"):
        raise UserInputError(f"{shown} is not a PDF file (it does not start with %PDF-).")
    # pypdf logs its repairs of damaged files; the refusal sentence below says it once.
    pypdf_logger = logging.getLogger("pypdf")
    saved_level = pypdf_logger.level
    pypdf_logger.setLevel(logging.CRITICAL)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise UserInputError(f"{shown} is an encrypted PDF; decrypt it before ingesting.")
        # NUL characters come from fonts without a text mapping; they carry no words.
        return [DocumentText((page.extract_text() or "").replace("\x00", ""), number)
                for number, page in enumerate(reader.pages, start=1)]
    except UserInputError:
        raise
    except Exception as exc:  # a damaged file can break any part of the parser
        raise UserInputError(f"{shown} is not a readable PDF ({_detail(exc)}).") from None
    finally:
        pypdf_logger.setLevel(saved_level)


def _detail(exc: BaseException) -> str:
    """A parser's complaint as a short phrase for the end of a refusal sentence."""
    return " ".join(str(exc).split())[:120] or type(exc).__name__


# Markdown headings and sections ---------------------------------------------------------------

_ATX_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


def markdown_headings(text: str) -> tuple[Heading, ...]:
    """The `#` headings of Markdown text, outside fenced code blocks."""
    headings: list[Heading] = []
    offset = 0
    fence = ""
    for line in text.split("\n"):
        body = line.rstrip("\r")
        opening = _FENCE.match(body)
        if fence:
            if opening and opening[1][0] == fence[0] and len(opening[1]) >= len(fence) \
                    and not body.strip().strip(fence[0]):
                fence = ""
        elif opening:
            fence = opening[1]
        elif (match := _ATX_HEADING.fullmatch(body)) and match[2] and match[2].strip():
            headings.append(Heading(offset, len(match[1]), _heading_title(match[2])))
        offset += len(line) + 1
    return tuple(headings)


def _heading_title(text: str) -> str:
    title = " ".join(text.split())
    return title if len(title) <= MAX_HEADING_CHARS else title[: MAX_HEADING_CHARS - 1] + "\u2026"


def section_paths(headings: Iterable[Heading]) -> list[tuple[int, str]]:
    """(offset, heading path) at every heading: the path holds the heading and the ones above
    it, each level replacing the same and deeper levels before it."""
    stack: list[Heading] = []
    paths = []
    for heading in headings:
        while stack and stack[-1].level >= heading.level:
            stack.pop()
        stack.append(heading)
        paths.append((heading.offset, SECTION_SEPARATOR.join(h.title for h in stack)))
    return paths


def split_document_text(part: DocumentText, splitter: Any, chunk_overlap: int) -> list[Chunk]:
    """The splitter's chunks of one part, each with the section in force at its start.

    The chunks are the splitter's own; only their start offsets are found, searching forward
    from where the previous chunk could at the earliest be followed (as langchain does for its
    start_index)."""
    paths = section_paths(part.headings)
    offsets = [offset for offset, _ in paths]
    chunks: list[Chunk] = []
    start = 0
    previous_length = 0
    for piece in splitter.split_text(part.text):
        if paths:
            earliest = max(start, start + previous_length - chunk_overlap)
            found = part.text.find(piece, earliest)
            if found < 0:
                found = part.text.find(piece, start)
            start = found if found >= 0 else start
            previous_length = len(piece)
        if not piece.strip():
            continue
        at = bisect.bisect_right(offsets, start) - 1
        chunks.append(Chunk(piece, part.page, paths[at][1] if at >= 0 else None))
    return chunks


class MarkdownText:
    """Markdown-like text built block by block, remembering where each heading starts."""

    def __init__(self) -> None:
        self._blocks: list[str] = []
        self._length = 0
        self._last_kind = ""
        self._headings: list[Heading] = []

    def _add(self, block: str, kind: str) -> int:
        if self._blocks:
            separator = "\n" if kind == self._last_kind == "item" else "\n\n"
            self._blocks.append(separator)
            self._length += len(separator)
        offset = self._length
        self._blocks.append(block)
        self._length += len(block)
        self._last_kind = kind
        return offset

    def heading(self, level: int, text: str) -> None:
        title = _heading_title(text)
        if title:
            level = min(max(level, 1), 6)
            offset = self._add(f"{'#' * level} {title}", "heading")
            self._headings.append(Heading(offset, level, title))

    def paragraph(self, text: str, quote: int = 0) -> None:
        lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n")
                 .split("\n")]
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        if lines:
            self._add("\n".join("> " * quote + line for line in lines), "paragraph")

    def item(self, text: str, depth: int = 0) -> None:
        line = " ".join(text.split())
        if line:
            self._add(f"{'  ' * depth}- {line}", "item")

    def table(self, rows: list[list[str]]) -> None:
        """A pipe table, its first row the header; rows without any text are left out."""
        cells = [[" ".join(cell.split()).replace("|", "\\|") for cell in row] for row in rows]
        cells = [row for row in cells if any(row)]
        if not cells:
            return
        width = max(len(row) for row in cells)
        lines = []
        for number, row in enumerate(cells):
            lines.append("| " + " | ".join(row + [""] * (width - len(row))) + " |")
            if number == 0:
                lines.append("|" + " --- |" * width)
        self._add("\n".join(lines), "table")

    def result(self) -> DocumentText:
        return DocumentText("".join(self._blocks), None, tuple(self._headings))


# Word (.docx) ---------------------------------------------------------------------------------

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


# Web pages (.html .htm) -----------------------------------------------------------------------

_DROPPED_TAGS = ("script", "style", "noscript", "template", "head", "title", "svg")
_SPACES = re.compile(r"\s+")
_HTML_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_HTML_LISTS = ("ul", "ol", "menu", "dir")
_HTML_BLOCKS = frozenset((
    "p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "address",
    "figure", "figcaption", "dl", "dt", "dd", "form", "fieldset", "legend", "details",
    "summary", "hr", "center", "body", "html", "dialog", "caption", "option",
))
_HTML_PARTING = _HTML_BLOCKS | {"li", "tr", "td", "th", "table", "pre", "blockquote",
                                *_HTML_HEADINGS, *_HTML_LISTS}
# What the HTML standard does with these declared charsets: Latin-1 and ASCII mean
# windows-1252, and a UTF-16 declaration inside the (ASCII-readable) file means UTF-8.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
_HTML_CHARSET_AS = {"iso8859-1": "cp1252", "ascii": "cp1252", "latin-1": "cp1252",
                    "utf-16": "utf-8", "utf-16-le": "utf-8", "utf-16-be": "utf-8"}


def _read_html(path: Path, data: bytes) -> DocumentText:
    """A web page's visible text as Markdown-like text: h1-h6 as headings, paragraphs, list
    items, preformatted text, quotations and table rows as lines."""
    from bs4 import BeautifulSoup

    shown = shown_path(path)
    markup = _decode_html(shown, data)
    if "\x00" in markup:
        raise UserInputError(f"{shown} is not a text file (it contains NUL characters).")
    with warnings.catch_warnings():  # bs4 warns about markup it finds odd; it still parses it
        warnings.simplefilter("ignore")
        soup = BeautifulSoup(markup, "html.parser")
    for tag in soup.find_all(_DROPPED_TAGS):
        tag.decompose()
    walker = _HtmlWalker()
    try:
        walker.walk(soup)
    except RecursionError:
        raise UserInputError(
            f"{shown} has its elements nested too deeply to be read.") from None
    walker.flush()
    return walker.text.result()


def _decode_html(shown: str, data: bytes) -> str:
    """The page's text in the charset it declares (a byte order mark first); without a
    declaration, in the encoding BeautifulSoup's UnicodeDammit finds. Bytes the charset cannot
    decode are refused, never guessed at or replaced."""
    from bs4.dammit import EncodingDetector, UnicodeDammit

    _, bom = EncodingDetector.strip_byte_order_mark(data)
    declared = None if bom else EncodingDetector.find_declared_encoding(data, is_html=True)
    codec = _known_codec(declared)
    if codec:
        codec = _HTML_CHARSET_AS.get(codec, codec)
        if codec == "cp1252":  # the five bytes it leaves undefined are read as Latin-1
            return _ESCAPED_BYTE.sub(lambda m: chr(ord(m[0]) - 0xDC00),
                                     data.decode(codec, "surrogateescape"))
        try:
            return data.decode(codec)
        except UnicodeDecodeError as exc:
            raise UserInputError(
                f"{shown} declares the charset {declared}, but byte {exc.start} is not valid "
                f"{declared}; save it in the charset it declares (or as UTF-8) and ingest it "
                "again.") from None
    dammit_logger = logging.getLogger("bs4.dammit")
    saved_level = dammit_logger.level
    dammit_logger.setLevel(logging.CRITICAL)  # the refusal below says it once
    try:
        dammit = UnicodeDammit(data, is_html=True)
    finally:
        dammit_logger.setLevel(saved_level)
    if dammit.unicode_markup is None or dammit.contains_replacement_characters:
        raise UserInputError(
            f"{shown} cannot be decoded as text in any known encoding; save it as UTF-8 and "
            "ingest it again.")
    return dammit.unicode_markup.removeprefix("\ufeff")


def _known_codec(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return codecs.lookup(name).name
    except LookupError:  # a charset Python does not know: the page is decoded without it
        return None


class _HtmlWalker:
    """Walks a parsed page, gathering inline text and writing it out at each block's end."""

    def __init__(self) -> None:
        self.text = MarkdownText()
        self._inline: list[str] = []
        self._list_depth = 0
        self._item_depth: int | None = None  # set while a list item's first text is awaited
        self._quote = 0

    def walk(self, node: Any) -> None:
        from bs4 import NavigableString, Tag
        from bs4.element import PreformattedString

        for child in node.children:
            if isinstance(child, Tag):
                self._element(child)
            elif isinstance(child, NavigableString) and not isinstance(child,
                                                                       PreformattedString):
                self._inline.append(_SPACES.sub(" ", str(child)))  # source line breaks too

    def _element(self, tag: Any) -> None:
        name = (tag.name or "").lower()
        if name in _HTML_HEADINGS:
            self.flush()
            self.text.heading(_HTML_HEADINGS[name], _inline_text(tag))
        elif name == "br":
            self._inline.append("\n")
        elif name == "table":
            self.flush()
            caption = tag.find("caption")
            if caption is not None and caption.find_parent("table") is tag:
                self.text.paragraph(_inline_text(caption), self._quote)
            self.text.table(_html_rows(tag))
        elif name == "pre":
            self.flush()
            self.text.paragraph(tag.get_text(), self._quote)
        elif name in _HTML_LISTS:
            self.flush()
            self._list_depth += 1
            self.walk(tag)
            self.flush()
            self._list_depth -= 1
        elif name == "li":
            self.flush()
            self._item_depth = max(self._list_depth - 1, 0)
            self.walk(tag)
            self.flush()
            self._item_depth = None
        elif name == "blockquote":
            self.flush()
            self._quote += 1
            self.walk(tag)
            self.flush()
            self._quote -= 1
        elif name in _HTML_BLOCKS:
            self.flush()
            self.walk(tag)
            self.flush()
        else:  # inline: its text joins the block around it
            self.walk(tag)

    def flush(self) -> None:
        """Write out the inline text gathered so far: a list item's first text as its item,
        anything else as a paragraph whose lines are the <br> breaks."""
        gathered = "".join(self._inline)
        self._inline = []
        lines = [" ".join(line.split()) for line in gathered.split("\n")]
        lines = [line for line in lines if line]
        if not lines:
            return
        if self._item_depth is not None:
            self.text.item(" ".join(lines), self._item_depth)
            self._item_depth = None
        else:
            self.text.paragraph("\n".join(lines), self._quote)


def _html_rows(table: Any) -> list[list[str]]:
    """The rows of a table (not of tables inside its cells) as cell texts."""
    rows = []
    for row in table.find_all("tr"):
        if row.find_parent("table") is table:
            rows.append([_inline_text(cell)
                         for cell in row.find_all(("td", "th"), recursive=False)])
    return rows


def _inline_text(tag: Any) -> str:
    """The text of an element on one line: words split by inline markup stay whole, while a
    <br> or a block inside it (a paragraph in a cell, a nested table) parts them."""
    from bs4 import NavigableString, Tag
    from bs4.element import PreformattedString

    parts = []
    for node in tag.descendants:
        if isinstance(node, Tag):
            if node.name == "br" or node.name in _HTML_PARTING:
                parts.append(" ")
        elif isinstance(node, NavigableString) and not isinstance(node, PreformattedString):
            parts.append(str(node))
    return " ".join("".join(parts).split())


# Chunking -------------------------------------------------------------------------------------

def make_splitter(chunk_size: int, chunk_overlap: int, suffix: str):
    """langchain's recursive splitter; markdown-aware separators for .md files and for the
    Markdown-like text made from .docx and .html files."""
    from langchain_text_splitters import MarkdownTextSplitter, RecursiveCharacterTextSplitter

    if suffix in MARKDOWN_SUFFIXES:
        return MarkdownTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    return RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)


def prepare_document(doc: DocumentFile, chunk_size: int, chunk_overlap: int, *,
                     max_bytes: int = MAX_DOCUMENT_BYTES) -> PreparedDocument:
    """Read and chunk one file; a PDF is split page by page so each chunk keeps its page, a
    document with headings so each chunk knows its section."""
    data = read_user_file(doc.path, max_bytes=max_bytes, what="a document")
    parts = read_document(doc.path, data)
    suffix = doc.path.suffix.lower()
    splitter = make_splitter(chunk_size, chunk_overlap, suffix)
    chunks = [chunk for part in parts
              for chunk in split_document_text(part, splitter, chunk_overlap)]
    if not chunks:
        raise UserInputError(
            f"{shown_path(doc.path)} has no extractable text"
            + (" (a scanned PDF needs OCR first)." if suffix == ".pdf" else ".")
        )
    return PreparedDocument(
        source=doc.source, path=doc.path, digest=file_digest(data), chunks=chunks,
        pages=len(parts) if suffix == ".pdf" else None,
    )
