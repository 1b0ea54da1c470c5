"""Small retrieval stages that every strategy is composed from; none mutates its input."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from core.config import Settings
from core.encoders.rerank import Reranker
from core.models import (
    BoostOutcome,
    Candidate,
    DroppedFollowup,
    FollowupHit,
    RerankerStatus,
    by_round,
)
from core.retrieval.links import Links
from core.retrieval.similarity import (
    criterion_similarity,
    question_similarity,
    typo_corrections,
    typographic_differences,
)
from core.retrieval.source import CandidateSource, Query, RecordReader, StoredChunk, Where
from core.store import followup_canonical_hash, is_withdrawn

TIER_ORDER = {"high": 0, "medium": 1, "low": 2}
# Text comparisons kept per process: the strategies shown side by side ask the same pairs.
SIMILARITY_CACHE = 8192


@lru_cache(maxsize=SIMILARITY_CACHE)
def _question_similarity(criterion: str, question: str) -> float:
    return round(question_similarity(criterion, question), 4)


@lru_cache(maxsize=SIMILARITY_CACHE)
def _typos(criterion: str, linked: str, word_similarity: float, max_words: int
           ) -> tuple[tuple[str, str], ...] | None:
    """How a linked criterion text is this criterion with typos (the typo, word pairs; none
    for other punctuation alone), or None when it is not."""
    found = typo_corrections(criterion, linked, word_similarity=word_similarity,
                             max_words=max_words)
    return tuple(found) if found is not None else None


@dataclass
class Timings:
    """Milliseconds per stage, in the order the stages ran."""

    ms: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - start) * 1000.0


@dataclass
class RetrievalEnv:
    """Everything a strategy needs for one vendor: settings, where candidates come from,
    where records are looked up, the reranker, and the notes the trace will carry."""

    settings: Settings
    vendor_id: str
    search: CandidateSource
    records: RecordReader
    reranker: Reranker | None
    reranker_status: RerankerStatus
    read_links: Callable[[], Links]
    notes: list[str] = field(default_factory=list)
    # follow-up id -> the typo corrections that made `fetch_vouched_followups` vouch for it.
    typo_corrections: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    # Linked follow-ups' records with their vectors, in the order asked for (the runner
    # keeps them while their links say they are unchanged); None: read from `records`.
    read_linked: Callable[[Sequence[str]], list[StoredChunk]] | None = None
    _links: Links | None = None

    def links(self) -> Links:
        """Follow-up id -> (criterion hash, canonical criterion hash, linked criterion text),
        read once per run."""
        if self._links is None:
            self._links = self.read_links()
        return self._links

    def linked_records(self, ids: Sequence[str]) -> list[StoredChunk]:
        """The records of these linked follow-ups that exist, with their vectors, in the
        order of `ids`."""
        if self.read_linked is not None:
            return self.read_linked(ids)
        found = {c.id: c for c in self.records.by_ids(ids, embeddings=True)}
        return [found[i] for i in ids if i in found]


# First stage ------------------------------------------------------------------------------

def candidate_from_chunk(chunk: StoredChunk, *, score: float | None = None,
                         rank: int | None = None, **score_parts: int | float) -> Candidate:
    """A stored record as a candidate, with the first-stage score and rank it was found at
    (and the parts of a fused score, `Neighbour.score_parts`, where a fusion gave them)."""
    metadata = chunk.metadata
    page = metadata.get("page")
    return Candidate(
        id=chunk.id,
        type=str(metadata.get("type", "")),
        source=str(metadata.get("source", "")),
        page=int(page) if page is not None else None,
        section=str(metadata["section"]) if metadata.get("section") else None,
        ocr=bool(metadata.get("ocr")),
        round_number=metadata.get("round_number"),
        text=chunk.text,
        first_stage_score=score,
        first_stage_rank=rank,
        final_score=score,
        metadata=dict(metadata),
        **score_parts,
    )


def first_stage(env: RetrievalEnv, query: Query, n: int, *,
                where: Where | None = None) -> list[Candidate]:
    """The `n` nearest committed candidates from the environment's candidate source."""
    candidates: list[Candidate] = []
    stale = withdrawn = 0
    for neighbour in env.search.nearest(query, n, where=where):
        if is_withdrawn(neighbour.chunk.metadata):
            withdrawn += 1
            continue
        if not neighbour.committed:
            stale += 1
            continue
        parts = {k: v for k, v in neighbour.score_parts().items() if v is not None}
        candidates.append(candidate_from_chunk(neighbour.chunk, score=neighbour.score,
                                               rank=len(candidates) + 1, **parts))
    if stale:
        env.notes.append(
            f"{stale} chunk(s) of an unfinished document ingest were skipped; run the same "
            "ingest again to complete it."
        )
    if withdrawn:
        env.notes.append(
            f"{withdrawn} answer(s) withdrawn by an unfinished replacement of a round were "
            "skipped; run the same replacement again to complete it."
        )
    return candidates


