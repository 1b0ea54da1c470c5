"""The layout of a table nobody described, guessed from its cells: the header row wherever it
is, a column of question ids, the question column and the answer (the vendor's free text,
with short status columns such as Yes/No, responsibility or applicability joined before it).

A guess is made only when it is confident: a column whose cells are shaped like question ids
(`AC-2(1)`, `CEK-12.1`, `A.5.1`, `Q12`) in most rows below a header, a question filled in
nearly every such row, and an answer column. Otherwise the guess says why not, so the refusal
can tell the reviewer which columns to map. The guess is a column mapping by header text, so
it reads every sheet that has the same headers; a sheet without them is left out, by name."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from openpyxl.utils import get_column_letter

from core.ingest.rounds.mapping import ColumnMapping
from core.ingest.rounds.tables import HEADER_SEARCH_ROWS, Rows, header_key

# Question ids as questionnaires and control catalogues write them: NIST 800-53 `AC-2(1)`,
# CAIQ `CEK-12.1` / `A&A-01.1`, HECVAT `HFIH-01`, ISO 27001 `A.5.1` / `5.1.2`, SIG `A.1.2`,
# numbered questions `Q12`. A bare number is a row count, not an id.
ID_SHAPE = re.compile(
    r"^(?:[A-Z]{1,5}(?:&[A-Z]{1,3})?-\d{1,3}(?:\.\d{1,3})*[a-z]?(?:\s?\(\d{1,3}\))*"
    r"|[A-Z]{1,4}\.?\d{1,3}(?:\.\d{1,3}){0,3}[a-z]?"
    r"|(?:A\.)?\d{1,2}(?:\.\d{1,3}){1,3}"
    r"|Q\d{1,4}(?:\.\d{1,3})*)$")

NO_ID_COLUMN = "no column holds question ids"

# How far down a sheet the first id is looked for, and how many rows are profiled.
ID_SEARCH_ROWS = HEADER_SEARCH_ROWS + 20
PROFILE_ROWS = 400
MIN_IDS = 3  # fewer id-shaped cells than this is a list, not a questionnaire
ID_SHARE = 0.6  # of the column's filled cells below the header
QUESTION_FILLED = 0.8  # of the id rows: a questionnaire's question is always there

# A status column: short values from a small vocabulary (Yes/No, Customer/Shared, Y/N).
STATUS_MAX_LENGTH = 30
STATUS_MAX_WORDS = 4
STATUS_MAX_DISTINCT = 12
# A free-text column: what the vendor wrote, long on average or somewhere.
FREE_TEXT_MEAN = 25
FREE_TEXT_LONGEST = 60

_MARKS = {"x", "✓", "✔", "•"}
_YES_NO = {"yes", "no", "y", "n", "n/a", "na", "not applicable", "partial", "partially",
           "true", "false", "x", "in place", "planned", "implemented"}
_ANSWER_WORDS = ("answer", "response", "implementation", "comment", "note", "justification",
                 "explanation", "remark", "evidence", "detail", "description of",
                 "how ", "vendor")
_STATUS_WORDS = ("answer", "response", "status", "applicab", "implement", "responsib",
                 "complian", "in place", "yes", "y/n", "inherit", "provided", "met",
                 "controlled by", "third party", "3rd party", "owner")
# A status column that is an answer on its own (with no free text beside it).
_ANSWERING_WORDS = ("answer", "response", "status", "applicab", "implement", "complian",
                    "in place", "yes", "y/n", "met")


@dataclass(frozen=True)
class Guess:
    """A confident guess for one sheet: the mapping by header text (for every sheet) and by
    letter (as shown), the header row, and each mapped column's header."""

    sheet: str
    header_row: int
    by_header: ColumnMapping
    by_letter: ColumnMapping
    headers: dict[str, list[str]]  # field -> the header texts of its columns

    def described(self) -> str:
        """'id=A (Control ID), question=B (Control Name), answer=C+D (Responsibility Type,
        Implementation Notes)'."""
        return ", ".join(f"{field}={'+'.join(letters)} ({', '.join(self.headers[field])})"
                         for field, letters in self.by_letter.fields.items())


