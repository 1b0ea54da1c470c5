"""What the readers hand on and what is made of it: a document's text in parts (one per PDF
page) with its headings, the section path in force at each heading, langchain's splitter and
the chunks stored, each with its page and section. Also the short detail a reader's refusal
ends with."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# Documents whose text is Markdown, or is turned into it: split at their headings.
MARKDOWN_SUFFIXES = (".md", ".docx", ".html", ".htm")
SECTION_SEPARATOR = " > "


@dataclass(frozen=True)
class Chunk:
    """One piece of a document as stored: its text, the PDF page it is on, and the heading
    path in force where it starts ("Access control > Passwords"; None before any heading)."""

    text: str
    page: int | None = None
    section: str | None = None
    ocr: bool = False  # read by OCR from a page without a text layer


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
    ocr: bool = False  # read by OCR from the page's image: it has no text layer


def _detail(exc: BaseException) -> str:
    """A parser's complaint as a short phrase for the end of a refusal sentence."""
    return " ".join(str(exc).split())[:120] or type(exc).__name__


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
        chunks.append(Chunk(piece, part.page, paths[at][1] if at >= 0 else None, part.ocr))
    return chunks


def make_splitter(chunk_size: int, chunk_overlap: int, suffix: str):
    """langchain's recursive splitter; markdown-aware separators for .md files and for the
    Markdown-like text made from .docx and .html files."""
    from langchain_text_splitters import MarkdownTextSplitter, RecursiveCharacterTextSplitter

    if suffix in MARKDOWN_SUFFIXES:
        return MarkdownTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    return RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
