"""Views of a trace for people: rank moves, what-if boosts, comparisons, round progression.
Pure functions over RetrievalTrace data: nothing here searches again."""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from core.models import (
    FATE_MEANING,
    FATE_STATUS,
    Candidate,
    CurrentAnswer,
    FollowupFate,
    FollowupHit,
    RetrievalTrace,
    by_round,
)
from core.retrieval.stages import boost_followup_documents
from core.trace.context import (
    ContextEntry,
    answer_standing,
    context_entries,
    evidence_source,
    excerpt_label,
    one_line,
    response_date,
)


def move_label(before: int | None, after: int | None) -> str:
    """OpenSearch-style mark for a rank change: "Up 2", "Down 1", "=", "new", "out"."""
    if before is None:
        return "new"
    if after is None:
        return "out"
    if after < before:
        return f"Up {before - after}"
    if after > before:
        return f"Down {after - before}"
    return "="


@dataclass(frozen=True)
class RankedItem:
    """One candidate's place before and after the boost, with every score it had."""

    id: str
    label: str
    type: str
    first_stage_score: float | None
    rerank_score: float | None
    boost: float
    final_score: float | None
    rank_before: int
    rank_after: int
    in_context: bool

    @property
    def move(self) -> str:
        return move_label(self.rank_before, self.rank_after)


def base_score(candidate: Candidate) -> float:
    """The score before any boost: rerank relevance if a reranker ran, else first-stage."""
    if candidate.rerank_score is not None:
        return candidate.rerank_score
    return candidate.first_stage_score or 0.0


def ranked_items(candidates: Sequence[Candidate], context_ids: set[str]) -> list[RankedItem]:
    """The reranked list of a trace as rows, in boosted (final) order."""
    return [
        RankedItem(
            id=c.id, label=evidence_source(c), type=c.type,
            first_stage_score=c.first_stage_score, rerank_score=c.rerank_score, boost=c.boost,
            final_score=c.final_score, rank_before=c.rank_before_boost or i,
            rank_after=c.rank_after_boost or i, in_context=c.id in context_ids,
        )
        for i, c in enumerate(candidates, start=1)
    ]


def whatif_ranking(candidates: Sequence[Candidate], factor: float, cap: float | None
                   ) -> list[Candidate]:
    """Re-rank from the trace's own scores with another follow-up document boost."""
    unboosted = [c.model_copy(update={"final_score": base_score(c), "boost": 1.0})
                 for c in sorted(candidates, key=lambda c: c.rank_before_boost or 0)]
    return boost_followup_documents(unboosted, factor, cap)


def entry_boost(candidates: Sequence[Candidate], candidate_id: str, top_n: int,
                cap: float | None, *, max_factor: float = 100.0) -> float | None:
    """The smallest boost at which this follow-up document enters the top `top_n`, or None
    when no boost up to `max_factor` (or the cap) gets it there."""
    target = next(c for c in candidates if c.id == candidate_id)
    base = base_score(target)
    if base <= 0:
        return None
    # The rank can only change where the target's boosted score crosses another base score.
    factors = sorted({1.0} | {base_score(c) / base * (1 + 1e-9) for c in candidates
                              if base_score(c) > base and base_score(c) / base <= max_factor})
    for factor in factors:
        ranked = whatif_ranking(candidates, factor, cap)
        if candidate_id in [c.id for c in ranked[:top_n]]:
            return factor
    return None


@dataclass(frozen=True)
class ComparedItem:
    id: str
    label: str
    rank_a: int | None
    rank_b: int | None

    @property
    def move(self) -> str:
        return move_label(self.rank_a, self.rank_b)


def context_items(trace: RetrievalTrace) -> list[tuple[str, str]]:
    """(id, label) of everything in the context, excerpts then follow-ups."""
    items = [(c.id, evidence_source(c)) for c in trace.evidence]
    items += [(f.id, f"{f.source}: round {f.round_number} follow-up") for f in trace.followups]
    return items


def compare_traces(a: RetrievalTrace, b: RetrievalTrace) -> list[ComparedItem]:
    """Everything in either context with its position in each: shared, only A, only B."""
    ranks_a = {item_id: i for i, (item_id, _) in enumerate(context_items(a), start=1)}
    ranks_b = {item_id: i for i, (item_id, _) in enumerate(context_items(b), start=1)}
    labels = dict(context_items(a)) | dict(context_items(b))
    order = list(ranks_a) + [i for i in ranks_b if i not in ranks_a]
    return [ComparedItem(i, labels[i], ranks_a.get(i), ranks_b.get(i)) for i in order]


@dataclass(frozen=True)
class RoundRow:
    """One follow-up response linked to the criterion, and what this strategy did with it."""

    followup: FollowupHit
    status: str  # FATE_STATUS of its fate
    reason: str
    fate: FollowupFate | None = None


def round_progression(linked: Sequence[FollowupHit], trace: RetrievalTrace) -> list[RoundRow]:
    """Every linked round in time order, with its fate in the trace's strategy."""
    in_context = {f.id: f for f in trace.followups}
    dropped = {d.followup.id: d.reason for d in trace.dropped_followups}
    rows = []
    for hit in by_round(linked):
        fate = trace.fate(hit.id)
        if hit.id in in_context:
            hit, reason = in_context[hit.id], in_context[hit.id].tier_reason
        elif hit.id in dropped:
            reason = dropped[hit.id]
        elif fate == "not_found":
            reason = f"the {trace.strategy} strategy did not retrieve it"
        else:
            reason = f"the {trace.strategy} strategy: {FATE_MEANING[fate]}"
        rows.append(RoundRow(hit, FATE_STATUS[fate], reason, fate))
    return rows


