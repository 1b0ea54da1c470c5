"""PDF (.pdf) with pypdf: one part per page, so each chunk keeps its page.

A PDF locked with an owner password only (printing or copying restricted; any viewer opens
it) is read; one that needs a password to open is refused by name. A page without a text
layer (a scan, a screenshot saved as PDF, image strips, text drawn as outlines) is drawn whole
by PDFium (pypdfium2), read by OCR (`core.ingest.documents.ocr`) and marked so. A page whose
text layer keeps a word per run (pypdf then breaks the line after every word) is rebuilt into
lines from where PDFium places each character. Lines repeated at the top or bottom of most
pages (running headers and footers: "November 2024  11", "Confidential") are dropped, so no
chunk starts with them."""

from __future__ import annotations

import io
import logging
import re
import threading
from collections import Counter
from pathlib import Path

from core.errors import UserInputError
from core.ingest import shown_path
from core.ingest.documents.chunks import DocumentText, _detail
from core.ingest.documents.ocr import OcrUnavailable, page_picture, read_image, require_engine
from core.ingest.steps import count, step

# A line is a running header or footer when it is among the first or last lines of at least
# this share of the pages (and of three pages at least), its digits aside (page numbers).
RUNNING_SHARE = 0.6
RUNNING_MIN_PAGES = 3
EDGE_LINES = 2
_DIGITS = re.compile(r"\d+")

# A page's text is kept as a word per run when at least this share of its lines with words hold
# one word (and it has this many such lines at least); the lines rebuilt from the characters'
# places are taken only when they are at most this share as many, so a page that really is a
# column of single words keeps pypdf's text.
WORD_RUN_SHARE = 0.8
WORD_RUN_MIN_LINES = 6
REBUILT_LINES_SHARE = 0.5
# Two characters are on one line when their boxes' bottoms differ by less than this share of
# a character's height; two that PDFium puts no space between get one when the gap between
# them is wider than this share of it.
SAME_LINE_SHARE = 0.5
WORD_GAP_SHARE = 0.15
# PDFium must not be entered by two threads at once (the dashboard's sessions may read uploads
# at the same time), so every call into it holds this lock; OCR runs outside it.
_PDFIUM = threading.Lock()


def _read_pdf(path: Path, data: bytes) -> list[DocumentText]:
    from pypdf import PasswordType, PdfReader

    shown = shown_path(path)
    if not data.startswith(b"%PDF-"):
        raise UserInputError(f"{shown} is not a PDF file (it does not start with %PDF-).")
    # pypdf logs its repairs of damaged files; the refusal sentence below says it once.
    pypdf_logger = logging.getLogger("pypdf")
    saved_level = pypdf_logger.level
    pypdf_logger.setLevel(logging.CRITICAL)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            # A PDF locked with an owner password alone opens in any viewer (the password
            # only restricts printing or copying) and is read; one with a user password is not.
            raise UserInputError(
                f"{shown} is encrypted with a password needed to open it; ask for a copy "
                "without one, or open it and save it again without the password.")
        # NUL characters come from fonts without a text mapping; they carry no words.
        texts = [(page.extract_text() or "").replace("\x00", "") for page in reader.pages]
        parts = [DocumentText(text, number) for number, text in enumerate(texts, start=1)]
        unavailable: OcrUnavailable | None = None
        word_runs = [at for at, text in enumerate(texts) if kept_as_word_runs(text)]
        blank = [at for at, text in enumerate(texts) if not text.strip()]
        if word_runs or blank:
            with _Pdfium(data) as pdfium:
                _rebuild_word_runs(pdfium, word_runs, texts, parts)
                unavailable = _read_by_ocr(pdfium, blank, parts)
    except UserInputError:
        raise
    except Exception as exc:  # a damaged file can break any part of the parser
        raise UserInputError(f"{shown} is not a readable PDF ({_detail(exc)}).") from None
    finally:
        pypdf_logger.setLevel(saved_level)
    if unavailable is not None and not any(p.text.strip() for p in parts):
        raise UserInputError(f"{shown} has no text layer, and its pages cannot be read by OCR: "
                             f"{unavailable}.")
    return drop_running_lines(parts)


def _rebuild_word_runs(pdfium: _Pdfium, pages: list[int], texts: list[str],
                       parts: list[DocumentText]) -> None:
    """Replace the text of each page kept as a word per run by its rebuilt lines, when these
    really join its words (see REBUILT_LINES_SHARE)."""
    for at in pages:
        rebuilt = pdfium.lines(at)
        if rebuilt is not None and (
                _worded_lines(rebuilt) <= REBUILT_LINES_SHARE * _worded_lines(texts[at])):
            parts[at] = DocumentText(rebuilt, at + 1)


def _read_by_ocr(pdfium: _Pdfium, pages: list[int],
                 parts: list[DocumentText]) -> OcrUnavailable | None:
    """Read each page without a text layer by OCR, drawn whole, and mark it so. Returns why
    OCR could not run, if it could not; a page drawn blank is left empty."""
    if not pages:
        return None
    try:
        require_engine()
    except OcrUnavailable as exc:
        return exc
    unavailable = None
    for at in pages:
        with step("ocr"):  # drawing the page and reading it
            picture = pdfium.picture(at)
            if picture is None:
                continue
            count("ocr_pages")
            try:
                read = read_image(picture)
            except OcrUnavailable as exc:
                unavailable = exc
                continue
        if read.strip():
            parts[at] = DocumentText(read, at + 1, ocr=True)
    return unavailable


