"""Small retrieval stages that every strategy is composed from; none mutates its input."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.config import Settings
from core.controls.mappings import ControlLink
from core.encoders.rerank import Reranker
from core.models import FOLLOWUP_SOURCE_TYPE, BoostOutcome, Candidate, RerankerStatus
from core.retrieval.links import AnswerIndex, Links
from core.retrieval.source import CandidateSource, Query, RecordReader, StoredChunk, Where
from core.store import is_withdrawn
from core.timeline.series import DocumentVersion


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
    # The answers of each criterion (kept by the runner per generation); None: indexed from
    # `links` once per run.
    read_answers: Callable[[], AnswerIndex] | None = None
    # The vendor's document versions and their standing (kept by the runner per generation
    # and day); None: none are read, and excerpts carry no standing.
    read_versions: Callable[[], Mapping[str, DocumentVersion]] | None = None
    # One document version's committed chunks and their vectors, a row each (kept by the
    # runner per generation); None: a version's nearest chunk is searched for under a filter.
    read_version_chunks: Callable[[str], tuple[list[StoredChunk], np.ndarray]] | None = None
    # The controls the query's criterion is mapped to (core/controls/mappings.py); None:
    # no mapping is read, and no answer links through a control.
    # (The flag: whether the vendor's answers are keyed by controls a proposal can reach.)
    read_controls: Callable[[Query, bool], tuple[ControlLink, ...]] | None = None
    # What a document excerpt with this metadata carries of its document's standing (set by
    # the runner, from the document versions it reads), so that the first stage builds each
    # candidate with it instead of the runner copying it in later; None: built without.
    standing: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    # What a stage computed for the whole run and other stages reuse, by name.
    kept: dict[str, Any] = field(default_factory=dict)
    _links: Links | None = None
    _answers: AnswerIndex | None = None

    def links(self) -> Links:
        """Follow-up id -> (criterion hash, canonical criterion hash, linked criterion text),
        read once per run."""
        if self._links is None:
            self._links = self.read_links()
        return self._links

    def controls(self, query: Query) -> tuple[ControlLink, ...]:
        """The controls the criterion is mapped to, read once per run."""
        if "controls" not in self.kept:
            self.kept["controls"] = (
                self.read_controls(query, self.answers().proposable)
                if self.read_controls is not None else ())
        return self.kept["controls"]

    def answers(self) -> AnswerIndex:
        """Which stored answers answer each criterion, read once per run."""
        if self._answers is None:
            self._answers = (self.read_answers() if self.read_answers is not None
                             else AnswerIndex(self.links()))
        return self._answers

    def linked_records(self, ids: Sequence[str]) -> list[StoredChunk]:
        """The records of these linked follow-ups that exist, with their vectors, in the
        order of `ids`."""
        if self.read_linked is not None:
            return self.read_linked(ids)
        found = {c.id: c for c in self.records.by_ids(ids, embeddings=True)}
        return [found[i] for i in ids if i in found]


# First stage ------------------------------------------------------------------------------

def candidate_from_chunk(chunk: StoredChunk, *, score: float | None = None,
                         rank: int | None = None, **fields: Any) -> Candidate:
    """A stored record as a candidate, with the first-stage score and rank it was found at
    (and the parts of a fused score, `Neighbour.score_parts`, where a fusion gave them, and
    a document's standing, `RetrievalEnv.standing`)."""
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
        **fields,
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
        metadata = neighbour.chunk.metadata
        standing = ({} if env.standing is None
                    or metadata.get("source_type") == FOLLOWUP_SOURCE_TYPE
                    else env.standing(metadata))
        candidates.append(candidate_from_chunk(neighbour.chunk, score=neighbour.score,
                                               rank=len(candidates) + 1, **parts, **standing))
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
