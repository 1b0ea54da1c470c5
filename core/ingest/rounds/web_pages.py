"""A questionnaire published as a web page (Markdown, or HTML read as Markdown): its answers
keyed by question id, one per id, each with the section heading it stands under.

Vendors publish them in two layouts, and change from one to the other between versions:
- a table with an id column (`| Control Domain | Question ID | Question | Answer | ... |`),
  whose columns are read as any table of question ids (`id_tables`);
- a block per question: a line or heading that starts with the id ("**GNRL-01** — Solution
  Provider Name", "CAIQ ID: **AIS-01.2**", "### A&A-02.1 Are ..."), the question on that line
  or in the quotation or paragraph after it, then the answer ("**Answer:** Yes", or the
  paragraphs that follow) and its notes ("**Notes:** ...") until the next id or heading.

The page is parsed by markdown-it-py (CommonMark with tables), so emphasis, escapes and line
breaks inside a cell or a paragraph are read as a reader sees them, and every block keeps its
line in the file."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.errors import UserInputError
from core.ingest import decode_utf8
from core.ingest.rounds.answers import Layout, LayoutAnswer, LayoutRead, joined_answer, one_per_id
from core.ingest.rounds.id_tables import IdRow, generic_roles, row_answers, standard_roles
from core.ingest.rounds.layouts import CAIQ_ID, HECVAT_ID, SIG_ID

WEB_PAGE_SUFFIXES = (".md", ".html", ".htm")
MIN_IDS = 3  # answered ids for a page to be a questionnaire

# The ids a published page keys its answers by: CAIQ (`AIS-01.2`, `A&A-02.1`), HECVAT
# (`GNRL-01`), SIG (`A.1.2`) and NIST SP 800-53 controls (`AC-2`, `AC-2(1)`).
_NIST_ID = re.compile(r"^[A-Z]{2}-\d{1,2}(?:\s?\(\d{1,2}\))?$")
_PAGE_IDS = (CAIQ_ID, HECVAT_ID, SIG_ID, _NIST_ID)
_ID_TEXT = r"[A-Z&]{2,4}-\d{1,2}(?:\.\d{1,2})?(?:\s?\(\d{1,2}\))?|[A-V](?:\.\d{1,2}){1,4}"
# A block that starts with an id, after an optional label ("CAIQ ID:", "Question ID"), and
# what follows it on the line after a separator.
_LEADING_ID = re.compile(
    rf"^\s*(?:(?:caiq|hecvat|sig|control|question|q)\s*)?(?:id|ref(?:erence)?)?\s*[:#.]?\s*"
    rf"(?P<id>{_ID_TEXT})(?![\w.-])\s*(?:[\u2014\u2013:|.)-]\s*)?(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL)
_ANSWER_LABEL = re.compile(r"^\s*(?:answer|response|reply|vendor\s+answer|a)\s*[:\u2014-]\s*",
                           re.IGNORECASE)
_NOTE_LABEL = re.compile(r"^\s*(?:notes?|comments?|explanation|details?|additional\s+"
                         r"information)\s*[:\u2014-]\s*", re.IGNORECASE)
_QUESTION_LABEL = re.compile(r"^\s*(?:question|q)\s*[:\u2014-]\s*", re.IGNORECASE)
_FRONT_MATTER = re.compile(r"\A---\s*\n.*?\n---\s*\n", re.DOTALL)
_VERSION = re.compile(r"(?:\bv|\bversion\s+)?(\d+\.\d+(?:\.\d+)?)\b", re.IGNORECASE)

_PAGE_TABLE = Layout(key="web-page-table", family="questionnaire table", id_pattern=_NIST_ID,
                     headers={}, required=())
_PAGE_BLOCKS = Layout(key="web-page-blocks", family="questionnaire", id_pattern=_NIST_ID,
                      headers={}, required=())


@dataclass(frozen=True)
class PageQuestionnaire:
    """What a web page is as a questionnaire: its answers (`read`), or why it is not read as
    one (`reason`). `looks_like` says ids were found, so a page kept as a document is said to
    look like a questionnaire."""

    read: LayoutRead | None
    looks_like: bool
    reason: str


@dataclass(frozen=True)
class _Block:
    kind: str  # heading | paragraph | quote | item
    text: str
    line: int  # 1-based line in the file
    section: str  # the heading in force above it


def is_question_id(text: str) -> bool:
    return any(p.match(text) for p in _PAGE_IDS)


def _plain(token) -> str:
    """An inline token's text as a reader sees it: emphasis and links unmarked, breaks as
    spaces."""
    parts = []
    for child in token.children or []:
        if child.type in ("text", "code_inline", "html_inline"):
            parts.append(child.content if child.type != "html_inline" else "")
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
    return "".join(parts).strip()


def _parse(text: str):
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").parse(text)


def _tables(tokens) -> Iterator[tuple[list[str], list[tuple[int, list[str]]], str]]:
    """Each table: its header cells, its rows (line, cells) and the heading it is under."""
    section = ""
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.type == "heading_open":
            section = _plain(tokens[i + 1])
        if token.type != "table_open":
            i += 1
            continue
        header: list[str] = []
        rows: list[tuple[int, list[str]]] = []
        in_head = False
        cells: list[str] = []
        line = 0
        while tokens[i].type != "table_close":
            t = tokens[i]
            if t.type == "thead_open":
                in_head = True
            elif t.type == "thead_close":
                in_head = False
            elif t.type == "tr_open":
                cells, line = [], (t.map[0] + 1 if t.map else 0)
            elif t.type == "inline":
                cells.append(" ".join(_plain(t).split()))
            elif t.type == "tr_close":
                if in_head:
                    header = cells
                else:
                    rows.append((line, cells))
            i += 1
        yield header, rows, section
        i += 1


def _blocks(tokens) -> list[_Block]:
    """The page's headings, paragraphs, quotations and list items, in order."""
    blocks: list[_Block] = []
    section = ""
    depth: list[str] = []
    for i, token in enumerate(tokens):
        if token.type in ("blockquote_open", "list_item_open", "table_open"):
            depth.append(token.type)
        elif token.type in ("blockquote_close", "list_item_close", "table_close"):
            depth.pop()
        elif token.type == "inline" and "table_open" not in depth:
            opener = tokens[i - 1]
            kind = ("heading" if opener.type == "heading_open" else "quote"
                    if "blockquote_open" in depth else "item" if depth else "paragraph")
            text = _plain(token)
            if kind == "heading":
                section = " ".join(text.split())
            line = opener.map[0] + 1 if opener.map else 0
            blocks.append(_Block(kind, text, line, section))
    return blocks