@dataclass(frozen=True)
class NoGuess:
    """Why one sheet's layout could not be guessed, in words that finish a sentence."""

    sheet: str
    why: str


@dataclass(frozen=True)
class _Column:
    number: int
    header: str
    filled: float
    mean: float
    longest: int
    status: bool
    yes_no: float
    repeats: bool  # few distinct values over many rows: a category (a control family)
    marks: bool  # only an "X" or a tick: which party a column names, not an answer

    @property
    def letter(self) -> str:
        return get_column_letter(self.number)

    @property
    def free_text(self) -> bool:
        return not self.status and (self.mean >= FREE_TEXT_MEAN or
                                    self.longest >= FREE_TEXT_LONGEST)


def _has(header: str, words: tuple[str, ...]) -> bool:
    return any(word in header for word in words)


def _id_column(grid: Rows) -> tuple[int, int] | NoGuess:
    """(column, first row) of the column holding the most id-shaped cells."""
    last = min(grid.max_row, PROFILE_ROWS + ID_SEARCH_ROWS)
    counts: Counter[int] = Counter()
    first: dict[int, int] = {}
    for row in range(1, last + 1):
        for column in range(1, min(grid.max_column, 30) + 1):
            if ID_SHAPE.match(grid.text_or_blank(row, column)):
                counts[column] += 1
                first.setdefault(column, row)
    usable = [(count, -column) for column, count in counts.items()
              if count >= MIN_IDS and first[column] <= ID_SEARCH_ROWS]
    if not usable:
        return NoGuess(grid.title, f"{NO_ID_COLUMN} (such as AC-2(1), CEK-12.1, A.5.1 or Q12)")
    _, negative = max(usable)
    return -negative, first[-negative]


def _header_row(grid: Rows, id_column: int, first_id: int) -> int | None:
    """The row above the first id that names at least two columns, the id's among them."""
    for row in range(first_id - 1, max(0, first_id - 6), -1):
        texts = [grid.text_or_blank(row, c) for c in range(1, grid.max_column + 1)]
        named = [t for t in texts if t and len(t) <= 120]
        if len(named) >= 2 and texts[id_column - 1] and not ID_SHAPE.match(
                texts[id_column - 1]):
            return row
    return None


def _profile(grid: Rows, column: int, header: str, rows: list[int]) -> _Column:
    values = [grid.text_or_blank(row, column) for row in rows]
    filled = [v for v in values if v]
    lengths = [len(v) for v in filled]
    distinct = {v.lower() for v in filled}
    short = bool(filled) and all(len(v) <= STATUS_MAX_LENGTH and
                                 len(v.split()) <= STATUS_MAX_WORDS for v in filled)
    yes_no = sum(v.lower().rstrip(".") in _YES_NO for v in filled) / len(filled) if filled else 0
    # Short values that repeat, answer like Yes/No, or sit under a status's header.
    repeated = len(distinct) <= STATUS_MAX_DISTINCT and len(distinct) <= len(filled) / 2
    status = short and (repeated or yes_no >= 0.5 or _has(header_key(header), _STATUS_WORDS))
    return _Column(number=column, header=" ".join(header.split()),
                   filled=len(filled) / len(rows) if rows else 0,
                   mean=sum(lengths) / len(lengths) if lengths else 0,
                   longest=max(lengths, default=0), status=status, yes_no=yes_no,
                   repeats=len(filled) >= 6 and len(distinct) <= len(filled) / 2,
                   marks=bool(filled) and distinct <= _MARKS)


