"""Precedence: which follow-ups answer a criterion and in which order they stand.

Linking (a follow-up carries the criterion's hash, its canonical hash, or a questionnaire id
the criterion is mapped to; or its linked criterion text is this one with a typo), tiering
(seed 003's high / medium / low, the latest rounds kept, the merge under the round cap), the
reason each tier gives in words, and the text measures those reasons use."""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from cydifflib import SequenceMatcher  # difflib's, compiled: the same ratios

from core.config import Settings
from core.controls.answers import control_of
from core.hashing import TYPOGRAPHY, fold_typography, normalize_text
from core.models import (
    FOLLOWUP_SOURCE_TYPE,
    Candidate,
    ControlLinkReason,
    CurrentAnswer,
    DroppedFollowup,
    FollowupHit,
    LaterAnswer,
    by_round,
)
from core.retrieval.links import AnswerIndex
from core.retrieval.source import Query, StoredChunk
from core.retrieval.stages import RetrievalEnv, candidate_from_chunk
from core.store import followup_canonical_hash, is_withdrawn

TIER_ORDER = {"high": 0, "medium": 1, "control": 2, "low": 3}
# Text comparisons kept per process: the strategies shown side by side ask the same pairs.
SIMILARITY_CACHE = 8192
_WORD = re.compile(r"[a-z0-9]+")
_NFD_LABEL = "Unicode NFD form"


# Linking ---------------------------------------------------------------------------------

def is_linked(metadata: dict[str, Any], criterion_hash: str,
              canonical_hash: str | None = None,
              questionnaire_ids: Sequence[str] = ()) -> bool:
    """Whether a stored follow-up answers a criterion: it carries the criterion hash or,
    given the canonical hash, its criterion differs from this one only in typography (the
    same criterion hash always means the same canonical hash), or it answers one of the
    questionnaire ids the criterion is mapped to."""
    if metadata.get("criterion_question_hash") == criterion_hash:
        return True
    if questionnaire_ids and metadata.get("questionnaire_id") in questionnaire_ids:
        return True
    return canonical_hash is not None and followup_canonical_hash(metadata) == canonical_hash


def linked_by_id(metadata: dict[str, Any], criterion_hash: str, canonical_hash: str | None,
                 questionnaire_ids: Sequence[str]) -> str | None:
    """The questionnaire id a follow-up is linked by, when that (and not its criterion) is
    what links it."""
    qid = metadata.get("questionnaire_id")
    if not qid or qid not in questionnaire_ids:
        return None
    return None if is_linked(metadata, criterion_hash, canonical_hash) else str(qid)


def extract_by_hash(candidates: Sequence[Candidate], criterion_hash: str,
                    canonical_hash: str | None = None, questionnaire_ids: Sequence[str] = ()
                    ) -> tuple[list[Candidate], list[Candidate]]:
    """Seed 000: (follow-ups carrying the criterion hash, all the rest). Given the canonical
    hash, a follow-up whose criterion differs only in typography is extracted too, and one
    answering a questionnaire id the criterion is mapped to."""
    matched = [c for c in candidates
               if c.is_followup and is_linked(c.metadata, criterion_hash, canonical_hash,
                                              questionnaire_ids)]
    matched_ids = {c.id for c in matched}
    return matched, [c for c in candidates if c.id not in matched_ids]


def nearest_hash_linked(env: RetrievalEnv, query: Query, n: int) -> list[Candidate]:
    """Seed 003's hash-filtered vector search, computed exactly: the `n` follow-ups most
    similar to the query among those whose link carries the criterion's canonical hash or a
    questionnaire id the criterion is mapped to, ranked 1..n.

    The links name the matches (a metadata lookup kept per store state) and their vectors
    are scored here, so every match is ranked and the store runs no filtered vector search,
    whose cost grows with the collection, not with the handful of matches."""
    ids = [record_id for record_id, link in env.links().items()
           if link.canonical_hash == query.canonical_hash
           or (link.questionnaire_id and link.questionnaire_id in query.questionnaire_ids)]
    chunks = env.linked_records(ids) if ids else []
    if not chunks:
        return []
    vectors = np.asarray([c.embedding for c in chunks], dtype=np.float32)
    scores = vectors @ np.asarray(query.embedding, dtype=np.float32)
    order = sorted(range(len(chunks)), key=lambda i: (-float(scores[i]), chunks[i].id))[:n]
    return [candidate_from_chunk(chunks[i], score=float(scores[i]), rank=rank)
            for rank, i in enumerate(order, start=1)]


