"""Judging excerpts for the relevance lab: beside each excerpt a page shows for the sidebar's
criterion, its grade (0 to 3) is set with one click and kept in the store. A grade follows the
excerpt's text, and the grades are read afresh from the store on every run, so a grade set on
one page (or from the command line) shows on every other page at once and counts on the
Strategy quality page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st

from core.errors import EvidenceError
from core.models import Candidate, FollowupHit
from core.outputs.relevance import GRADE_LABELS, GRADES, Judgment, Judgments, excerpt_sha, judge
from core.trace.context import evidence_source
from dashboard import auth, resources, widgets
from dashboard.selection import Selection
from dashboard.text import plain

TITLE = "Judge these excerpts"
TEXT_PX = 110  # a longer excerpt's text scrolls within this height
SHORT_TEXT = 300  # characters shown whole, without a scroll
# What the last click left for the page to show when its grade could not be recorded.
REFUSED_KEY = "judging_refused"


@dataclass(frozen=True)
class Excerpt:
    """One excerpt to judge: its id, where the page shows it, the source it came from, and
    the text its grade follows."""

    id: str
    where: str
    source: str
    text: str


def chunk_excerpt(candidate: Candidate, where: str) -> Excerpt:
    """A document excerpt (or a follow-up answer ranked as one), graded by its text."""
    return Excerpt(id=candidate.id, where=where, source=evidence_source(candidate),
                   text=candidate.text)


def followup_excerpt(hit: FollowupHit, where: str) -> Excerpt:
    """A follow-up answer, graded by its content (question and answer) as the context holds
    it; its source names the round unless the questionnaire's name already does."""
    named = f"round {hit.round_number}" in hit.source.lower()
    return Excerpt(id=hit.id, where=where,
                   source=hit.source if named else f"{hit.source}, round {hit.round_number}",
                   text=hit.content)


def person_judgments(vendor_id: str) -> list[Judgment]:
    """Every grade a person gave for the vendor's excerpts, read afresh from the store."""
    return Judgments(resources.get_workbench().store, vendor_id).all()


def grades(vendor_id: str, criterion: str) -> dict[str, int]:
    """excerpt sha -> the grade a person gave it for the criterion, read afresh."""
    return Judgments(resources.get_workbench().store, vendor_id).grades(criterion)


def widget_key(page: str, excerpt: Excerpt) -> str:
    return f"judge_{page}_{excerpt.id}"


def record_grade(vendor_id: str, criterion: str, excerpt: Excerpt, key: str) -> None:
    """Record the grade just clicked (run before the page is drawn again, so it shows at
    once); a second click on the chosen grade leaves the stored one as it is. A refusal is
    kept for the page to show."""
    state = st.session_state
    state.pop(REFUSED_KEY, None)
    grade = state.get(key)
    if grade is None:
        return
    try:
        judge(resources.get_workbench().store, vendor_id, criterion, excerpt.id, excerpt.text,
              grade, source=excerpt.source, reviewer=auth.identity() or "")
    except EvidenceError as exc:
        state[REFUSED_KEY] = widgets.error_sentence(exc, "The grade was not recorded")
        return
    auth.record("judge", vendor=vendor_id, criterion=criterion,
                detail=f"grade {grade} for {excerpt.source or excerpt.id}")


def judged_count(shown: Sequence[Excerpt], graded: dict[str, int]) -> int:
    return sum(excerpt_sha(e.text) in graded for e in shown)


def judge_excerpts(chosen: Selection, excerpts: Sequence[Excerpt], *, page: str,
                   about: str) -> None:
    """The section "Judge these excerpts": each excerpt with its text and its grade, set with
    one click. `about` says which excerpts the page lists."""
    shown = list({e.id: e for e in excerpts}.values())
    if not auth.may("judge", chosen.vendor_id):
        return  # grading is a reviewer's: a viewer reads the page without the grade buttons
    with st.expander(TITLE):
        if not shown:
            st.markdown("This page shows no excerpt to judge for this criterion and strategy.")
            return
        try:
            graded = grades(chosen.vendor_id, chosen.criterion)
        except EvidenceError as exc:
            widgets.show_error(exc, "The grades could not be read")
            return
        scale = ", ".join(GRADE_LABELS[g] for g in GRADES)
        st.caption(f"{about} Grade each for this criterion with one click ({scale}); "
                   f"judged so far: {judged_count(shown, graded)} of {len(shown)}. A grade "
                   "follows the excerpt's text: it shows wherever the excerpt is shown and "
                   "counts on the Strategy quality page.")
        refused = st.session_state.pop(REFUSED_KEY, None)
        if refused:
            st.error(refused)
        for excerpt in shown:
            key = widget_key(page, excerpt)
            # The store decides what is selected, whatever this session last clicked.
            st.session_state[key] = graded.get(excerpt_sha(excerpt.text))
            with st.container(border=True):
                st.markdown(f"**{plain(excerpt.where)}** · {plain(excerpt.source)}")
                st.segmented_control(
                    f"Grade of {excerpt.id}", GRADES, format_func=GRADE_LABELS.get, key=key,
                    label_visibility="collapsed", on_change=record_grade,
                    args=(chosen.vendor_id, chosen.criterion, excerpt, key))
                if len(excerpt.text) <= SHORT_TEXT:
                    st.caption(plain(excerpt.text))
                else:
                    with st.container(height=TEXT_PX, border=False):
                        st.caption(plain(excerpt.text))
