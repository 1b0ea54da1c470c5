"""Web pages (.html .htm) with Beautiful Soup: the visible text as Markdown-like text, h1-h6
as headings, paragraphs, list items, preformatted text, quotations and table rows as lines,
decoded in the charset the page declares."""

from __future__ import annotations

import codecs
import logging
import re
import warnings
from pathlib import Path
from typing import Any

from core.errors import UserInputError
from core.ingest import shown_path
from core.ingest.documents.chunks import DocumentText
from core.ingest.documents.text import MarkdownText

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