def fetch_vouched_followups(env: RetrievalEnv, query: Query
                            ) -> tuple[list[Candidate], list[Candidate]]:
    """(follow-ups linked to the criterion by hash, follow-ups linked to this criterion's
    text with a typo or other punctuation), found through each stored response's link (a
    metadata lookup, so no search window can miss one) and read in one call, scored against
    the query in Python so the trace can show their similarity.

    A follow-up whose criterion differs from this one only in typography (curly quotes, a
    zero-width space, another Unicode form) shares its canonical hash: it is linked by hash,
    not a near copy."""
    s = env.settings
    typos: dict[str, tuple[tuple[str, str], ...] | None] = {}
    linked_ids, near_ids = [], []
    for record_id, link in env.links().items():
        if (link.criterion_hash == query.criterion_hash
                or link.canonical_hash == query.canonical_hash
                or (link.questionnaire_id and link.questionnaire_id in query.questionnaire_ids)):
            linked_ids.append(record_id)
            continue
        text = link.criterion_text
        if not text:
            continue
        if text not in typos:
            # The same words (an empty list of corrections) differ only in punctuation here:
            # texts whose words differ only in typography were linked by hash above.
            typos[text] = _typos(query.linked_text, text, s.typo_word_similarity,
                                 s.typo_max_words)
        if typos[text] is not None:
            near_ids.append(record_id)
            env.typo_corrections[record_id] = list(typos[text])
    if not linked_ids and not near_ids:
        return [], []
    chunks = env.linked_records(linked_ids + near_ids)
    if not chunks:
        return [], []
    vectors = np.asarray([c.embedding for c in chunks], dtype=np.float32)
    scores = vectors @ np.asarray(query.embedding, dtype=np.float32)
    linked: list[Candidate] = []
    near: list[Candidate] = []
    wanted = set(linked_ids)
    for chunk, score in zip(chunks, scores, strict=True):
        candidate = candidate_from_chunk(chunk, score=float(score))
        (linked if chunk.id in wanted else near).append(candidate)
    return linked, near


def fetch_control_linked(env: RetrievalEnv, query: Query, linked: Sequence[Candidate]
                         ) -> tuple[list[Candidate], dict[str, ControlLinkReason]]:
    """The answers keyed by a control the criterion is mapped to (in any round, sheet or
    framework, through the crosswalk), found through each answer's link as a hash match is
    (a metadata lookup no search window can miss) and scored against the query; those
    already linked by hash or id are not fetched again. With the control each links by."""
    index = env.answers()
    if not index.has_controls:
        return [], {}
    controls = env.controls(query)
    if not controls:
        return [], {}
    taken = {c.id for c in linked}
    reasons: dict[str, ControlLinkReason] = {}
    for control in controls:
        for key in control.linked_keys():
            for followup_id in index.keyed_by(key):
                if followup_id in taken or followup_id in reasons:
                    continue
                link = index.links.get(followup_id)
                via = (f"{_framework_of(key)} {link.questionnaire_id}"
                       if key != control.key and link is not None and link.questionnaire_id
                       else None)
                reasons[followup_id] = ControlLinkReason(
                    id=control.id, title=control.title, status=control.status,
                    framework=control.framework, via=via)
    if not reasons:
        return [], {}
    chunks = env.linked_records(list(reasons))
    if not chunks:
        return [], {}
    vectors = np.asarray([c.embedding for c in chunks], dtype=np.float32)
    scores = vectors @ np.asarray(query.embedding, dtype=np.float32)
    found = [candidate_from_chunk(chunk, score=float(score))
             for chunk, score in zip(chunks, scores, strict=True)]
    linked_by = {c.id: reasons[c.id] for c in found}
    answers = Supersession.of(env)
    answers.control_linked, answers.control_reasons = [c.id for c in found], linked_by
    return found, linked_by


