"""The widgets every page shares: its header, its guard, the error block, and the table
columns that several pages show the same way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import streamlit as st

from core.errors import EvidenceError, UserInputError
from core.hashing import criterion_hash
from core.models import FollowupHit
from core.trace.context import later_note
from dashboard.text import plain

if TYPE_CHECKING:
    from core.criteria import CriterionEntry
    from core.review.verdicts import VerdictStatus
    from dashboard.selection import Selection

PICK_SELECTION = "Pick a vendor and enter a criterion in the sidebar."
PICK_VENDOR = "Pick a vendor in the sidebar."
NO_VERDICT_CELL = "—"
CRITERIA_SOURCES = {"vendor": "This vendor's criteria",
                    "file": "A criteria file (.txt, .csv, .xlsx)"}


def selection_caption(chosen: Selection, *, with_hash: bool = False) -> str:
    """'Vendor **V** · strategy **S** · criterion: C', every part markdown-escaped; with the
    criterion hash after it when asked."""
    caption = (f"Vendor **{plain(chosen.vendor_id)}** · strategy **{plain(chosen.strategy)}** · "
               f"criterion: {plain(chosen.criterion)}")
    return caption + (f" (hash `{criterion_hash(chosen.criterion)}`)" if with_hash else "")


def vendor_caption(vendor_id: str) -> str:
    return f"Selected vendor: **{plain(vendor_id)}**"


def header(title: str, shown: Selection | str | None = None, *,
           with_hash: bool = False) -> None:
    """The page title and, under it, what the page is about: the sidebar's selection, or one
    vendor (a page that needs no criterion), or nothing yet."""
    st.title(title)
    if isinstance(shown, str):
        st.caption(vendor_caption(shown))
    elif shown is not None:
        st.caption(selection_caption(shown, with_hash=with_hash))


def require_selection(chosen: Selection | None) -> Selection:
    """The guard of a page about one criterion: without a vendor and a criterion it says so
    and stops."""
    if chosen is None:
        st.info(PICK_SELECTION)
        st.stop()
    return chosen


def require_vendor(vendor: str | None) -> str:
    """The guard of a page about one vendor: without one it says so and stops."""
    if vendor is None:
        st.info(PICK_VENDOR)
        st.stop()
    return vendor


def choose_criteria(key: str, own: Sequence[CriterionEntry],
                    read_file: Callable[[str, bytes], list[CriterionEntry]]
                    ) -> list[CriterionEntry] | None:
    """The criteria a page works on: the vendor's own (the sidebar's list), or an uploaded
    criteria file (one criterion per line, or a .csv/.xlsx with a criterion column and
    optional id and question columns), which is then kept as used with the vendor. None,
    with the reason shown, when there are none to use yet."""
    source = st.radio("Criteria", list(CRITERIA_SOURCES), format_func=CRITERIA_SOURCES.get,
                      horizontal=True, key=f"{key}_criteria_source")
    if source == "vendor":
        if not own:
            st.info("No criteria are used with this vendor yet; upload a criteria file "
                    "instead.")
            return None
        return list(own)
    upload = st.file_uploader(
        "Criteria file: one criterion per line (.txt), or a .csv or .xlsx file with a "
        "criterion column (and optional id and question columns)",
        type=["txt", "csv", "xlsx"], key=f"{key}_criteria_file")
    if upload is None:
        st.info("Upload a criteria file to use it.")
        return None
    try:
        return read_file(upload.name, upload.getvalue())
    except EvidenceError as exc:
        show_error(exc, "The criteria file could not be read")
        return None


def verdict_cell(status: VerdictStatus | None) -> str:
    """A stored verdict in a table cell, as it counts: 'MET', 'NOT_MET (stale)',
    'INCONCLUSIVE (unverified: the model said MET)', or '—' for none."""
    if status is None or status.verdict is None:
        return NO_VERDICT_CELL
    return status.verdict.counted_text + (" (stale)" if status.stale else "")


def error_sentence(exc: EvidenceError, failed: str) -> str:
    """A refusal as it is (the user can fix it); any other library error after `failed: `."""
    return str(exc) if isinstance(exc, UserInputError) else f"{failed}: {exc}"


def show_error(exc: EvidenceError, failed: str) -> None:
    """The error block: one sentence, never a traceback."""
    st.error(error_sentence(exc, failed))


def stop_on_error(exc: EvidenceError, failed: str) -> NoReturn:
    """The error block, then the page stops: nothing below it can be drawn."""
    show_error(exc, failed)
    st.stop()


# Table columns shown alike on several pages. Functions, so every table gets its own config.

def round_column() -> Any:
    return st.column_config.NumberColumn("Round", format="%d")


def tier_column() -> Any:
    return st.column_config.TextColumn("Tier")


def tier_reason_column() -> Any:
    return st.column_config.TextColumn("Why this tier", width="large")


def answered_at_column() -> Any:
    return st.column_config.TextColumn("Answered at")


def found_by_column() -> Any:
    return st.column_config.TextColumn(
        "Found by", help="hash: metadata lookup by criterion hash; semantic: in the semantic "
                         "search window; first_stage: in the first-stage hits; near_copy: "
                         "linked to a typo of this criterion")


def question_column() -> Any:
    return st.column_config.TextColumn("Question asked", width="medium")


def answer_column(width: Literal["small", "medium", "large"] = "large") -> Any:
    return st.column_config.TextColumn("Vendor's answer", width=width)


def question_similarity_column(threshold: object = None, *, bar: bool = False) -> Any:
    """The follow-up's question against the criterion, 0..1; a bar where rows are compared,
    and the tier threshold in the help when given."""
    help_text = "difflib ratio of the follow-up's question to the criterion text"
    if threshold is not None:
        help_text += f"; at or above {threshold} means high"
    if bar:
        return st.column_config.ProgressColumn("Question similarity", format="%.2f",
                                               min_value=0.0, max_value=1.0, help=help_text)
    return st.column_config.NumberColumn("Question similarity", format="%.2f", help=help_text)


def first_stage_column(scored: Literal["answer", "chunk"]) -> Any:
    """First-stage cosine similarity of the criterion and an answer or a chunk; a follow-up
    answer the strategy did not score has none."""
    help_text = f"cosine similarity of criterion and {scored} embeddings (1 - cosine distance)"
    if scored == "answer":
        help_text += "; empty when the strategy did not score it"
    return st.column_config.NumberColumn("First-stage cosine similarity", format="%.3f",
                                         help=help_text)


def followup_columns(similarity: Any, answer_width: Literal["medium", "large"]) -> dict[str, Any]:
    """The columns every table of follow-ups shows, under the keys its rows use; `similarity`
    is the question-similarity column the page wants."""
    return {
        "round": round_column(),
        "tier": tier_column(),
        "tier_reason": tier_reason_column(),
        "question_similarity": similarity,
        "first_stage_score": first_stage_column("answer"),
        "found_by": found_by_column(),
        "question": question_column(),
        "answer": answer_column(answer_width),
    }


def standing_words(hit: FollowupHit, current_id: str | None) -> str:
    """"current answer", "earlier answer: round 5 (2024-02-12) answered this criterion
    later", or "" for an answer of the newest round that is not the one shown first."""
    if hit.later_answer is not None:
        return f"earlier answer: {later_note(hit.later_answer)}"
    return "current answer" if hit.id == current_id else ""


def standing_column() -> Any:
    return st.column_config.TextColumn(
        "Standing", help="the current answer is the criterion's newest; an earlier answer "
                         "came before a later round answered the criterion")