def _worded_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.split())


def kept_as_word_runs(text: str) -> bool:
    """Whether a page's extracted text has a line per word ("FedRAMP\\n \\nhas\\n \\n..."), as
    when every word and every space is a text run of its own that pypdf reads as a line."""
    worded = [line.split() for line in text.splitlines() if line.split()]
    single = sum(1 for words in worded if len(words) == 1)
    return len(worded) >= WORD_RUN_MIN_LINES and single >= WORD_RUN_SHARE * len(worded)


class _Pdfium:
    """The PDF opened with PDFium for what pypdf cannot do: a page drawn for OCR, or its text
    laid out by where each character is. A file or page PDFium cannot read gives neither
    (None), so the page keeps what pypdf read."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.document = None
        self.opened = False

    def __enter__(self) -> _Pdfium:
        return self

    def __exit__(self, *_) -> None:
        if self.document is not None:
            with _PDFIUM:
                self.document.close()

    def _page(self, at: int):
        import pypdfium2

        if not self.opened:
            self.opened = True
            try:
                self.document = pypdfium2.PdfDocument(self.data)
            except pypdfium2.PdfiumError:
                self.document = None
        if self.document is None or at >= len(self.document):
            return None
        return self.document[at]

    def picture(self, at: int) -> bytes | None:
        """Page `at` drawn whole as a PNG for OCR; None when it is blank or cannot be drawn."""
        import pypdfium2

        with _PDFIUM:
            try:
                page = self._page(at)
                if page is None:
                    return None
                try:
                    return page_picture(page)
                finally:
                    page.close()
            except pypdfium2.PdfiumError:
                return None

    def lines(self, at: int) -> str | None:
        """Page `at`'s text as lines rebuilt from its characters' boxes (see `rebuild_lines`)."""
        import pypdfium2
        import pypdfium2.raw as pdfium_c

        with _PDFIUM:
            try:
                page = self._page(at)
                if page is None:
                    return None
                textpage = page.get_textpage()
                try:
                    chars = [(chr(pdfium_c.FPDFText_GetUnicode(textpage, index)),
                              textpage.get_charbox(index, loose=True))
                             for index in range(textpage.count_chars())]
                finally:
                    textpage.close()
                    page.close()
            except pypdfium2.PdfiumError:
                return None
        return rebuild_lines(chars)


def rebuild_lines(chars: list[tuple[str, tuple[float, float, float, float]]]) -> str:
    """Text from characters in the order the page draws them, each with its box (left, bottom,
    right, top): a new line where the bottom moves by half a character's height (the taller of
    two, so a footnote mark stays on its line), a space where PDFium has one (its own or one it
    adds at a gap) or where the gap to the previous character is wider than WORD_GAP_SHARE of
    its height. Where a space or line end is placed is not used: some producers set a space
    apart from its words, and PDFium's line ends miss lines drawn from forms."""
    lines: list[str] = []
    line: list[str] = []
    previous: tuple[float, float, float, float] | None = None
    space = False
    for char, box in chars:
        if char.isspace():
            space = True
            continue
        if char < " ":
            continue  # control codes PDFium keeps for glyphs without a character
        left, bottom, _, top = box
        height = max(top - bottom, 1e-3)
        if previous is not None and abs(bottom - previous[1]) > SAME_LINE_SHARE * max(
                height, previous[3] - previous[1]):
            lines.append("".join(line))
            line, space = [], False
        elif previous is not None and (space or left - previous[2] > WORD_GAP_SHARE * height):
            line.append(" ")
        space = False
        line.append(char)
        previous = box
    lines.append("".join(line))
    text = "\n".join(lines)
    # Characters outside the Basic Multilingual Plane come as UTF-16 surrogate pairs.
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _key(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.split()).lower())


def drop_running_lines(parts: list[DocumentText]) -> list[DocumentText]:
    """The pages without the lines repeated at their top or bottom (page numbers aside)."""
    pages = [p for p in parts if p.text.strip()]
    if len(pages) < RUNNING_MIN_PAGES:
        return parts
    seen: Counter[str] = Counter()
    for part in pages:
        lines = [line for line in part.text.splitlines() if line.strip()]
        edges = {_key(line) for line in lines[:EDGE_LINES] + lines[-EDGE_LINES:]}
        seen.update(edges)
    running = {key for key, count in seen.items()
               if key and count >= max(RUNNING_MIN_PAGES, RUNNING_SHARE * len(pages))}
    if not running:
        return parts
    kept = []
    for part in parts:
        lines = part.text.splitlines()
        filled = [i for i, line in enumerate(lines) if line.strip()]
        edges = set(filled[:EDGE_LINES] + filled[-EDGE_LINES:])
        text = "\n".join(line for i, line in enumerate(lines)
                         if not (i in edges and _key(line) in running))
        kept.append(DocumentText(text, part.page, part.headings, part.ocr))
    return kept
