"""The rows of a questionnaire's table printed in a PDF, read from where the words and the
ruling lines are on each page, for `pdf_tables` to read as answers.

A PDF holds words at positions and the lines drawn between them, not cells. The table is found
by its first column: question ids (`CEK-12.1`, `A&A-01.1`, `AC-2(1)`, `A.5.1`, `Q12`), each
standing apart at the start of its line, in one column. Its columns are the ruling lines where
the table is ruled, else the left edges its text is aligned on; a row begins at each id, or at
the ruling line above it where rows are ruled (an id may sit in the middle of a tall row). The
header may be printed on every page or once; a row cut by a page break goes on at the top of
the next page without an id, and is read as one row."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.ingest.rounds.layouts import CAIQ_ID, HECVAT_ID, ISO_ID, SIG_ID

# Id shapes beyond the workbooks' layouts: NIST SP 800-53 controls and their enhancements
# ("AC-2", "AC-2(1)") and numbered questions ("Q12", "Q3.1").
_NIST_ID = re.compile(r"^[A-Z]{2}-\d{1,2}(?:\(\d{1,2}\))?$")
_NUMBERED_ID = re.compile(r"^Q\d{1,4}(?:\.\d{1,3}){0,2}$")
ID_PATTERNS: tuple[re.Pattern[str], ...] = (CAIQ_ID, HECVAT_ID, SIG_ID, ISO_ID, _NIST_ID,
                                            _NUMBERED_ID)
ANY_ID = re.compile("|".join(f"(?:{p.pattern})" for p in ID_PATTERNS))
# Words that show a line of text names the table's columns.
_HEADER_WORDS = re.compile(r"\b(questions?|answers?|responses?|id|ref|reference|comments?|"
                           r"notes?|controls?|requirements?|applicab(le|ility)|justification)\b")

# Geometry, in PDF points or in heights of a line of text.
_SEGMENT_GAP = 0.8  # a gap this many heights wide parts two cells on one line
_RULE_MIN = 4.0  # a ruling line is at least this long
_THIN = 2.0  # and at most this thick
_SNAP = 2.0  # positions this close are one
_MIN_COLUMN = 10.0  # column edges closer than this are one
_STRADDLED = 0.05  # an edge crossed by words of more than this share of lines is no edge
_PARAGRAPH_GAP = 0.8  # a gap this many heights wide between lines of a cell: a new paragraph
_BREAK_GAP = 2.5  # a gap this many heights wide ends a table without rules
_HEADER_LINES = 5  # lines above the first id that may be its header
_RUNNING_SHARE = 0.6  # a footer is on the last line of at least this share of pages

# A letter alone that is no word (not "a", "i", nor an item "b." or "c)"): a word's end.
_STRAY_LETTER = re.compile(r"^[b-hj-z][,;:?!]?$")


@dataclass(frozen=True, slots=True, eq=False)
class Word:
    """A word and where it stands on its page, in points from the top left."""

    text: str
    x0: float
    x1: float
    top: float
    bottom: float

    @property
    def height(self) -> float:
        return max(self.bottom - self.top, 1.0)

    @property
    def middle(self) -> float:
        return (self.top + self.bottom) / 2


@dataclass(frozen=True, slots=True)
class Rule:
    """A ruling line drawn on a page."""

    at: float  # x of a vertical rule, y of a horizontal one
    start: float  # its top, or its left end
    end: float


@dataclass
class Page:
    """A page's words, its ruling lines and its lines of text."""

    number: int
    height: float
    words: list[Word]
    verticals: list[Rule]
    horizontals: list[Rule]
    lines: list[list[Word]] = field(default_factory=list)


@dataclass(frozen=True, eq=False)
class QuestionId:
    """A question id and its words (two where a narrow column wraps it: "A&A-" over
    "01.1")."""

    text: str
    words: tuple[Word, ...]

    @property
    def x0(self) -> float:
        return min(w.x0 for w in self.words)

    @property
    def x1(self) -> float:
        return max(w.x1 for w in self.words)

    @property
    def top(self) -> float:
        return min(w.top for w in self.words)


