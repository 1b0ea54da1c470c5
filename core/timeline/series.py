"""Documents in series: which stored documents are the same evidence at different times, which
version of each series is current, what superseded each earlier one, and which current
evidence went stale.

A series is read from what documents say of themselves, whatever their file names: reports,
certificates and letters of one standard (their `family`) over the same scope; policies and
other documents of one title (years, dates and version numbers aside); every version of one
file name sent again. Key ceremonies are events, each its own series. A reviewer's correction
(`SeriesCorrection`) moves a document to another series or dates it, and wins over the
reading.

In a series the newest is current: the latest date (a report's period end, else the date it
is as of, else a policy's review, else when it was received), then the latest received."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from pydantic import BaseModel, Field

from core.models import DATE_BASES, DocumentFacts, DocumentStanding, LaterVersion
from core.timeline.identity import NAMES_A_KIND, series_words
from core.timeline.reading import FACTS_VERSION

# Keys of a document's manifest entry that this module reads (the writer writes them).
FACTS_KEY = "facts"
FACTS_VERSION_KEY = "facts_version"
ARCHIVED_OF_KEY = "archived_of"
# Manifest records of a reviewer's series corrections carry this kind.
CORRECTION_KIND = "series_correction"
_STOP = {"the", "of", "and", "for", "to", "a", "an", "in", "on", "its", "by", "with", "as",
         "is", "are", "all", "system", "systems", "services", "service", "inc", "llc", "ltd",
         "corp", "platform", "operations", "cloud", "data", "security", "management",
         "information", "infrastructure", "their", "our", "boundaries", "description"}


@dataclass(frozen=True)
class StoredDocument:
    """One committed document version as the manifest holds it."""

    doc_key: str
    source: str
    type: str
    received_at: str
    facts: DocumentFacts | None
    round_number: int | None = None
    archived_of: str | None = None  # the doc_key of the same file's newer version
    chunks: int = 0
    pages: int | None = None


@dataclass(frozen=True)
class SeriesCorrection:
    """A reviewer's correction of one document: the series it belongs to, its date."""

    doc_key: str
    source: str
    series: str | None = None
    dated: str | None = None
    by: str = ""
    at: str = ""


def facts_entry(facts: DocumentFacts) -> dict[str, Any]:
    """The keys of a manifest entry that hold what its document states of itself, and which
    reading read it."""
    return {FACTS_KEY: facts.model_dump_json(exclude_defaults=True),
            FACTS_VERSION_KEY: FACTS_VERSION}


def stored_document(doc_key: str, entry: Mapping[str, Any]) -> StoredDocument:
    """A manifest entry as a StoredDocument; an entry written before facts were read has
    none (its document is dated by when it was received)."""
    facts = None
    raw = entry.get(FACTS_KEY)
    if raw:
        try:
            facts = DocumentFacts.model_validate(json.loads(str(raw)))
        except ValueError:
            facts = None
    round_number = entry.get("round_number")
    return StoredDocument(
        doc_key=doc_key, source=str(entry.get("source", "")), type=str(entry.get("type", "")),
        received_at=str(entry.get("ingested_at", "")), facts=facts,
        round_number=int(round_number) if round_number is not None else None,
        archived_of=str(entry[ARCHIVED_OF_KEY]) if entry.get(ARCHIVED_OF_KEY) else None,
        chunks=int(entry.get("chunks", 0) or 0),
        pages=int(entry["pages"]) if entry.get("pages") is not None else None)


def correction_of(metadata: Mapping[str, Any]) -> SeriesCorrection:
    """A correction record's metadata as a SeriesCorrection."""
    return SeriesCorrection(
        doc_key=str(metadata.get("doc_key", "")), source=str(metadata.get("source", "")),
        series=str(metadata["series"]) if metadata.get("series") else None,
        dated=str(metadata["dated"]) if metadata.get("dated") else None,
        by=str(metadata.get("by", "")), at=str(metadata.get("at", "")))


class SupersededBy(BaseModel):
    """The version that replaced a document: the next newer one of its series."""

    source: str
    date: str
    received_at: str