def guess_sheet(grid: Rows) -> Guess | NoGuess:
    """The layout of one sheet (or CSV table), or why it cannot be guessed."""
    found = _id_column(grid)
    if isinstance(found, NoGuess):
        return found
    id_column, first_id = found
    header_row = _header_row(grid, id_column, first_id)
    if header_row is None:
        return NoGuess(grid.title, f"no header row names the columns above the first id (row "
                                   f"{first_id}, column {get_column_letter(id_column)})")
    below = {row: grid.text_or_blank(row, id_column)
             for row in range(header_row + 1, min(grid.max_row, header_row + PROFILE_ROWS) + 1)}
    rows = [row for row, text in below.items() if ID_SHAPE.match(text)]
    filled_ids = sum(bool(text) for text in below.values())
    if len(rows) < MIN_IDS or len(rows) < ID_SHARE * filled_ids:
        return NoGuess(grid.title, f"column {get_column_letter(id_column)} holds ids in only "
                                   f"{len(rows)} of its {filled_ids} filled rows")
    columns = [_profile(grid, number, grid.text_or_blank(header_row, number), rows)
               for number in range(1, grid.max_column + 1) if number != id_column]
    columns = [c for c in columns if c.filled > 0 and c.header and not c.marks]
    keys = {c.number: header_key(c.header) for c in columns}
    texts = [c for c in columns if not c.status]
    answer = _answer_column(texts, keys)
    question_pool = [c for c in texts if c is not answer and c.filled >= QUESTION_FILLED
                     and not c.repeats and (answer is None or c.number < answer.number)]
    # The question follows its id where the table has one there.
    question_pool = [c for c in question_pool if c.number > id_column] or question_pool
    if not question_pool:
        return NoGuess(grid.title, "no column holds a question in nearly every row with an id")
    hinted = [c for c in question_pool if _has(keys[c.number], ("question", "requirement"))]
    question = hinted[0] if hinted else max(question_pool, key=lambda c: (c.mean, -c.number))
    statuses = [c for c in columns if c.status and c.number > question.number
                and (answer is None or c.number < answer.number or
                     _has(keys[c.number], _STATUS_WORDS))
                and (_has(keys[c.number], _STATUS_WORDS) or c.yes_no >= 0.5)]
    answers = [*statuses, *([answer] if answer is not None else [])]
    if answer is None and not any(c.yes_no >= 0.5 or _has(keys[c.number], _ANSWERING_WORDS)
                                  for c in statuses):
        answers = []  # an owner or a category alone is not the vendor's answer
    if not answers:
        return NoGuess(grid.title, f"no column right of the question ({question.letter}, "
                                   f"{question.header}) holds an answer")
    id_header = " ".join(grid.text_or_blank(header_row, id_column).split())
    chosen = {"id": [(get_column_letter(id_column), id_header)],
              "question": [(question.letter, question.header)],
              "answer": [(c.letter, c.header) for c in answers]}
    names = [header_key(h) for pairs in chosen.values() for _, h in pairs]
    by_letter = ColumnMapping({f: tuple(letter for letter, _ in pairs)
                               for f, pairs in chosen.items()})
    # By header text, so other sheets with the same headers are read alike; by letter where
    # a header repeats in the row (a text names one column only).
    row_keys = grid.row_keys(header_row, grid.max_column)
    by_header = ColumnMapping({
        f: tuple(header if row_keys.count(header_key(header)) == 1 and names.count(
            header_key(header)) == 1 else letter for letter, header in pairs)
        for f, pairs in chosen.items()})
    return Guess(sheet=grid.title, header_row=header_row, by_header=by_header,
                 by_letter=by_letter,
                 headers={f: [h for _, h in pairs] for f, pairs in chosen.items()})


def _answer_column(texts: list[_Column], keys: dict[int, str]) -> _Column | None:
    """The vendor's free text: the rightmost free-text column named like an answer, else the
    rightmost free-text column that is not filled in every row like a question is."""
    free = [c for c in texts if c.free_text]
    hinted = [c for c in free if _has(keys[c.number], _ANSWER_WORDS)
              and not _has(keys[c.number], ("question", "requirement"))]
    if hinted:
        return hinted[-1]
    if len(free) >= 2:
        return free[-1]
    return None