@dataclass
class PageTable:
    """The table on one page: its ids, the ruling lines across its id column, its header
    lines if the page prints the header, and how far down the page its rows reach."""

    page: Page
    ids: list[QuestionId]
    rows: list[float]
    header: list[list[Word]]
    top: float
    bottom: float


@dataclass
class Record:
    """One row of the table: its id, where the id is, and its words by column (with the
    page of each, a row cut by a page break having words on two)."""

    identifier: str
    page: int
    row: int
    cells: dict[int, list[tuple[int, Word]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Columns:
    """The table's columns by their left edges."""

    edges: list[float]

    def of(self, word: Word) -> int | None:
        x = word.x0 + 1
        if x < self.edges[0] - _SNAP:
            return None  # left of the table
        return max((i for i, edge in enumerate(self.edges) if x >= edge), default=0)


# Pages --------------------------------------------------------------------------------------

def read_page(page: Any, number: int) -> Page:
    """A page's words and ruling lines. Words part at a gap of 0.15 of the type size, as a
    PDF without space characters sets them."""
    words = [Word(text, float(w["x0"]), float(w["x1"]), float(w["top"]), float(w["bottom"]))
             for w in page.extract_words(
                 x_tolerance_ratio=0.15, y_tolerance=2, keep_blank_chars=False)
             if w["upright"] and (text := w["text"].replace("\x00", "").strip())]
    verticals: list[Rule] = []
    horizontals: list[Rule] = []
    for x0, top, x1, bottom in _strokes(page):
        if x1 - x0 <= _THIN and bottom - top >= _RULE_MIN:
            verticals.append(Rule((x0 + x1) / 2, top, bottom))
        elif bottom - top <= _THIN and x1 - x0 >= _RULE_MIN:
            horizontals.append(Rule((top + bottom) / 2, x0, x1))
    return Page(number, float(page.height), words, verticals,
                horizontals, _lines(words))


def _strokes(page: Any) -> Iterable[tuple[float, float, float, float]]:
    """The page's drawn lines as boxes (x0, top, x1, bottom): lines, rectangles thin enough
    to be lines, and the sides of outlined rectangles. A filled rectangle (a shaded cell, a
    highlighted word) rules nothing."""
    for line in page.lines:
        yield line["x0"], line["top"], line["x1"], line["bottom"]
    for rect in page.rects:
        x0, top, x1, bottom = rect["x0"], rect["top"], rect["x1"], rect["bottom"]
        if x1 - x0 <= _THIN or bottom - top <= _THIN:
            yield x0, top, x1, bottom
        elif rect.get("stroke"):
            yield from ((x0, top, x1, top), (x0, bottom, x1, bottom), (x0, top, x0, bottom),
                        (x1, top, x1, bottom))


def _lines(words: Iterable[Word]) -> list[list[Word]]:
    """Words grouped into lines of text, top to bottom, each left to right."""
    lines: list[list[Word]] = []
    for word in sorted(words, key=lambda w: (w.top, w.x0)):
        if lines and word.top < lines[-1][0].top + 0.5 * lines[-1][0].height:
            lines[-1].append(word)
        else:
            lines.append([word])
    return [sorted(line, key=lambda w: w.x0) for line in lines]


def _segments(line: Sequence[Word], verticals: Sequence[Rule]) -> list[list[Word]]:
    """A line's words parted where a wide gap or a ruling line is between two of them: the
    cells the line crosses."""
    parts: list[list[Word]] = [[line[0]]]
    for before, word in zip(line, line[1:], strict=False):
        ruled = any(before.x1 - 0.5 <= rule.at <= word.x0 + 0.5
                    and rule.start <= word.bottom and rule.end >= word.top for rule in verticals)
        if ruled or word.x0 - before.x1 >= _SEGMENT_GAP * min(before.height, word.height):
            parts.append([word])
        else:
            parts[-1].append(word)
    return parts


def line_key(line: Sequence[Word]) -> str:
    return re.sub(r"\d+", "#", " ".join(w.text for w in line).lower())


def running_footers(pages: Sequence[Page]) -> set[str]:
    """The last lines of most pages (page numbers aside), set apart from the text above
    them: running footers, which belong to no cell."""
    if len(pages) < 3:
        return set()
    seen: Counter[str] = Counter()
    for page in pages:
        if len(page.lines) >= 2:
            last, above = page.lines[-1], page.lines[-2]
            if last[0].top - max(w.bottom for w in above) >= last[0].height:
                seen[line_key(last)] += 1
    least = max(3, _RUNNING_SHARE * len(pages))
    return {key for key, count in seen.items() if count >= least}


# The id column ------------------------------------------------------------------------------

def page_ids(page: Page) -> list[QuestionId]:
    """The id-shaped cells at the start of lines: a line's first cell, standing apart from
    the rest of the line ("1.2 Scope" is a heading, not an id), alone or over the cell below
    it ("A&A-" over "01.1" in a narrow column)."""
    found: list[QuestionId] = []
    used: set[int] = set()
    firsts = [_segments(line, page.verticals)[0] for line in page.lines]
    for position, first in enumerate(firsts):
        if id(first[0]) in used:
            continue
        text = "".join(w.text for w in first).replace(" ", "")
        if ANY_ID.match(text):
            found.append(QuestionId(text, tuple(first)))
            continue
        if len(text) > 8:
            continue
        for below in firsts[position + 1:]:
            if below[0].top > first[0].bottom + first[0].height:
                break
            if below[0].x0 < first[-1].x1 and below[-1].x1 > first[0].x0:
                joined = text + "".join(w.text for w in below)
                if len(joined) <= 16 and ANY_ID.match(joined):
                    found.append(QuestionId(joined, tuple(first + below)))
                    used.update(id(w) for w in below)
                break
    return found


def id_column(ids: Sequence[QuestionId]) -> tuple[float, float] | None:
    """The x range of the column that holds the most ids."""
    best: list[QuestionId] = []
    for anchor in ids:
        group = [i for i in ids if i.x0 < anchor.x1 and i.x1 > anchor.x0]
        if len(group) > len(best):
            best = group
    return (min(i.x0 for i in best), max(i.x1 for i in best)) if best else None


def _cluster(values: Iterable[float], snap: float = _SNAP) -> list[float]:
    """Values sorted, each run of values within `snap` of the one before as its first."""
    starts: list[float] = []
    last: float | None = None
    for value in sorted(values):
        if last is None or value - last > snap:
            starts.append(value)
        last = value
    return starts


def page_table(page: Page, ids: list[QuestionId], span: tuple[float, float],
               printed: frozenset[str]) -> PageTable:
    """The table on one page. Until a header is found, it is looked for right above the
    first id (the ruled row above that id's row, or the lines above it); after, a header
    printed again is known by its lines (`printed`), and the rows between it and the first
    id go on from the page before."""
    left, right = span
    middle = (left + right) / 2
    rows = _cluster(r.at for r in page.horizontals if r.start <= middle <= r.end)
    id_rules = [r for r in page.verticals if left - 40 <= r.at <= right + 40]
    first = min(i.top for i in ids) if ids else page.height
    header: list[list[Word]] = []
    if printed:
        header = [line for line in page.lines
                  if line[0].top < first and line_key(line) in printed]
    elif ids and rows:  # the nearest ruled row above the first id's that names columns
        above = [y for y in rows if y <= first + 1]
        bounds = [above[0] - 200, *above] if above else []
        for upper, lower in list(zip(bounds, bounds[1:], strict=False))[::-1][:3]:
            band = [line for line in page.lines if upper - 1 <= line[0].top
                    and max(w.bottom for w in line) <= lower + 1]
            if _names_columns(band):
                header = band
                break
    elif ids:
        header = _lines_above(page.lines, first - 1)
    if not _names_columns(header):
        header = []
    top = max((max(w.bottom for w in line) for line in header), default=0.0)
    if id_rules:
        top = max(top, min(r.start for r in id_rules) - 1)
        bottom = max(r.end for r in id_rules) + 1
    else:
        bottom = page.lines[-1][0].bottom + 1 if page.lines else 0.0
    return PageTable(page, ids, rows, header, top, bottom)


def _names_columns(lines: Sequence[list[Word]]) -> bool:
    return any(_HEADER_WORDS.search(" ".join(w.text for w in line).lower()) for line in lines)


def _lines_above(lines: Sequence[list[Word]], start: float) -> list[list[Word]]:
    """The block of lines right above `start`, no wide gap between them."""
    block: list[list[Word]] = []
    for line in reversed([line for line in lines if max(w.bottom for w in line) <= start + 1]):
        lower = block[0][0].top if block else start
        if lower - max(w.bottom for w in line) > 1.2 * line[0].height:
            break
        block.insert(0, line)
        if len(block) >= _HEADER_LINES:
            break
    return block


# Columns ------------------------------------------------------------------------------------

def column_edges(tables: Sequence[PageTable], left: float) -> list[float] | None:
    """The columns' left edges over the whole table: the ruling lines when they part it into
    four columns at least, else the left edges its cells' text is aligned on (on at least a
    quarter of the rows, crossed by no more than a few lines' words)."""
    ruled: list[float] = []
    for table in tables:
        reach = table.header[0][0].top - 2 if table.header else table.top
        ruled.extend(r.at for r in table.page.verticals
                     if r.at >= left - 12 and r.end > reach + 1 and r.start < table.bottom)
    edges = _merge(_cluster(ruled))
    if len(edges) >= 4:
        return edges
    starts: list[float] = []
    lines: list[list[Word]] = []  # the lines crossing two cells at least: a title is none
    for table in tables:
        first = min((i.top for i in table.ids), default=table.top)
        for line in table.page.lines:
            if line in table.header or first - 1 <= line[0].top <= table.bottom:
                segments = _segments(line, table.page.verticals)
                starts.extend(s[0].x0 for s in segments)
                if len(segments) > 1:
                    lines.append(line)
    counts = Counter(round(x) for x in starts)
    least = max(2, sum(len(t.ids) for t in tables) // 4)
    aligned = [x for x in _cluster(starts) if x <= left + _SNAP or sum(
        n for value, n in counts.items() if x - 0.5 <= value <= x + _SNAP + 0.5) >= least]
    kept = [x for x in aligned if x <= left + _SNAP or sum(
        1 for line in lines if any(w.x0 < x - 1 and w.x1 > x + 1 for w in line)
    ) <= _STRADDLED * len(lines)]
    edges = [x for x in _merge(sorted({*edges, *kept})) if x >= left - 12]
    return edges if len(edges) >= 2 else None


def _merge(edges: Sequence[float]) -> list[float]:
    merged: list[float] = []
    for x in edges:
        if not merged or x - merged[-1] >= _MIN_COLUMN:
            merged.append(x)
    return merged


def header_texts(tables: Sequence[PageTable], columns: Columns) -> dict[int, str]:
    """Column -> its header's text, from the first page that prints the header. A title
    across several columns is no column's header."""
    for table in tables:
        if not table.header:
            continue
        texts: dict[int, list[Word]] = {}
        for line in table.header:
            for segment in _segments(line, table.page.verticals):
                under = {columns.of(w) for w in segment}
                if len(under) == 1 and None not in under:
                    texts.setdefault(next(iter(under)) or 0, []).extend(segment)
        return {column: cell_text(words) for column, words in texts.items()}
    return {}


# Rows ---------------------------------------------------------------------------------------

def _bands(table: PageTable) -> list[tuple[list[Word], QuestionId | None, bool]]:
    """The page's rows, top to bottom, each with the id it begins with and whether it is
    ruled off from the row above: the spans between ruling lines across the id column (and
    within a span holding several ids, from each id), or each line of text where the rows
    are not ruled."""
    lines = [line for line in table.page.lines
             if table.top - 1 <= line[0].middle <= table.bottom]
    if not table.rows:
        starting = {id(i.words[0]): i for i in table.ids}
        return [(line, next((starting[id(w)] for w in line if id(w) in starting), None), False)
                for line in lines]
    cuts = [table.top, *(y for y in table.rows if table.top + 1 < y < table.bottom - 1),
            table.bottom]
    words = [w for line in lines for w in line]
    bands: list[tuple[list[Word], QuestionId | None, bool]] = []
    for upper, lower in zip(cuts, cuts[1:], strict=False):
        ids = sorted((i for i in table.ids if upper <= i.words[0].middle < lower),
                     key=lambda i: i.top)
        starts = [upper, *(i.top - 1 for i in ids[1:]), lower]
        for at, (high, low) in enumerate(zip(starts, starts[1:], strict=False)):
            part = [w for w in words if high <= w.middle < low]
            if part:
                bands.append((part, ids[at] if at < len(ids) else None, True))
    return bands


def table_records(tables: Sequence[PageTable], columns: Columns, footers: set[str]
                  ) -> list[Record]:
    """The table's rows in order. A row begins at its id. A row without an id goes on with
    the row above; text in the id column that is no id (a section title, the text after the
    table) and, where rows are ruled, a ruled row without an id end it. At the top of a page,
    before its first id, the row cut by the page break goes on, and what stands in the id
    column there (a running title) is passed over."""
    records: list[Record] = []
    current: Record | None = None
    for table in tables:
        page = table.page
        passed = {id(w) for line in table.header for w in line}
        passed |= {id(w) for line in page.lines if line_key(line) in footers for w in line}
        id_words = {id(w) for ident in table.ids for w in ident.words}
        on_page = 0
        previous: float | None = None
        for words, ident, ruled in _bands(table):
            words = [w for w in words if id(w) not in passed]
            if not words:
                continue
            top = min(w.top for w in words)
            if not table.rows and previous is not None and (
                    top - previous > _BREAK_GAP * words[0].height):
                current = None  # a wide gap: what follows is no part of the table
            previous = max(w.bottom for w in words)
            cells = [(columns.of(w), w) for w in words if id(w) not in id_words]
            if ident is not None:
                on_page += 1
                current = Record(ident.text, page.number, on_page)
                records.append(current)
            elif on_page and (ruled or any(column == 0 for column, _ in cells)):
                current = None
                continue
            elif any(column == 0 for column, _ in cells):
                continue
            if current is not None:
                for column, word in cells:
                    if column:
                        current.cells.setdefault(column, []).append((page.number, word))
    return records


# Cells --------------------------------------------------------------------------------------

def bare(text: str) -> str:
    return text.strip(".,;:!?()[]'\"“”‘’").lower()


def cell_text(words: Iterable[Word], vocabulary: frozenset[str] = frozenset()) -> str:
    """A cell's words as text: lines joined by a space, paragraphs by an empty line, and a
    word broken at a line's end whole again: "re-" over "evaluates", or a word wider than its
    column, where the document spells it whole elsewhere ("documentati" over "on") or its
    end is a letter that is no word ("communicate" over "d,")."""
    parts: list[str] = []
    previous: list[Word] | None = None
    for line in _lines(words):
        text = " ".join(w.text for w in line)
        if previous is not None:
            last = previous[-1]
            if line[0].top - max(w.bottom for w in previous) > _PARAGRAPH_GAP * last.height:
                parts.append("\n\n")
            elif not (
                (last.text.endswith("-") and last.text[-2:-1].isalnum() and text[:1].isalnum())
                or (len(previous) == 1 and len(last.text) >= 5 and last.text[-1].isalpha()
                    and text[:1].islower()
                    and (bare(last.text + line[0].text) in vocabulary
                         or _STRAY_LETTER.match(line[0].text)))):
                parts.append(" ")
        parts.append(text)
        previous = line
    return "".join(parts).strip()
