"""Markdown and plain text (.md .txt): read as UTF-8, the `#` headings of Markdown found
outside fenced code blocks. Also `MarkdownText`, the Markdown-like text the Word and web-page
readers build block by block (headings as `#` lines, list items as `- ` lines, tables as pipe
tables), so that every format with headings is split like Markdown."""

from __future__ import annotations

import re
from pathlib import Path

from core.errors import UserInputError
from core.ingest import decode_utf8, shown_path
from core.ingest.documents.chunks import DocumentText, Heading

# A heading longer than this is cut in the section path (a whole paragraph styled as one).
MAX_HEADING_CHARS = 200
_ATX_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


def _read_text(path: Path, data: bytes) -> DocumentText:
    """A Markdown or plain-text file; the headings of a .md file are found."""
    suffix = path.suffix.lower()
    if b"\x00" in data:
        raise UserInputError(f"{shown_path(path)} is not a text file (it contains NUL bytes).")
    text = decode_utf8(path, data)
    return DocumentText(text, None, markdown_headings(text) if suffix == ".md" else ())


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