def answer_diff(previous: str, current: str) -> list[tuple[str, str]]:
    """Word-level differences, in reading order: ("equal" | "delete" | "insert", text).

    Words are compared, not spaces, and a change broken only by one short shared word is
    kept whole, so a rewritten answer reads as a few runs rather than word confetti."""
    old, new = previous.split(), current.split()
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    blocks = [b for b in matcher.get_matching_blocks() if b.size]
    # A lone shared word of three letters or fewer inside a rewrite is noise, not agreement.
    blocks = [b for b in blocks if b.size > 1 or len(old[b.a]) > 3]
    parts: list[tuple[str, str]] = []
    i = j = 0
    for block in [*blocks, difflib.Match(len(old), len(new), 0)]:
        if block.a > i:
            parts.append(("delete", " ".join(old[i:block.a])))
        if block.b > j:
            parts.append(("insert", " ".join(new[j:block.b])))
        if block.size:
            parts.append(("equal", " ".join(old[block.a:block.a + block.size])))
        i, j = block.a + block.size, block.b + block.size
    return parts


def context_map(trace: RetrievalTrace) -> list[ContextEntry]:
    """<index_N> -> the chunk(s) and document it holds, in context order."""
    return context_entries(trace.evidence, trace.followups)


def kind_label(doc_type: str, round_number: int | None = None) -> str:
    """A record's type in words: "vendor document", "round 3 answer", "document sent with
    round 2", "SOC 2 summary (overview)"."""
    if doc_type.startswith("followup_response:"):
        return f"round {doc_type.split(':', 1)[1]} answer"
    if doc_type == "followup_document":
        return (f"document sent with round {round_number}" if round_number
                else "document sent with a round")
    if doc_type.startswith("soc2_summary:"):
        return f"SOC 2 summary ({doc_type.split(':', 1)[1]})"
    return {"tc_files": "vendor document"}.get(doc_type, doc_type or "record")


def _keyed(answer: FollowupHit | CurrentAnswer) -> str:
    """'; linked by control AC-7 (Unsuccessful Logon Attempts), proposed; sheet Cloud CRM':
    how an answer linked through a control is linked, and where it was answered."""
    parts = []
    if answer.linked_by_control is not None:
        parts.append(answer.linked_by_control.label())
    elif answer.control is not None:
        parts.append(f"control {answer.control.id}")
    if answer.sheet:
        parts.append(f"sheet {answer.sheet}")
    return "".join(f"; {p}" for p in parts)


def trace_text(trace: RetrievalTrace, width: int = 100) -> str:
    """`evidence retrieve --format text`: the criterion, its current answer, the earlier
    answers the retrieval saw, and the context's excerpts with their labels, wrapped."""
    def wrapped(text: str, indent: str = "    ") -> list[str]:
        return textwrap.wrap(one_line(text), width=width, initial_indent=indent,
                             subsequent_indent=indent) or [indent.rstrip()]

    lines = wrapped(f"Criterion: {trace.criterion}", "")
    lines.append(f"Strategy: {trace.strategy}; vendor {trace.vendor_id}")
    if trace.controls:
        lines += wrapped("Controls: " + "; ".join(
            f"{c.id}{f' ({c.title})' if c.title else ''}, {c.status}" for c in trace.controls),
            "")
    current = trace.current_answer
    lines.append("")
    if current is None:
        lines.append("Current answer: no questionnaire round answered this criterion.")
    else:
        lines += wrapped(f"Current answer: round {current.round_number} "
                         f"({response_date(current.answered_at)}), {current.source}"
                         f"{_keyed(current)}", "")
        lines += wrapped(f"Q: {current.question_text}") + wrapped(f"A: {current.answer_text}")
    seen = {h.id: h for h in [*trace.followups, *(d.followup for d in trace.dropped_followups)]}
    earlier = [h for h in by_round(seen.values(), newest_first=True)
               if current is None or h.id != current.id]
    if earlier:
        lines += ["", "Other answers to this criterion:"]
        for hit in earlier:
            where = "in the context" if trace.fate(hit.id) == "in_context" else "left out"
            said = answer_standing(hit.round_number, hit.timestamp, hit.later_answer, False)
            lines += wrapped(f"{said[0].upper()}{said[1:]}{_keyed(hit)}, {where}: "
                             f"\"{hit.answer_text}\"", "  ")
    lines += ["", "Excerpts in the context:" if trace.evidence
              else "No excerpt is in the context."]
    current_id = current.id if current else None
    for i, candidate in enumerate(trace.evidence, start=1):
        kind = kind_label(candidate.type, candidate.round_number)
        lines += wrapped(f"[{i}] {excerpt_label(candidate, current_id)} ({kind})", "")
        lines += wrapped(candidate.text)
    if trace.notes:
        lines += ["", *(n for note in trace.notes for n in wrapped(f"Note: {note}", ""))]
    return "\n".join(lines)