def split_followups(candidates: Sequence[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
    """(follow-up responses, everything else), each in the input order."""
    followups = [c for c in candidates if c.is_followup]
    others = [c for c in candidates if not c.is_followup]
    return followups, others


# Follow-ups ------------------------------------------------------------------------------

def followup_hit(candidate: Candidate, query: Query, found_by: Sequence[str], *,
                 typo_corrections: list[tuple[str, str]] | None = None) -> FollowupHit:
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


def assign_tiers(hash_hits: Sequence[FollowupHit], semantic_hits: Sequence[FollowupHit],
                 criterion: str, threshold: float) -> list[FollowupHit]:
    """Seed 003's tiers, each with its reason in words; a hit found twice appears once.

    A follow-up that carries the criterion hash is tiered by the hash rule even when only
    the semantic path found it (a path-1 limit can leave it out): seed 003's tier table
    reserves "low" for follow-ups with no hash match. A follow-up linked through the
    canonical hash (its criterion differs only in typography) is a hash match; its reason
    names the typography."""
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
            "tier": "low", "tier_reason": _low_tier_reason(hit, criterion),
            # Spent once the reason is written: a tiered hit equals its stored form.
            "typo_corrections": None,
        })
    return list(tiered.values())


def criterion_text_similarity(hit: FollowupHit, criterion: str) -> float:
    """How close the criterion a follow-up was linked to is to this one (0 for ad-hoc)."""
    if not hit.criterion_question_text:
        return 0.0
    return criterion_similarity(criterion, hit.criterion_question_text)


def _low_tier_reason(hit: FollowupHit, criterion: str) -> str:
    if "near_copy" in hit.found_by:
        how = "found by its linked criterion text"
    else:
        where = f" at first-stage rank {hit.first_stage_rank}" if hit.first_stage_rank else ""
        how = f"found by semantic search{where}"
    if not hit.criterion_question_text:
        return f"no hash match (ad-hoc question, no criterion); {how}: low"
    corrections = (hit.typo_corrections if hit.typo_corrections is not None
                   else typo_corrections(criterion, hit.criterion_question_text))
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


def merge_tiers(hits: Sequence[FollowupHit], limit: int
                ) -> tuple[list[FollowupHit], list[DroppedFollowup]]:
    """Seed 003's merge: high > medium > low, newest first within a tier, at most `limit`."""
    ordered = sorted(by_round(hits, newest_first=True), key=_tier_rank)
    kept, rest = ordered[:limit], ordered[limit:]
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


def _tier_rank(hit: FollowupHit) -> int:
    return TIER_ORDER[hit.tier or "low"]


def context_order(hits: Sequence[FollowupHit]) -> list[FollowupHit]:
    """The order follow-ups take in the XML context: ascending round (seed 000)."""
    return by_round(hits)


# Documents -------------------------------------------------------------------------------

def top_by_first_stage(candidates: Sequence[Candidate], n: int) -> list[Candidate]:
    """Seed 000: the `n` best by first-stage score go on to the reranker."""
    return sorted(candidates, key=lambda c: -(c.first_stage_score or 0.0))[:n]


def rerank(env: RetrievalEnv, query: str, candidates: Sequence[Candidate]) -> list[Candidate]:
    """Cross-encoder scores, sorted; without a reranker, first-stage order is kept."""
    if env.reranker is None or not candidates:
        return [c.model_copy(update={"final_score": c.first_stage_score,
                                     "rank_before_boost": i, "rank_after_boost": i})
                for i, c in enumerate(candidates, start=1)]
    scores = env.reranker.score(query, [c.text for c in candidates])
    order = sorted(range(len(candidates)), key=lambda i: -scores[i])
    return [candidates[i].model_copy(update={"rerank_score": scores[i], "final_score": scores[i],
                                             "rank_before_boost": rank,
                                             "rank_after_boost": rank})
            for rank, i in enumerate(order, start=1)]


def boost_followup_documents(candidates: Sequence[Candidate], factor: float,
                             cap: float | None) -> list[Candidate]:
    """Seed 002: multiply follow-up document scores by `factor` (never above `cap`), re-sort."""
    boosted = []
    for c in candidates:
        base = c.final_score if c.final_score is not None else 0.0
        if c.type == "followup_document":
            score = base * factor
            if cap is not None:
                score = max(base, min(score, cap))
            applied = score / base if base else factor
            boosted.append(c.model_copy(update={"final_score": score, "boost": round(applied, 6)}))
        else:
            boosted.append(c)
    boosted.sort(key=lambda c: -(c.final_score or 0.0))
    return [c if c.rank_after_boost == i else c.model_copy(update={"rank_after_boost": i})
            for i, c in enumerate(boosted, start=1)]


def boost_outcome(boosted: Sequence[Candidate], factor: float, cap: float | None
                  ) -> BoostOutcome:
    """What the boost did to a ranking `boost_followup_documents` returned."""
    return BoostOutcome(
        factor=factor, cap=cap,
        boosted=sum(c.type == "followup_document" for c in boosted),
        moved=sum(c.rank_before_boost != c.rank_after_boost for c in boosted),
    )


def select_top(env: RetrievalEnv, ranked: Sequence[Candidate], n: int) -> list[Candidate]:
    """The top `n`, then the relevancy cutoff on reranker scores (seed 000, seed 002)."""
    top = list(ranked[:n])
    if env.reranker is None:
        return top
    cutoff = env.settings.relevancy_cutoff
    kept = [c for c in top if (c.final_score or 0.0) >= cutoff]
    if len(kept) < len(top):
        env.notes.append(
            f"{len(top) - len(kept)} of the top {n} fell below the relevancy cutoff {cutoff}."
        )
    return kept