def _framework_of(key: str) -> str:
    """How a reason names the framework of an answer's control key."""
    prefix = key.split(":", 1)[0]
    return {"iso27001-2013": "ISO/IEC 27001:2013", "sp800-53": "NIST SP 800-53"}.get(
        prefix, prefix)


def control_tier(hits: Sequence[FollowupHit]) -> tuple[list[FollowupHit],
                                                       list[DroppedFollowup]]:
    """The control tier: each answer linked through a mapped control, its reason naming the
    control (and the sheet it was answered on); per control, the answers of the newest round
    that answered it are kept, whatever their sheets, and an earlier round's are dropped."""
    newest: dict[str, int] = {}
    for hit in hits:
        control = hit.linked_by_control.id if hit.linked_by_control else ""
        newest[control] = max(newest.get(control, 0), hit.round_number)
    kept, dropped = [], []
    for hit in hits:
        reason = hit.linked_by_control
        label = reason.label() if reason is not None else "linked by control"
        sheet = f"; answered on sheet {hit.sheet}" if hit.sheet else ""
        control = reason.id if reason is not None else ""
        tiered = hit.model_copy(update={"tier": "control", "typo_corrections": None,
                                        "tier_reason": f"{label}{sheet}: control"})
        if hit.round_number < newest[control]:
            dropped.append(DroppedFollowup(
                followup=tiered,
                reason=f"round {hit.round_number} answered control {control} before round "
                       f"{newest[control]}, whose answers to it are kept"))
        else:
            kept.append(tiered)
    return kept, dropped


def followup_hit(candidate: Candidate, query: Query, found_by: Sequence[str], *,
                 typo_corrections: list[tuple[str, str]] | None = None,
                 linked_by_control: ControlLinkReason | None = None) -> FollowupHit:
    """A follow-up as the query sees it: whether it is linked to the query's criterion (by
    the canonical hash, so a typographic variant of the criterion links as the criterion
    does), how, and how similar its question is to the query's text."""
    meta = candidate.metadata
    linked_text = meta.get("original_criterion_question_text") or None
    hash_match = is_linked(meta, query.criterion_hash, query.canonical_hash,
                           query.questionnaire_ids)
    variants = (typographic_differences(query.linked_text, str(linked_text))
                if hash_match and linked_text
                and meta.get("criterion_question_hash") != query.criterion_hash else [])
    return FollowupHit(
        id=candidate.id,
        round_number=int(meta["round_number"]),
        timestamp=str(meta.get("timestamp", "")),
        source=candidate.source,
        content=candidate.text,
        questionnaire_id=meta.get("questionnaire_id"),
        control=control_of(meta),
        linked_by_control=None if hash_match else linked_by_control,
        sheet=meta.get("origin_sheet") or None,
        criterion_question_text=linked_text,
        criterion_question_hash=meta.get("criterion_question_hash"),
        question_text=str(meta["question_text"]),
        answer_text=str(meta["answer_text"]),
        hash_match=hash_match,
        linked_by_id=linked_by_id(meta, query.criterion_hash, query.canonical_hash,
                                  query.questionnaire_ids) is not None,
        typographic_variants=variants,
        found_by=list(found_by),
        typo_corrections=typo_corrections,
        question_similarity=_question_similarity(query.text, str(meta["question_text"])),
        first_stage_score=candidate.first_stage_score,
        first_stage_rank=candidate.first_stage_rank,
    )


# Tiers -----------------------------------------------------------------------------------