def _table_answers(tokens, notes: list[str]) -> tuple[list[LayoutAnswer], Layout | None]:
    answers: list[LayoutAnswer] = []
    found_layout: Layout | None = None
    for header, rows, section in _tables(tokens):
        if not rows:
            continue
        width = max(len(header), *(len(cells) for _, cells in rows))
        id_column = next((c for c in range(width) if sum(
            is_question_id(cells[c]) for _, cells in rows if c < len(cells)) * 2 >= len(rows)),
            None)
        if id_column is None:
            continue
        # The id's column first, as `id_tables` reads it; the others keep their order.
        order = [id_column, *(c for c in range(width) if c != id_column)]
        headers = {n: header[c] for n, c in enumerate(order) if c < len(header) and header[c]}
        id_rows = [IdRow(cells[id_column], "", line,
                         {n: cells[c] for n, c in enumerate(order) if c < len(cells)
                          and cells[c]})
                   for line, cells in rows
                   if id_column < len(cells) and is_question_id(cells[id_column])]
        standard = standard_roles(headers)
        layout, roles = standard if standard is not None else (None, generic_roles(
            headers, id_rows, width))
        if roles is None:
            continue
        read, said = row_answers(id_rows, roles, layout)
        if section:
            read = [_in_section(a, section) for a in read]
        answers += read
        notes += said
        found_layout = found_layout or layout
    return answers, found_layout


def _in_section(answer: LayoutAnswer, section: str) -> LayoutAnswer:
    return LayoutAnswer(answer.questionnaire_id, answer.question, answer.answer, answer.sheet,
                        answer.row, {**answer.extras, "section": section}, answer.criterion)