class DocumentVersion(DocumentFacts):
    """One document version and where it stands: what `evidence documents` prints (its facts,
    then its place in its series)."""

    doc_key: str
    source: str
    type: str
    round_number: int | None = None
    series: str
    date: str = Field(description="the date that orders its series (ISO)")
    date_basis: str
    date_stated: bool
    received_at: str
    current: bool
    superseded_by: SupersededBy | None = None
    later_version: LaterVersion | None = Field(
        None, description="its series' current version, when it is not that version")
    stale: str | None = None
    earlier_versions: int = Field(0, description="versions of its series older than it")
    corrected: dict[str, str] = Field(default_factory=dict,
                                      description="what a reviewer set: series, dated")
    chunks: int = 0
    pages: int | None = None

    def standing(self) -> DocumentStanding:
        """How an excerpt of this version is labelled."""
        return DocumentStanding(
            kind=self.kind, title=self.title, series=self.series, date=self.date,
            date_basis=self.date_basis, date_stated=self.date_stated,
            period_start=self.period_start, period_end=self.period_end,
            valid_until=self.valid_until, current=self.current,
            earlier_versions=self.earlier_versions, stale=self.stale)

    def json_line(self) -> dict[str, Any]:
        """The JSON line of `evidence documents`."""
        return self.model_dump(mode="json")


def _slug(text: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))


def _scope_words(scope: str | None) -> frozenset[str]:
    """A scope's words that can tell one product from another, and each pair of neighbours
    run together ("Mastery Connect" is "MasteryConnect")."""
    if not scope:
        return frozenset()
    words = [w for w in re.findall(r"[a-z0-9]+", scope.lower())
             if not re.fullmatch(r"(?:19|20)\d\d", w)]
    joined = {a + b for a, b in zip(words, words[1:], strict=False)}
    return frozenset({w for w in words if w not in _STOP and len(w) > 2} | joined)


def _own_key(doc: StoredDocument) -> tuple[str, str | None]:
    """(the series a document's own facts give, the family it groups by when it has one)."""
    facts = doc.facts or DocumentFacts()
    # A reviewer's summary of a report (soc2_summary:TRACK) is its own series, per track.
    kind = (f"summary/{_slug(doc.type.partition(':')[2])}" if doc.type.startswith("soc2_summary:")
            else facts.kind)
    if facts.family and facts.kind in ("report", "certificate", "letter"):
        if facts.family == "key ceremony":  # an event: never a version of another ceremony
            return f"{kind}/key-ceremony/{facts.as_of or _slug(doc.source)}", None
        return f"{kind}/{_slug(facts.family)}", facts.family
    # A title that names what the document is ("Access Control Policy") names its series; one
    # that names only its owner does not, and the file's name does. Neither joins documents
    # that state neither a date nor a version: nothing would say which came first (a package
    # of pages that share one title, or files numbered 1 to 30, is not one document in
    # versions); the same file sent again is one all the same (`archived_of`).
    title = facts.title or ""
    if facts.stated_date is None and facts.version is None:
        return f"{kind}/{_slug(doc.source)}", None  # its own, whatever it is called
    named = title if NAMES_A_KIND.search(title) else ""
    name = series_words(named) or series_words(doc.source) or _slug(doc.source)
    return f"{kind}/{_slug(name)}", None


def series_keys(documents: Sequence[StoredDocument],
                corrections: Mapping[str, SeriesCorrection]) -> dict[str, str]:
    """doc_key -> series key. A family's documents whose scopes differ (two products'
    reports) are split by scope; a document that states no scope joins its family's largest
    scope; every version of one file name is in the series of its newest version."""
    keys: dict[str, str] = {}
    families: dict[str, list[StoredDocument]] = defaultdict(list)
    for doc in documents:
        if doc.archived_of:
            continue
        key, family = _own_key(doc)
        keys[doc.doc_key] = key
        if family is not None:
            families[key].append(doc)
    for key, members in families.items():
        # Two scopes are one when they share a word that not every scope of the family has
        # (the vendor's own name is in all of them; a product's name tells them apart).
        scoped = {doc.doc_key: _scope_words(doc.facts.scope if doc.facts else None)
                  for doc in members}
        given = [words for words in scoped.values() if words]
        common = frozenset.intersection(*given) if given else frozenset()
        clusters: list[tuple[set[str], list[StoredDocument]]] = []
        unscoped = []
        for doc in members:
            words = scoped[doc.doc_key] - common
            if not words:
                unscoped.append(doc)
                continue
            home = next((c for c in clusters if c[0] & words), None)
            if home is None:
                clusters.append((set(words), [doc]))
            else:
                home[0].update(words)
                home[1].append(doc)
        if len(clusters) < 2:
            continue
        clusters.sort(key=lambda c: -len(c[1]))
        # Each scope's series is named by the scope of its first document received, so its
        # name stays as later versions arrive.
        names = [_slug(min(docs, key=lambda d: d.received_at).facts.scope or "")[:48]
                 for _, docs in clusters]
        for name, (_, docs) in zip(names, clusters, strict=True):
            for doc in docs:
                keys[doc.doc_key] = f"{key}/{name}"
        for doc in unscoped:
            keys[doc.doc_key] = f"{key}/{names[0]}"
    for doc in documents:
        if doc.archived_of:
            keys[doc.doc_key] = keys.get(doc.archived_of) or _own_key(doc)[0]
    for doc_key, correction in corrections.items():
        if correction.series and doc_key in keys:
            keys[doc_key] = correction.series
    # A corrected newest version takes its file's earlier versions with it, unless they were
    # corrected themselves.
    for doc in documents:
        if doc.archived_of and doc.archived_of in corrections and not (
                corrections.get(doc.doc_key) and corrections[doc.doc_key].series):
            series = corrections[doc.archived_of].series
            if series:
                keys[doc.doc_key] = series
    return keys


