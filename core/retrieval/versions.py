"""Document versions in a retrieval: which version of which series each excerpt is of, and,
for an excerpt of a superseded document, its series' current version's best excerpt for the
criterion brought in just ahead of it. The documents' standing itself is decided in
`core.timeline.series`, once per manifest generation; this module only asks it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import numpy as np

from core.config import Settings
from core.models import Candidate
from core.retrieval.source import Query
from core.retrieval.stages import RetrievalEnv, candidate_from_chunk
from core.store import KIND_KEY, MANIFEST_GENERATION_ID, VendorStore, Where
from core.timeline.series import (
    CORRECTION_KIND,
    DocumentVersion,
    SeriesCorrection,
    correction_of,
    stored_document,
    timeline,
)


@dataclass(frozen=True)
class ManifestState:
    """What one read of a vendor's manifest says of its documents: each committed document's
    entry and the reviewer's series corrections."""

    documents: dict[str, dict[str, Any]]
    corrections: dict[str, SeriesCorrection]

    @classmethod
    def read(cls, vendor: VendorStore) -> ManifestState:
        """One read of the whole manifest."""
        documents, corrections = {}, {}
        for record_id, meta in vendor.manifest_records():
            if meta.get(KIND_KEY) == CORRECTION_KIND:
                correction = correction_of(meta)
                corrections[correction.doc_key] = correction
            elif record_id != MANIFEST_GENERATION_ID and KIND_KEY not in meta:
                documents[record_id] = meta
        return cls(documents, corrections)


def read_timeline(settings: Settings, manifest: ManifestState | VendorStore,
                  today: date | None = None) -> dict[str, DocumentVersion]:
    """Every document version of the vendor with its series and standing on `today` (by
    default today), with the reviewer's corrections of its series applied."""
    if not isinstance(manifest, ManifestState):
        manifest = ManifestState.read(manifest)
    return timeline([stored_document(key, entry) for key, entry in manifest.documents.items()],
                    manifest.corrections, today=today or datetime.now(UTC).date(),
                    stale_after_days=settings.stale_after_days)


class DocumentVersions:
    """The vendor's document versions at the run's committed state, asked by the stages."""

    def __init__(self, versions: Mapping[str, DocumentVersion],
                 nearest_in: Callable[[Query, str], Candidate | None]) -> None:
        self.versions = versions
        self.nearest_in = nearest_in
        self._current: dict[str, str] | None = None  # series -> its current version's key
        # doc_key -> the fields an excerpt of it carries, built once per run and shared by
        # every excerpt of it (a candidate already carrying them is not copied again).
        self._fields: dict[str, dict[str, Any]] = {}

    @classmethod
    def of(cls, env: RetrievalEnv) -> DocumentVersions:
        """The environment's document versions (none where it reads none), one per run."""
        if "document_versions" not in env.kept:
            versions = env.read_versions() if env.read_versions is not None else {}
            env.kept["document_versions"] = cls(versions, lambda query, doc_key: _nearest_in(
                env, query, doc_key))
        return env.kept["document_versions"]

    def fields_for(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """What an excerpt with this metadata carries of its document's standing ({} for an
        answer, or a document no version names)."""
        doc_key = str(metadata.get("doc_key", ""))
        fields = self._fields.get(doc_key)
        if fields is None:
            version = self.versions.get(doc_key) if doc_key else None
            fields = ({} if version is None else
                      {"document": version.standing(), "later_version": version.later_version})
            self._fields[doc_key] = fields
        return fields

    def version_of(self, candidate: Candidate) -> DocumentVersion | None:
        """The document version an excerpt is of; None for an answer."""
        if candidate.is_followup:
            return None
        return self.versions.get(str(candidate.metadata.get("doc_key", "")))

    def mark(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """The candidates, each document excerpt with its document's standing and, when its
        document was superseded, its series' current version."""
        marked = []
        for candidate in candidates:
            fields = {} if candidate.is_followup else self.fields_for(candidate.metadata)
            if not fields or (candidate.document is fields["document"]
                              and candidate.later_version is fields["later_version"]):
                marked.append(candidate)
            else:
                marked.append(candidate.model_copy(update=fields))
        return marked

    def current_key(self, version: DocumentVersion) -> str | None:
        """The doc_key of the current version of a version's series (the series are read
        at the first question: most runs meet no superseded excerpt and ask none)."""
        if self._current is None:
            self._current = {v.series: key for key, v in self.versions.items() if v.current}
        return self._current.get(version.series)

    def with_current(self, excerpts: Sequence[Candidate], query: Query, budget: int,
                     pool: Sequence[Candidate] = ()) -> list[Candidate]:
        """The excerpts with, just ahead of each excerpt of a superseded document, the best
        excerpt of its series' current version for the query (the best-ranked of `pool`, the
        candidates the strategy ranked, else the nearest of that version's chunks), at most
        `budget` of them. The superseded excerpt is kept: a question about a past period
        still reads its report."""
        marked = self.mark(excerpts)
        if not any(c.later_version is not None for c in marked):
            return marked
        placed: list[Candidate] = []
        for candidate in marked:
            if any(c.id == candidate.id for c in placed):
                continue
            version = self.version_of(candidate)
            current = self.current_key(version) if candidate.later_version and version else None
            if current is not None and not any(
                    str(c.metadata.get("doc_key")) == current for c in placed):
                best = next((c for c in marked if str(c.metadata.get("doc_key")) == current),
                            None) or next((c for c in self.mark(
                                [c for c in pool if not c.is_followup
                                 and str(c.metadata.get("doc_key")) == current][:1])), None)
                if best is None:
                    best = self.nearest_in(query, current)
                    best = self.mark([best])[0] if best is not None else None
                if best is not None:
                    placed.append(best.model_copy(update={"brought_in": candidate.id})
                                  if not any(c.id == best.id for c in marked) else best)
            placed.append(candidate)
        return placed[:budget]


def _nearest_in(env: RetrievalEnv, query: Query, doc_key: str) -> Candidate | None:
    """The chunk of one document version nearest the query: scored against the version's
    vectors the runner keeps per generation where it keeps them (a version has tens to
    hundreds of chunks, and a filtered vector search costs as much as the whole search),
    else by the vector search under a filter."""
    if env.read_version_chunks is not None:
        chunks, vectors = env.read_version_chunks(doc_key)
        if not chunks:
            return None
        scores = vectors @ np.asarray(query.embedding, dtype=np.float32)
        best = int(np.argmax(scores))
        return candidate_from_chunk(chunks[best], score=float(scores[best]))
    search = getattr(env.records, "nearest", None) or env.search.nearest
    for neighbour in search(query, 1, where=Where.eq(doc_key=doc_key)):
        if neighbour.committed:
            return candidate_from_chunk(neighbour.chunk, score=neighbour.score)
    return None