def assign_tiers(hash_hits: Sequence[FollowupHit], semantic_hits: Sequence[FollowupHit],
                 criterion: str, settings: Settings) -> list[FollowupHit]:
    """Seed 003's tiers, each with its reason in words; a hit found twice appears once.

    A follow-up that carries the criterion hash is tiered by the hash rule even when only
    the semantic path found it (a path-1 limit can leave it out): seed 003's tier table
    reserves "low" for follow-ups with no hash match. A follow-up linked through the
    canonical hash (its criterion differs only in typography) is a hash match; its reason
    names the typography."""
    threshold = settings.fuzzy_match_threshold
    tiered: dict[str, FollowupHit] = {}
    linked_by_search = [h for h in semantic_hits if h.hash_match and
                        h.id not in {x.id for x in hash_hits}]
    for hit in [*hash_hits, *linked_by_search]:
        if hit.linked_by_id:
            tiered[hit.id] = hit.model_copy(update={
                "tier": "high", "typo_corrections": None,
                "tier_reason": f"linked by questionnaire id {hit.questionnaire_id}: high"})
            continue
        similar = hit.question_similarity >= threshold
        tier = "high" if similar else "medium"
        if hit.question_similarity >= 0.999:
            wording = "question unchanged"
        elif similar:
            wording = "question lightly edited"
        else:
            wording = "question reworded"
        sign = ">=" if similar else "<"
        how = (f"hash match after typography ({', '.join(hit.typographic_variants)})"
               if hit.typographic_variants else "hash match")
        tiered[hit.id] = hit.model_copy(update={
            "tier": tier,
            "tier_reason": f"{how}; {wording}, similarity {hit.question_similarity:.2f} "
                           f"{sign} {threshold:.2f}: {tier}",
            "typo_corrections": None,
        })
    for hit in semantic_hits:
        if hit.id in tiered:
            found_by = sorted(set(tiered[hit.id].found_by) | set(hit.found_by))
            tiered[hit.id] = tiered[hit.id].model_copy(update={"found_by": found_by})
            continue
        tiered[hit.id] = hit.model_copy(update={
            "tier": "low", "tier_reason": _low_tier_reason(hit, criterion, settings),
            # Spent once the reason is written: a tiered hit equals its stored form.
            "typo_corrections": None,
        })
    return list(tiered.values())


def keep_latest_rounds(hits: Sequence[FollowupHit], limit: int
                       ) -> tuple[list[FollowupHit], list[DroppedFollowup]]:
    """Seed 000: keep the `limit` latest responses by round number."""
    ordered = by_round(hits, newest_first=True)
    kept, rest = ordered[:limit], ordered[limit:]
    kept_rounds = ", ".join(str(h.round_number) for h in kept)
    dropped = [
        DroppedFollowup(
            followup=hit,
            reason=f"round {hit.round_number} is older than the {limit} latest kept "
                   f"(rounds {kept_rounds}); cap MAX_FOLLOWUP_ROUNDS={limit}",
        )
        for hit in rest
    ]
    return kept, dropped


def merge_tiers(hits: Sequence[FollowupHit], limit: int
                ) -> tuple[list[FollowupHit], list[DroppedFollowup]]:
    """Seed 003's merge: high > medium > low, newest first within a tier, at most `limit`.
    The answers of one round linked through one control (its sheets, its parts) take one
    place between them: they are one control's answer, not competitors."""
    ordered = sorted(by_round(hits, newest_first=True), key=_tier_rank)
    places: set[object] = set()
    kept, rest = [], []
    for hit in ordered:
        place = _place(hit)
        if place in places or len(places) < limit:
            places.add(place)
            kept.append(hit)
        else:
            rest.append(hit)
    summary = ", ".join(f"round {h.round_number} ({h.tier})" for h in kept)
    best_kept = min((_tier_rank(h) for h in kept), default=None)
    dropped = [
        DroppedFollowup(
            followup=hit,
            reason=f"{hit.tier} tier, round {hit.round_number}: the cap of {limit} "
                   f"(MAX_FOLLOWUP_ROUNDS) is filled by {summary}",
            fate="crowded_out" if best_kept is not None and best_kept < _tier_rank(hit)
            else "round_cap",
        )
        for hit in rest
    ]
    return kept, dropped


def _place(hit: FollowupHit) -> object:
    """The place a follow-up takes under the round cap: its own, or its round's control's."""
    if hit.tier == "control" and hit.linked_by_control is not None:
        return ("control", hit.round_number, hit.linked_by_control.id)
    return hit.id


def _tier_rank(hit: FollowupHit) -> int:
    return TIER_ORDER[hit.tier or "low"]