def _dating(doc: StoredDocument, correction: SeriesCorrection | None) -> tuple[str, str, bool]:
    """(date, what it is, whether the text states it)."""
    if correction is not None and correction.dated:
        return correction.dated, "corrected", True
    stated = doc.facts.stated_date if doc.facts else None
    if stated is not None:
        return stated[0], stated[1], True
    return doc.received_at[:10], DATE_BASES[-1], False


def _stale(doc: StoredDocument, today: date, stale_after_days: int) -> str | None:
    """One sentence when current evidence went stale: a report whose period ended too long
    ago, a certificate past its expiry."""
    facts = doc.facts
    if facts is None:
        return None
    if (facts.kind == "certificate" and facts.valid_until
            and date.fromisoformat(facts.valid_until) < today):
        return f"The certificate expired on {facts.valid_until}."
    if facts.kind == "report" and facts.period_end:
        ended = date.fromisoformat(facts.period_end)
        if ended < today - timedelta(days=stale_after_days):
            span = ("over a year ago" if stale_after_days == 365
                    else f"over {stale_after_days} days ago")
            return f"The report's period ended {facts.period_end}, {span}."
    return None


def in_order(members: Sequence[StoredDocument],
             dated: Mapping[str, tuple[str, str, bool]]) -> list[StoredDocument]:
    """A series' versions, oldest first. Versions that state their date are ordered by it. A
    version that states none was sent after every version received before it, so it stands
    just after the newest of those by date (an undated file received first is the oldest);
    on one date, the one received last is the newer, and a file's newest version is newer
    than its earlier versions received at the same moment."""
    def key(doc: StoredDocument) -> tuple[str, str, bool]:
        day, _, stated = dated[doc.doc_key]
        if not stated:
            before = [dated[d.doc_key][0] for d in members
                      if dated[d.doc_key][2] and d.received_at < doc.received_at]
            day = max(before, default="")
        return day, doc.received_at, doc.archived_of is None
    return sorted(members, key=key)


def timeline(documents: Iterable[StoredDocument],
             corrections: Mapping[str, SeriesCorrection] | None = None, *,
             today: date, stale_after_days: int = 365) -> dict[str, DocumentVersion]:
    """doc_key -> every document version with its series, standing and staleness."""
    documents = list(documents)
    corrections = corrections or {}
    keys = series_keys(documents, corrections)
    dated = {doc.doc_key: _dating(doc, corrections.get(doc.doc_key)) for doc in documents}
    by_series: dict[str, list[StoredDocument]] = defaultdict(list)
    for doc in documents:
        by_series[keys[doc.doc_key]].append(doc)
    versions: dict[str, DocumentVersion] = {}
    for series, members in by_series.items():
        ordered = in_order(members, dated)
        current = ordered[-1]
        for position, doc in enumerate(ordered):
            day, basis, stated = dated[doc.doc_key]
            facts = doc.facts or DocumentFacts()
            newer = ordered[position + 1] if position + 1 < len(ordered) else None
            correction = corrections.get(doc.doc_key)
            versions[doc.doc_key] = DocumentVersion(
                **facts.model_dump(), doc_key=doc.doc_key, source=doc.source, type=doc.type,
                round_number=doc.round_number, series=series, date=day,
                date_basis=basis, date_stated=stated, received_at=doc.received_at,
                current=doc is current,
                superseded_by=None if newer is None else SupersededBy(
                    source=newer.source, date=dated[newer.doc_key][0],
                    received_at=newer.received_at),
                later_version=None if doc is current else LaterVersion(
                    source=current.source, date=dated[current.doc_key][0]),
                stale=_stale(doc, today, stale_after_days) if doc is current else None,
                earlier_versions=position,
                corrected={k: v for k, v in (("series", correction.series),
                                             ("dated", correction.dated))
                           if v} if correction else {},
                chunks=doc.chunks, pages=doc.pages)
    return versions
