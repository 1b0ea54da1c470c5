"""Seed 001's source anchoring: on a continuation, chunks of the documents that backed the
previous answer get an additive boost on their fused (reciprocal rank fusion) score.

The seed adds 0.3. With two lists and k=60 the largest fused score is 2/61, about 0.033, so
0.3 puts every chunk of an anchor document above every other chunk, however irrelevant.
The calibrated form adds `anchor_fused_ranks` ranks' worth of a first place in one list,
anchor_fused_ranks / (k + 1): enough to lift a relevant anchor chunk over a comparable
stranger, too little to lift an irrelevant one over strong evidence elsewhere. It is also
divided by the anchor document's best place in the question's own search (all of it when
that document holds the first hit, half at the second, none when no chunk of it is in the
window): a previous answer's document the new question does not reach is not pulled in, so
one answer drawn from the wrong document does not hold every later turn to it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from core.config import Settings
from core.retrieval.source import CandidateSource, Neighbour, Query, Where

# How far past the asked window the anchored search looks for anchor chunks to lift.
ANCHOR_WINDOW = 50


def calibrated(settings: Settings) -> bool:
    """Whether the calibrated form is in force (else seed 001's): only it scales the boost
    by confidence, part and place, and searches a continuation as asked too."""
    return settings.source_anchoring != "seed"


def anchor_boost(settings: Settings) -> float:
    """The boost added to an anchor chunk's fused score under the settings in force."""
    if not calibrated(settings):
        return settings.source_anchoring_boost
    return settings.anchor_fused_ranks / (settings.rrf_k + 1)


def describe(settings: Settings, scale: float = 1.0, weighted: bool = False) -> str:
    """The anchoring in force, in words, for the turn's record."""
    if not calibrated(settings):
        return f"seed 001: +{settings.source_anchoring_boost:g} on the fused score"
    scaled = f" x confidence {scale:.2f}" if scale != 1.0 else ""
    if weighted:
        scaled += " x each document's part in the previous answer"
    scaled += " / the document's best place in the question's own search"
    return (f"calibrated: +{anchor_boost(settings) * scale:.4f} on the fused score "
            f"({settings.anchor_fused_ranks:g} x 1/(k+1), k={settings.rrf_k}{scaled})")


def document_weights(sources: Sequence[str]) -> dict[str, float]:
    """Each document's part in an answer whose excerpts came from `sources`, in rank order:
    the sum of 1/rank of its excerpts, over the largest such sum (the leading document 1.0)."""
    sums: dict[str, float] = {}
    for rank, source in enumerate(sources, start=1):
        sums[source] = sums.get(source, 0.0) + 1.0 / rank
    top = max(sums.values(), default=0.0)
    return {source: round(total / top, 4) for source, total in sums.items()} if top else {}


def up_to_committed(neighbours: Sequence[Neighbour], n: int) -> list[Neighbour]:
    """The neighbours, in order, up to the `n`th committed one (an uncommitted record is
    ranked among them but not counted)."""
    kept, committed = [], 0
    for neighbour in neighbours:
        kept.append(neighbour)
        committed += neighbour.committed
        if committed == n:
            break
    return kept


def best_places(found: Sequence[Neighbour], sources: set[str]) -> dict[str, int]:
    """Each of these documents' best place (from 1) among the neighbours, in their order;
    a document none of whose chunks is among them is left out."""
    places: dict[str, int] = {}
    for place, neighbour in enumerate(found, start=1):
        source = neighbour.chunk.metadata.get("source")
        if source in sources and source not in places:
            places[source] = place
    return places


class WithQuestionAsAsked:
    """A candidate source for a question searched with words carried from the conversation:
    the search query's ranking and the question's own, fused by weighted reciprocal rank
    (1 / (k + place) for the search query, `weight` / (k + place) for the question), so a
    continuation that names a subject of its own ("How do they catch certificates that are
    about to expire?") still reaches it when the carried words point at the previous
    answer's document. Each neighbour keeps the search query's vector and lexical ranks and
    scores (the question's where only it found the record); its score and fused score are
    the two rankings' fusion."""

    name = "with_question_as_asked"

    def __init__(self, inner: CandidateSource, question: Query, weight: float, k: int) -> None:
        self.inner = inner
        self.question = question
        self.weight = weight
        self.k = k

    def nearest(self, query: Query, n: int, *, where: Where | None = None) -> list[Neighbour]:
        scores: dict[str, float] = {}
        first: dict[str, Neighbour] = {}
        for asked, weight in ((query, 1.0), (self.question, self.weight)):
            for place, neighbour in enumerate(self.inner.nearest(asked, n, where=where),
                                              start=1):
                record_id = neighbour.chunk.id
                scores[record_id] = scores.get(record_id, 0.0) + weight / (self.k + place)
                first.setdefault(record_id, neighbour)
        fused = sorted((replace(first[i], score=score, fused_score=score)
                        for i, score in scores.items()), key=lambda nb: -nb.score)
        return up_to_committed(fused, n)


class AnchoredSearch:
    """A candidate source whose neighbours from anchor documents get the boost (times the
    document's weight, 1 when none is given), re-sorted. With `by_place`, the calibrated
    form, each document's boost is also divided by its best place in the search's own
    order (`places`), and a document outside the window gets none."""

    name = "anchored"

    def __init__(self, inner: CandidateSource, anchor_sources: Sequence[str],
                 boost: float, weights: dict[str, float] | None = None, *,
                 by_place: bool = False) -> None:
        self.inner = inner
        self.anchors = set(anchor_sources)
        self.weights = weights or {}
        self.boost = boost
        self.by_place = by_place
        self.boosts: dict[str, float] = {}  # chunk id -> boost it received
        self.places: dict[str, int] = {}  # anchor document -> its best place unanchored

    def nearest(self, query: Query, n: int, *, where: Where | None = None) -> list[Neighbour]:
        found = self.inner.nearest(query, max(n, ANCHOR_WINDOW), where=where)
        self.places = best_places(found, self.anchors)
        boosted = []
        for neighbour in found:
            source = neighbour.chunk.metadata.get("source")
            boost = self.boost * self.weights.get(source, 1.0)
            if self.by_place:
                boost = boost / self.places[source] if source in self.places else 0.0
            if source in self.anchors and boost:
                self.boosts[neighbour.chunk.id] = boost
                # The fused score stays as fused; the order follows fused + boost.
                neighbour = replace(neighbour, score=neighbour.score + boost)
            boosted.append(neighbour)
        boosted.sort(key=lambda nb: -nb.score)
        return up_to_committed(boosted, n)