def competing_followup(hit: FollowupHit, criterion: str) -> FollowupHit:
    """A follow-up the semantic path saw but precedence does not vouch for, and why."""
    if not hit.criterion_question_text:
        why = "ad-hoc question (no criterion)"
    else:
        similarity = criterion_text_similarity(hit, criterion)
        why = (f"linked to a different criterion (similarity {similarity:.2f}, "
               "not a typo of this one)")
    return hit.model_copy(update={
        "tier": None,
        "tier_reason": f"no hash match, {why}; competes as ordinary evidence",
    })


def context_order(hits: Sequence[FollowupHit]) -> list[FollowupHit]:
    """The order follow-ups take in the XML context: ascending round (seed 000)."""
    return by_round(hits)


# Reasons ---------------------------------------------------------------------------------

# Supersession: which answer is the newest -------------------------------------------------

class Supersession:
    """Which stored answer is a criterion's newest, and which answers a later round answered
    after it: the one place either is decided.

    Two answers answer the same criterion when they share its canonical hash (the same
    criterion hash, whatever the typography) or its questionnaire id; the query's own answers
    are every answer linked to it (with a criteria file's questionnaire ids). The newest is
    the answer of the highest round (the latest timestamp, then the id, within it). An
    earlier answer is one of an earlier round than the newest: answers of one round are
    equals. A later answer need not correct the earlier one; a later round may answer
    another part of the criterion."""

    def __init__(self, index: AnswerIndex,
                 read: Callable[[Sequence[str]], list[StoredChunk]]) -> None:
        self.index = index
        self.read = read
        self._newest: dict[tuple[str, ...], StoredChunk | None] = {}
        # (answer, its round, the query's criterion and questionnaire ids) -> its later
        # answer: a run marks the same answers on its first-stage, reranked and context lists.
        self._later: dict[tuple[str, int, tuple[str, tuple[str, ...]] | None],
                          LaterAnswer | None] = {}
        # The answers linked to the query's criterion through a control it is mapped to
        # (set by `fetch_control_linked`): its answers where no hash or id links any.
        self.control_linked: list[str] = []
        self.control_reasons: dict[str, ControlLinkReason] = {}

    @classmethod
    def of(cls, env: RetrievalEnv) -> Supersession:
        """The environment's answers, their records read through its linked-record cache;
        one per run, so every stage asks the same records once."""
        if "supersession" not in env.kept:
            env.kept["supersession"] = cls(env.answers(), env.linked_records)
        return env.kept["supersession"]

    def answers_to(self, query: Query) -> list[str]:
        """The stored answers linked to the query's criterion."""
        return self.index.answering(query.canonical_hash, query.questionnaire_ids)

    def newest(self, ids: Sequence[str]) -> StoredChunk | None:
        """The newest of these answers whose record is stored (a withdrawn one is not)."""
        key = tuple(sorted(ids))
        if key not in self._newest:
            self._newest[key] = self._read_newest(ids)
        return self._newest[key]

    def _read_newest(self, ids: Sequence[str]) -> StoredChunk | None:
        rounds: dict[int, list[str]] = defaultdict(list)
        for followup_id in ids:
            number = self.index.round_of(followup_id)
            if number is not None:
                rounds[number].append(followup_id)
        for number in sorted(rounds, reverse=True):
            stored = [c for c in self.read(rounds[number])
                      if c.metadata.get("source_type") == FOLLOWUP_SOURCE_TYPE]
            if stored:
                return max(stored, key=lambda c: (str(c.metadata.get("timestamp", "")), c.id))
        return None

    def current(self, query: Query) -> CurrentAnswer | None:
        """The query's criterion's newest answer; None when no round answered it. Where no
        answer links by hash or id, the newest answer linked through a mapped control."""
        chunk = self.newest(self.answers_to(query))
        through_control = chunk is None and bool(self.control_linked)
        if through_control:
            chunk = self.newest(self.control_linked)
        if chunk is None:
            return None
        meta = chunk.metadata
        return CurrentAnswer(
            id=chunk.id, round_number=int(meta["round_number"]),
            answered_at=str(meta.get("timestamp", "")), source=str(meta.get("source", "")),
            question_text=str(meta.get("question_text", "")),
            answer_text=str(meta.get("answer_text", "")),
            questionnaire_id=meta.get("questionnaire_id") or None, content=chunk.text,
            control=control_of(meta), sheet=meta.get("origin_sheet") or None,
            linked_by_control=self.control_reasons.get(chunk.id) if through_control else None)

    def later_answer(self, followup_id: str, round_number: int, *, query: Query | None = None,
                     metadata: dict[str, Any] | None = None) -> LaterAnswer | None:
        """The newest answer to this answer's criterion when a later round gave it; None when
        this answer is the newest (or of the newest round), or answers no criterion."""
        key = (followup_id, round_number, None if query is None
               else (query.canonical_hash, query.questionnaire_ids))
        if key not in self._later:
            self._later[key] = self._later_answer(followup_id, round_number, query,
                                                  metadata or {})
        return self._later[key]

    def _later_answer(self, followup_id: str, round_number: int, query: Query | None,
                      metadata: dict[str, Any]) -> LaterAnswer | None:
        newest = self.newest(self._same_criterion(followup_id, query, metadata))
        if newest is None or newest.id == followup_id:
            return None
        newest_round = int(newest.metadata["round_number"])
        if newest_round <= round_number:
            return None
        return LaterAnswer(id=newest.id, round_number=newest_round,
                           answered_at=str(newest.metadata.get("timestamp", "")))

    def _same_criterion(self, followup_id: str, query: Query | None,
                        metadata: dict[str, Any]) -> list[str]:
        if query is not None:
            linked = self.answers_to(query)
            if followup_id in linked:
                return linked
        link = self.index.links.get(followup_id)
        if link is not None:
            canonical, questionnaire_id = link.canonical_hash, link.questionnaire_id
        else:  # an answer the links do not name: what its own record says it answers
            canonical = followup_canonical_hash(metadata) if metadata else None
            questionnaire_id = metadata.get("questionnaire_id")
        found = self.index.answering(canonical, [questionnaire_id] if questionnaire_id else [])
        # Per control: a later round's answer to the same control (any part, any sheet).
        return found + [i for i in self.index.same_control(followup_id) if i not in found]

    def mark_hits(self, hits: Sequence[FollowupHit] | None, query: Query
                  ) -> list[FollowupHit] | None:
        """The follow-ups, each with its later answer."""
        if hits is None:
            return None
        return [hit.model_copy(update={"later_answer": self.later_answer(
            hit.id, hit.round_number, query=query)}) for hit in hits]

    def mark_candidates(self, candidates: Sequence[Candidate], query: Query) -> list[Candidate]:
        """The candidates, each follow-up answer among them with its later answer."""
        marked = []
        for c in candidates:
            if c.is_followup and c.metadata.get("round_number") is not None:
                later = self.later_answer(c.id, int(c.metadata["round_number"]), query=query,
                                          metadata=c.metadata)
                if later != c.later_answer:  # a candidate already marked so is not copied
                    c = c.model_copy(update={"later_answer": later})
            marked.append(c)
        return marked

    def with_newest(self, excerpts: Sequence[Candidate], query: Query, budget: int,
                    shown: Sequence[str] = ()) -> list[Candidate]:
        """The excerpts with the newest answer to each earlier answer's criterion just ahead
        of it (moved up, or read and brought in), at most `budget` of them; an answer in
        `shown` (held elsewhere beside them) is not brought in again."""
        marked = self.mark_candidates(excerpts, query)
        placed: list[Candidate] = []
        for candidate in marked:
            if any(c.id == candidate.id for c in placed):
                continue
            later = candidate.later_answer
            if later is not None and later.id not in shown and not any(
                    c.id == later.id for c in placed):
                newest = next((c for c in marked if c.id == later.id), None)
                if newest is None:
                    newest = self._brought(later.id, candidate.id)
                if newest is not None:
                    placed.append(newest)
            placed.append(candidate)
        return placed[:budget]

    def _brought(self, newest_id: str, earlier_id: str) -> Candidate | None:
        """The newest answer's record as an excerpt no search ranked."""
        found = self.read([newest_id])
        if not found:
            return None
        return candidate_from_chunk(found[0]).model_copy(update={"brought_in": earlier_id})


