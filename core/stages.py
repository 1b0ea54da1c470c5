"""Small retrieval stages that every strategy is composed from; none mutates its input."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.config import Settings
from core.embedding import Embedder
from core.hashing import criterion_similarity, question_similarity, typo_corrections
from core.models import (
    FOLLOWUP_SOURCE_TYPE,
    Candidate,
    DroppedFollowup,
    FollowupHit,
    RerankerStatus,
)
from core.rerank import Reranker
from core.store import (
    VendorCollections,
    _present,
    committed_versions,
    followup_link,
    get_all,
    is_committed,
    read_manifest,
)

TIER_ORDER = {"high": 0, "medium": 1, "low": 2}


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
    """Everything a strategy needs for one vendor: settings, store, models."""

    settings: Settings
    vendor: VendorCollections
    embedder: Embedder
    reranker: Reranker | None
    reranker_status: RerankerStatus
    embed_query: Callable[[str], np.ndarray]
    notes: list[str] = field(default_factory=list)
    _committed: dict[str, str] | None = None
    # id -> (criterion hash, linked criterion text) of every follow-up; scanned when absent.
    followup_links: Callable[[], dict[str, tuple[str | None, str]]] | None = None
    _links: dict[str, tuple[str | None, str]] | None = None

    @property
    def vendor_id(self) -> str:
        return self.vendor.vendor_id

    def committed_documents(self) -> dict[str, str]:
        """doc_key -> version of each document whose ingest completed (read once per run)."""
        if self._committed is None:
            self._committed = committed_versions(read_manifest(self.vendor))
        return self._committed

    def is_committed(self, metadata: dict[str, Any]) -> bool:
        return is_committed(metadata, self.committed_documents())

    def links(self) -> dict[str, tuple[str | None, str]]:
        """Follow-up id -> (criterion hash, linked criterion text), read once per run."""
        if self._links is None:
            if self.followup_links is not None:
                self._links = self.followup_links()
            else:
                found = get_all(self.vendor.chunks,
                                where={"source_type": FOLLOWUP_SOURCE_TYPE},
                                include=("metadatas",))
                self._links = {record_id: followup_link(meta) for record_id, meta
                               in zip(found["ids"], found["metadatas"], strict=True)}
        return self._links


# First stage ------------------------------------------------------------------------------

def candidate_from_record(record_id: str, text: str, metadata: dict[str, Any], *,
                          score: float | None = None, rank: int | None = None) -> Candidate:
    page = metadata.get("page")
    return Candidate(
        id=record_id,
        type=str(metadata.get("type", "")),
        source=str(metadata.get("source", "")),
        page=int(page) if page is not None else None,
        round_number=metadata.get("round_number"),
        text=text,
        first_stage_score=score,
        first_stage_rank=rank,
        final_score=score,
        metadata=dict(metadata),
    )


def first_stage(env: RetrievalEnv, query_embedding: np.ndarray, n: int, *,
                where: dict[str, Any] | None = None) -> list[Candidate]:
    """One ChromaDB nearest-neighbour query; score is cosine similarity, 1 - distance."""
    # No count() first: a write between the two reads would size the window for a store that
    # no longer exists. ChromaDB answers a window wider than the collection with all of it.
    result = env.vendor.chunks.query(
        query_embeddings=[np.asarray(query_embedding, dtype=np.float32)],
        n_results=n,
        where=where,
        include=["documents", "metadatas", "distances"],
    )
    candidates: list[Candidate] = []
    stale = 0
    for record_id, text, metadata, distance in zip(
        result["ids"][0], result["documents"][0], result["metadatas"][0],
        result["distances"][0], strict=True,
    ):
        if not env.is_committed(metadata):
            stale += 1
            continue
        candidates.append(candidate_from_record(
            record_id, text, metadata, score=1.0 - float(distance), rank=len(candidates) + 1,
        ))
    if stale:
        env.notes.append(
            f"{stale} chunk(s) of an unfinished document ingest were skipped; run the same "
            "ingest again to complete it."
        )
    return candidates


def split_followups(candidates: Sequence[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
    """(follow-up responses, everything else), each in the input order."""
    followups = [c for c in candidates if c.is_followup]
    others = [c for c in candidates if not c.is_followup]
    return followups, others


# Follow-ups ------------------------------------------------------------------------------

def followup_hit(candidate: Candidate, criterion: str, criterion_hash: str,
                 found_by: Sequence[str]) -> FollowupHit:
    meta = candidate.metadata
    return FollowupHit(
        id=candidate.id,
        round_number=int(meta["round_number"]),
        timestamp=str(meta.get("timestamp", "")),
        source=candidate.source,
        content=candidate.text,
        criterion_question_text=meta.get("original_criterion_question_text") or None,
        criterion_question_hash=meta.get("criterion_question_hash"),
        question_text=str(meta["question_text"]),
        answer_text=str(meta["answer_text"]),
        hash_match=meta.get("criterion_question_hash") == criterion_hash,
        found_by=list(found_by),
        question_similarity=round(question_similarity(criterion, str(meta["question_text"])), 4),
        first_stage_score=candidate.first_stage_score,
        first_stage_rank=candidate.first_stage_rank,
    )


def extract_by_hash(candidates: Sequence[Candidate], criterion_hash: str
                    ) -> tuple[list[Candidate], list[Candidate]]:
    """Seed 000: (follow-ups carrying the criterion hash, all the rest)."""
    matched = [c for c in candidates
               if c.is_followup and c.metadata.get("criterion_question_hash") == criterion_hash]
    matched_ids = {c.id for c in matched}
    return matched, [c for c in candidates if c.id not in matched_ids]


def _recency_key(hit: FollowupHit) -> tuple[int, str]:
    return (hit.round_number, hit.timestamp)


def keep_latest_rounds(hits: Sequence[FollowupHit], limit: int
                       ) -> tuple[list[FollowupHit], list[DroppedFollowup]]:
    """Seed 000: keep the `limit` latest responses by round number."""
    ordered = sorted(hits, key=_recency_key, reverse=True)
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
    reserves "low" for follow-ups with no hash match."""
    tiered: dict[str, FollowupHit] = {}
    linked_by_search = [h for h in semantic_hits if h.hash_match and
                        h.id not in {x.id for x in hash_hits}]
    for hit in [*hash_hits, *linked_by_search]:
        similar = hit.question_similarity >= threshold
        tier = "high" if similar else "medium"
        if hit.question_similarity >= 0.999:
            wording = "question unchanged"
        elif similar:
            wording = "question lightly edited"
        else:
            wording = "question reworded"
        sign = ">=" if similar else "<"
        tiered[hit.id] = hit.model_copy(update={
            "tier": tier,
            "tier_reason": f"hash match; {wording}, similarity {hit.question_similarity:.2f} "
                           f"{sign} {threshold:.2f}: {tier}",
        })
    for hit in semantic_hits:
        if hit.id in tiered:
            found_by = sorted(set(tiered[hit.id].found_by) | set(hit.found_by))
            tiered[hit.id] = tiered[hit.id].model_copy(update={"found_by": found_by})
            continue
        tiered[hit.id] = hit.model_copy(update={
            "tier": "low", "tier_reason": _low_tier_reason(hit, criterion),
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
    corrections = typo_corrections(criterion, hit.criterion_question_text)
    similarity = criterion_text_similarity(hit, criterion)
    if corrections:
        fixed = ", ".join(f"{typo} -> {word}" for typo, word in corrections)
        what = f"its criterion text differs only by a typo ({fixed})"
    elif similarity >= 0.9:
        what = f"its criterion text was edited (similarity {similarity:.2f})"
    else:
        what = f"it answers a different criterion (similarity {similarity:.2f})"
    return f"no hash match, {what}; {how}: low"


def fetch_vouched_followups(env: RetrievalEnv, criterion: str, criterion_hash: str,
                            query_embedding: np.ndarray
                            ) -> tuple[list[Candidate], list[Candidate]]:
    """(follow-ups linked by the criterion hash, follow-ups linked to this criterion's text
    with a typo), found through each stored response's link (a metadata lookup, so no search
    window can miss one) and read in one call, scored against the query in Python so the
    trace can show their similarity."""
    s = env.settings
    links = env.links()
    is_typo_of: dict[str, bool] = {}
    linked_ids, near_ids = [], []
    for record_id, (linked_hash, linked) in links.items():
        if linked_hash == criterion_hash:
            linked_ids.append(record_id)
            continue
        if not linked:
            continue
        if linked not in is_typo_of:
            is_typo_of[linked] = bool(typo_corrections(
                criterion, linked, word_similarity=s.typo_word_similarity,
                max_words=s.typo_max_words))
        if is_typo_of[linked]:
            near_ids.append(record_id)
    if not linked_ids and not near_ids:
        return [], []
    records = env.vendor.chunks.get(ids=linked_ids + near_ids,
                                    include=["documents", "metadatas", "embeddings"])
    present = _present(records, ("metadatas",))
    if not present:
        return [], []
    vectors = np.asarray([records["embeddings"][i] for i in present], dtype=np.float32)
    scores = vectors @ np.asarray(query_embedding, dtype=np.float32)
    linked: list[Candidate] = []
    near: list[Candidate] = []
    wanted = set(linked_ids)
    for position, score in zip(present, scores, strict=True):
        record_id = records["ids"][position]
        candidate = candidate_from_record(record_id, records["documents"][position],
                                          records["metadatas"][position], score=float(score))
        (linked if record_id in wanted else near).append(candidate)
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
    ordered = sorted(hits, key=lambda h: (TIER_ORDER[h.tier or "low"], -h.round_number,
                                          _negated(h.timestamp)))
    kept, rest = ordered[:limit], ordered[limit:]
    summary = ", ".join(f"round {h.round_number} ({h.tier})" for h in kept)
    dropped = [
        DroppedFollowup(
            followup=hit,
            reason=f"{hit.tier} tier, round {hit.round_number}: the cap of {limit} "
                   f"(MAX_FOLLOWUP_ROUNDS) is filled by {summary}",
        )
        for hit in rest
    ]
    return kept, dropped


def _negated(timestamp: str) -> tuple[int, ...]:
    return tuple(-ord(ch) for ch in timestamp)


def context_order(hits: Sequence[FollowupHit]) -> list[FollowupHit]:
    """The order follow-ups take in the XML context: ascending round (seed 000)."""
    return sorted(hits, key=_recency_key)


# Documents -------------------------------------------------------------------------------

def top_by_first_stage(candidates: Sequence[Candidate], n: int) -> list[Candidate]:
    """Seed 000: the `n` best by first-stage score go on to the reranker."""
    return sorted(candidates, key=lambda c: -(c.first_stage_score or 0.0))[:n]


def rerank(env: RetrievalEnv, query: str, candidates: Sequence[Candidate]) -> list[Candidate]:
    """Cross-encoder scores, sorted; without a reranker, first-stage order is kept."""
    if env.reranker is not None and candidates:
        scores = env.reranker.score(query, [c.text for c in candidates])
        scored = [c.model_copy(update={"rerank_score": s, "final_score": s})
                  for c, s in zip(candidates, scores, strict=True)]
        scored.sort(key=lambda c: -c.rerank_score)
    else:
        scored = [c.model_copy(update={"final_score": c.first_stage_score}) for c in candidates]
    return [c.model_copy(update={"rank_before_boost": i, "rank_after_boost": i})
            for i, c in enumerate(scored, start=1)]


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
    return [c.model_copy(update={"rank_after_boost": i}) for i, c in enumerate(boosted, start=1)]


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
