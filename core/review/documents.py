"""A reviewer's corrections of document series: put a document in another series (or a new
one), date it where the workbench read its date wrong, or undo both. Corrections are kept in
the vendor's store (a manifest record per document, `core.timeline.series.SeriesCorrection`)
and every reader sees them at once; the series themselves are decided in
`core.timeline.series`."""

from __future__ import annotations

import unicodedata
from datetime import UTC, date, datetime

from core.errors import UserInputError
from core.retrieval.catalog import Catalog
from core.review.decisions import check_reviewer, default_reviewer
from core.store import KIND_KEY, EvidenceStore
from core.store.protocol import commit_record
from core.timeline.series import CORRECTION_KIND, DocumentVersion
from core.trace.context import version_note

MAX_SERIES_CHARS = 120
_PREFIX = "series:"


def correction_record_id(doc_key: str) -> str:
    """The manifest record holding a document's correction."""
    return f"{_PREFIX}{doc_key}"


def _one_line(name: str, value: str, most: int) -> str:
    text = " ".join(str(value).split())
    if not text or len(text) > most or any(
            unicodedata.category(c) in ("Cc", "Cf") for c in text):
        raise UserInputError(f"{name} must be 1 to {most} characters of plain text on one line.")
    return text


def _day(value: str) -> str:
    try:
        return date.fromisoformat(str(value).strip()).isoformat()
    except ValueError:
        raise UserInputError(f"{str(value)[:30]!r} is not a date as YYYY-MM-DD.") from None


class SeriesCorrections:
    """Reads the vendor's document versions and keeps a reviewer's corrections of them."""

    def __init__(self, store: EvidenceStore, catalog: Catalog, *,
                 reviewer: str | None = None) -> None:
        self.store = store
        self.catalog = catalog
        self.reviewer = reviewer  # who corrects when no one is named (EVIDENCE_REVIEWER)

    def find(self, vendor_id: str, target: str,
             versions: list[DocumentVersion] | None = None) -> DocumentVersion:
        """The document a reviewer names: by its doc_key, else by its file name (the file's
        newest version, where it was sent more than once)."""
        versions = self.catalog.document_versions(vendor_id) if versions is None else versions
        named = target.strip()
        by_key = [v for v in versions if v.doc_key == named]
        by_source = [v for v in versions if v.source == named]
        found = by_key or sorted(by_source, key=lambda v: v.received_at)[-1:]
        if not found:
            raise UserInputError(
                f"Vendor '{vendor_id}' holds no document named {named[:80]!r}; "
                f"`evidence documents --vendor {vendor_id}` lists them.")
        return found[0]

    def correct(self, vendor_id: str, target: str, *, series: str | None = None,
                dated: str | None = None, reset: bool = False, reviewer: str | None = None
                ) -> DocumentVersion:
        """Record a correction of one document (checked whole before anything is written)
        and return the document as it stands after it: `series` (another document's file
        name, whose series it joins, a series key, or a new name), `dated` (YYYY-MM-DD), or
        `reset` (undo its corrections)."""
        by = check_reviewer(reviewer if reviewer is not None
                            else default_reviewer(self.reviewer))
        if reset and (series is not None or dated is not None):
            raise UserInputError("--reset undoes a document's corrections; give it alone, "
                                 "without --series or --dated.")
        if not reset and series is None and dated is None:
            raise UserInputError("Say what to correct: --series, --dated or --reset.")
        versions = self.catalog.document_versions(vendor_id)
        document = self.find(vendor_id, target, versions)
        record_id = correction_record_id(document.doc_key)
        if reset:
            metadata = None
        else:
            kept = dict(document.corrected)
            if series is not None:
                wanted = _one_line("--series", series, MAX_SERIES_CHARS)
                joined = [v for v in versions if v.source == wanted or v.doc_key == wanted]
                kept["series"] = joined[0].series if joined else wanted
            if dated is not None:
                kept["dated"] = _day(dated)
            metadata = {KIND_KEY: CORRECTION_KIND, "doc_key": document.doc_key,
                        "source": document.source, **kept, "by": by,
                        "at": datetime.now(UTC).isoformat(timespec="seconds")}
        vendor = self.store.open_vendor(vendor_id)
        with self.store.write_lock():
            commit_record(vendor, record_id, metadata)
        return self.find(vendor_id, document.doc_key)


def version_line(version: DocumentVersion) -> str:
    """One document version for people: its standing, name, date and who issued it."""
    issued = f"; {version.issuer}" if version.issuer and version.issuer != "the vendor" else ""
    opinion = f"; opinion {version.opinion}" if version.opinion else ""
    said = version_note(version.standing(), version.later_version)
    if version.superseded_by is not None and version.later_version is not None and (
            version.superseded_by.source != version.later_version.source
            or version.superseded_by.date != version.later_version.date):
        said += (f" (superseded first by {version.superseded_by.source}, "
                 f"{version.superseded_by.date})")
    title = f" \"{version.title}\"" if version.title else ""
    corrected = (" [corrected: " + ", ".join(f"{k} {v}" for k, v in version.corrected.items())
                 + "]") if version.corrected else ""
    return f"{version.source}{title}: {said}{issued}{opinion}{corrected}"


def documents_text(versions: list[DocumentVersion]) -> str:
    """`evidence documents --format text`: each series with its current version first, then
    its earlier versions, each with its date, what superseded it and whether it is stale."""
    if not versions:
        return "The vendor holds no documents."
    lines: list[str] = []
    series = list(dict.fromkeys(v.series for v in versions))
    for key in series:
        members = [v for v in versions if v.series == key]
        count = f"{len(members)} versions" if len(members) > 1 else "1 version"
        lines.append(f"Series {key} ({count})")
        for version in members:
            mark = "current " if version.current else "earlier "
            lines.append(f"  {mark}{version_line(version)}")
            lines += [f"      {matter}" for matter in version.matters]
        lines.append("")
    return "\n".join(lines).rstrip()