def one_place_per_question(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates with one place for each question a round answered on several sheets:
    the best ranked of its answers keeps it (`with_other_sheets` puts the others beside)."""
    taken: set[tuple[object, str]] = set()
    kept: list[Candidate] = []
    for candidate in candidates:
        meta = candidate.metadata
        question = meta.get("questionnaire_id")
        if candidate.is_followup and question and meta.get("origin_sheet"):
            place = (meta.get("round_number"), str(question))
            if place in taken:
                continue
            taken.add(place)
        kept.append(candidate)
    return kept


def with_other_sheets(env: RetrievalEnv, excerpts: Sequence[Candidate]) -> list[Candidate]:
    """The excerpts with, beside each answer from a workbook's sheet, the same question's
    answers on the round's other sheets (an on-premises and a cloud sheet answer one control
    each for itself): one question's answers, not competitors for the excerpts' places, so
    they are not counted against them."""
    index = env.answers()
    placed: list[Candidate] = []
    seen = {c.id for c in excerpts}
    for candidate in excerpts:
        placed.append(candidate)
        meta = candidate.metadata
        sheet, question = meta.get("origin_sheet"), meta.get("questionnaire_id")
        if not candidate.is_followup or not sheet or not question:
            continue
        siblings = [i for i in index.answering(None, [str(question)])
                    if i not in seen and index.round_of(i) == meta.get("round_number")]
        for chunk in env.linked_records(siblings) if siblings else []:
            if chunk.metadata.get("origin_sheet") not in (None, sheet) and not is_withdrawn(
                    chunk.metadata) and chunk.metadata.get("source_type") == (
                    FOLLOWUP_SOURCE_TYPE):
                seen.add(chunk.id)
                placed.append(candidate_from_chunk(chunk).model_copy(
                    update={"other_sheet_of": candidate.id}))
    return placed


def _low_tier_reason(hit: FollowupHit, criterion: str, settings: Settings) -> str:
    if "near_copy" in hit.found_by:
        how = "found by its linked criterion text"
    else:
        where = f" at first-stage rank {hit.first_stage_rank}" if hit.first_stage_rank else ""
        how = f"found by semantic search{where}"
    if not hit.criterion_question_text:
        return f"no hash match (ad-hoc question, no criterion); {how}: low"
    corrections = (hit.typo_corrections if hit.typo_corrections is not None
                   else typo_corrections(criterion, hit.criterion_question_text,
                                         word_similarity=settings.typo_word_similarity,
                                         max_words=settings.typo_max_words))
    similarity = criterion_text_similarity(hit, criterion)
    if corrections:
        fixed = ", ".join(f"{typo} -> {word}" for typo, word in corrections)
        what = f"its criterion text differs only by a typo ({fixed})"
    elif corrections is not None:
        what = "its criterion text differs only in punctuation"
    elif similarity >= 0.9:
        what = f"its criterion text was edited (similarity {similarity:.2f})"
    else:
        what = f"it answers a different criterion (similarity {similarity:.2f})"
    return f"no hash match, {what}; {how}: low"


def criterion_text_similarity(hit: FollowupHit, criterion: str) -> float:
    """How close the criterion a follow-up was linked to is to this one (0 for ad-hoc)."""
    if not hit.criterion_question_text:
        return 0.0
    return _criterion_similarity(criterion, hit.criterion_question_text)


# Text measures ---------------------------------------------------------------------------

@lru_cache(maxsize=SIMILARITY_CACHE)
def _question_similarity(criterion: str, question: str) -> float:
    return round(question_similarity(criterion, question), 4)


@lru_cache(maxsize=SIMILARITY_CACHE)
def _criterion_similarity(criterion: str, other: str) -> float:
    return criterion_similarity(criterion, other)


@lru_cache(maxsize=SIMILARITY_CACHE)
def _typos(criterion: str, linked: str, word_similarity: float, max_words: int
           ) -> tuple[tuple[str, str], ...] | None:
    """How a linked criterion text is this criterion with typos (the typo, word pairs; none
    for other punctuation alone), or None when it is not."""
    found = typo_corrections(criterion, linked, word_similarity=word_similarity,
                             max_words=max_words)
    return tuple(found) if found is not None else None


def question_similarity(criterion: str, question: str) -> float:
    """difflib ratio of the lower-cased criterion and follow-up question (seed 003), their
    typography folded first so a pasted criterion scores as the typed one."""
    return SequenceMatcher(None, fold_typography(criterion).lower(),
                                   fold_typography(question).lower()).ratio()


def criterion_similarity(criterion: str, other: str) -> float:
    """difflib ratio of two criterion texts after normalising case and white space, their
    typography folded first, as for the canonical hash."""
    return SequenceMatcher(None, _folded(criterion), _folded(other)).ratio()


def typo_corrections(criterion: str, other: str, *, word_similarity: float,
                     max_words: int) -> list[tuple[str, str]] | None:
    """The (other, criterion) word pairs when the two texts differ only by typos, else None.

    Same words in the same order; at most `max_words` differ, each a spelling slip (same
    first letter, similar spelling) of a word of four or more letters with no digits.
    "authentcation" -> "authentication" qualifies; "AES-128" -> "AES-256", "6 months" ->
    "12 months", encrypt -> decrypt or an added word do not: those change what the
    criterion asks, however similar the characters are. Typography is folded first; an
    empty list means the same words with other punctuation."""
    words, others = _WORD.findall(_folded(criterion)), _WORD.findall(_folded(other))
    if len(words) != len(others):
        return None
    pairs = [(o, w) for w, o in zip(words, others, strict=True) if w != o]
    if len(pairs) > max_words:
        return None
    for typo, word in pairs:
        if min(len(typo), len(word)) < 4 or any(ch.isdigit() for ch in typo + word):
            return None
        if typo[0] != word[0]:  # misspellings keep the first letter; encrypt/decrypt do not
            return None
        if SequenceMatcher(None, typo, word).ratio() < word_similarity:
            return None
    return pairs


def typographic_differences(text: str, other: str) -> list[str]:
    """How two texts that fold alike differ, by name, in the order met: "curly apostrophe ’
    for '", "zero-width space removed", "Unicode NFD form", "ligature ﬁ for fi"... Each
    name says which typographic character stands where the other text has a plain one (or
    none), whichever text carries it. Empty when the texts are the same up to case and white
    space."""
    first, second = normalize_text(text), normalize_text(other)
    if first == second:
        return []
    labels: list[str] = []
    composed = [unicodedata.normalize("NFC", t) for t in (first, second)]
    decomposed = [c != t for c, t in zip(composed, (first, second), strict=True)]
    if any(decomposed) and (decomposed[0] != decomposed[1] or composed[0] == composed[1]):
        labels.append(_NFD_LABEL)
    a, b = composed
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for char in a[i1:i2] + b[j1:j2]:
            label = _variant_label(char)
            if label and label not in labels:
                labels.append(label)
    if not labels and a != b:  # reached only by texts that do not fold alike
        labels.append("other characters differ")
    return labels


def _variant_label(char: str) -> str | None:
    """How a reason names one typographic character; None for a plain one."""
    if char in TYPOGRAPHY:
        return TYPOGRAPHY[char][1]
    if unicodedata.combining(char):  # an accent NFC could not compose (a character between)
        return _NFD_LABEL
    plain = unicodedata.normalize("NFKC", char)
    if plain == char:
        return None
    if "\uff01" <= char <= "\uff5e":
        return "full-width characters"
    if "\ufb00" <= char <= "\ufb4f":
        return f"ligature {char} for {plain}"
    if char == "\u2026":
        return "ellipsis \u2026 for ..."
    return f"compatibility character {char} for {fold_typography(plain)}"


def _folded(text: str) -> str:
    """The text as the canonical hash reads it (normalised, folded, normalised)."""
    return normalize_text(fold_typography(normalize_text(text)))