def _block_answers(blocks: Sequence[_Block]) -> list[LayoutAnswer]:
    answers: list[LayoutAnswer] = []
    starts = [(i, m) for i, b in enumerate(blocks) if b.kind != "quote"
              for m in [_LEADING_ID.match(b.text)] if m and is_question_id(m["id"])]
    for n, (at, match) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(blocks)
        question = " ".join(match["rest"].split())
        body: list[_Block] = []
        for block in blocks[at + 1:end]:
            if block.kind == "heading":
                break
            body.append(block)
        answer_parts: list[str] = []
        note_parts: list[str] = []
        for block in body:
            for text in _labelled_lines(block.text):
                if not question and (block.kind == "quote" or _QUESTION_LABEL.match(text)):
                    question = _QUESTION_LABEL.sub("", text)
                    continue
                if _NOTE_LABEL.match(text):
                    note_parts.append(_NOTE_LABEL.sub("", text))
                elif note_parts:
                    note_parts.append(text)
                else:
                    answer_parts.append(_ANSWER_LABEL.sub("", text))
        answer = joined_answer(" ".join(answer_parts), " ".join(note_parts), None)
        if question and answer:
            section = blocks[at].section if blocks[at].kind != "heading" else ""
            answers.append(LayoutAnswer(
                questionnaire_id=match["id"].replace(" ", ""), question=question,
                answer=answer, sheet="", row=blocks[at].line,
                extras={"section": section} if section else {}))
    return answers


def _labelled_lines(text: str) -> list[str]:
    """A block's text as parts that each begin at a label ("Answer: No" and "Notes: ..." on
    two lines of one paragraph are two parts); lines without a label join the part above."""
    parts: list[str] = []
    for line in text.split("\n"):
        line = " ".join(line.split())
        if not line:
            continue
        if parts and not any(p.match(line) for p in (_ANSWER_LABEL, _NOTE_LABEL,
                                                     _QUESTION_LABEL)):
            parts[-1] += " " + line
        else:
            parts.append(line)
    return parts


def _family(answers: Sequence[LayoutAnswer], text: str) -> str:
    """The questionnaire the page answers, by its ids and its own words, with its version."""
    ids = [a.questionnaire_id for a in answers]
    family = ("CAIQ" if sum(bool(CAIQ_ID.match(i)) for i in ids) * 2 > len(ids)
              else "HECVAT" if sum(bool(HECVAT_ID.match(i)) for i in ids) * 2 > len(ids)
              else "SIG" if sum(bool(SIG_ID.match(i)) for i in ids) * 2 > len(ids)
              else "questionnaire")
    for line in text.splitlines()[:80]:
        if family.lower() in line.lower() or "questionnaire" in line.lower():
            version = _VERSION.search(line)
            if version and "lite" in line.lower() and family == "CAIQ":
                return f"CAIQ-Lite {version.group(1)}"
            if version:
                return f"{family} {version.group(1)}"
    return family


def is_web_page(path: Path | str) -> bool:
    return Path(path).suffix.lower() in WEB_PAGE_SUFFIXES


def page_text(path: Path, data: bytes) -> str:
    """A page's text as Markdown: a Markdown file as it is, a web page as the HTML reader
    turns it into Markdown (headings, paragraphs, quotations, pipe tables)."""
    if path.suffix.lower() in (".html", ".htm"):
        from core.ingest.documents.html import _read_html

        return _read_html(path, data).text
    return decode_utf8(path, data)


def read_page_questionnaire(name: str, text: str) -> PageQuestionnaire:
    """The answers of a questionnaire published as a page (its Markdown text), one per id,
    or why the page is not read as one."""
    text = _FRONT_MATTER.sub("", text, count=1)
    tokens = _parse(text)
    notes: list[str] = []
    tabled, layout = _table_answers(tokens, notes)
    blocked = _block_answers(_blocks(tokens))
    # The layout that holds more answers is the page's; a page in both keeps the table.
    answers, kind = (tabled, "table") if len(tabled) >= len(blocked) else (blocked, "blocks")
    if len(answers) < MIN_IDS:
        looks = bool(tabled or blocked)
        return PageQuestionnaire(None, looks, (
            f"only {len(answers)} answered question id(s) were found, and a questionnaire "
            f"page holds {MIN_IDS} at least") if looks else "no question ids with answers")
    try:
        answers = one_per_id(answers, notes)
    except UserInputError as exc:
        raise UserInputError(f"{name}, {exc}".replace("row ", "line ")) from None
    family = _family(answers, text)
    suffix = Path(name).suffix.lower()
    form = "HTML" if suffix in (".html", ".htm") else "Markdown"
    how = "a table" if kind == "table" else "a block per question"
    return PageQuestionnaire(
        LayoutRead(layout=(layout or _PAGE_TABLE) if kind == "table" else _PAGE_BLOCKS,
                   name=f"{family} web page ({form}, {how})", sheets=[],
                   answers=answers, notes=notes),
        True, "")
