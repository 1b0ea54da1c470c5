"""PDF (.pdf) with pypdf: one part per page, so each chunk keeps its page.

A PDF locked with an owner password only (printing or copying restricted; any viewer opens
it) is read; one that needs a password to open is refused by name. A page without a text
layer (a scan, a screenshot saved as PDF) is read from its images by OCR
(`core.ingest.documents.ocr`) and marked so. Lines repeated at the top or bottom of most pages
(running headers and footers: "November 2024  11", "Confidential") are dropped, so no chunk
starts with them."""

from __future__ import annotations

import io
import logging
import re
from collections import Counter
from pathlib import Path

from core.errors import UserInputError
from core.ingest import shown_path
from core.ingest.documents.chunks import DocumentText, _detail
from core.ingest.documents.ocr import OcrUnavailable, page_images, read_image

# A line is a running header or footer when it is among the first or last lines of at least
# this share of the pages (and of three pages at least), its digits aside (page numbers).
RUNNING_SHARE = 0.6
RUNNING_MIN_PAGES = 3
EDGE_LINES = 2
_DIGITS = re.compile(r"\d+")


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
        for at, page in enumerate(reader.pages):
            if texts[at].strip():
                continue
            try:
                images = page_images(page)
            except Exception:  # an image pypdf cannot decode carries no text we can read
                continue
            try:
                read = "\n".join(read_image(image) for image in images)
            except OcrUnavailable as exc:
                unavailable = exc
                continue
            if read.strip():
                parts[at] = DocumentText(read, at + 1, ocr=True)
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
