"""The write protocol: every document version and every round stored whole or not at all.

A document is written in three steps: 1. the chunks of the new version; 2. the manifest
entry (with a new generation) that makes them visible; 3. the old version's chunks removed.
Chunks are embedded and written a step of at most 512 at a time, across documents (the next
step embedded while this one is written), so memory holds two steps' vectors whatever the size
of the ingest; each document is committed as soon as its last chunk is written.
A crash anywhere leaves the old version or the new one, never half of either: readers count
only chunks whose version the manifest names.

A questionnaire round is written in two steps: 1. one manifest write of every response's
link (the criterion it answers) with a new generation; 2. one upsert of the responses. A
response is visible exactly when its record exists; a link naming a record not written yet
(a crash between the steps) finds nothing, and the same ingest run again writes it. A round
replaced (`replace=True`) adds to step 1 a tombstone for each answer it withdraws and to the
one write of step 2 a marker over each such answer's record, then deletes the markers (3) and
the tombstones (4): see `EvidenceWriter.round`. Records and links already as the round would
write them are not written again."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from core.config import Settings
from core.controls.answers import searched_text
from core.encoders.embedding import Embedder
from core.errors import UserInputError
from core.hashing import short_hash
from core.ingest.documents import (
    PreparedDocument,
    check_documents,
    prepare_document,
    refuse_unreadable,
)
from core.ingest.rounds.payload import check_batch_vendor_ids, parse_payload, payload_records
from core.ingest.steps import current_steps, step
from core.models import (
    DOCUMENT_SOURCE_TYPE,
    PayloadLimits,
    QuestionnairePayload,
    StoredRecord,
)
from core.reports import (
    DocumentIngestReport,
    DocumentOutcome,
    Progress,
    QuestionnaireIngestReport,
    SkippedFile,
)
from core.store import (
    WITHDRAWN_KEY,
    EvidenceStore,
    VendorStore,
    check_vendor_id,
    chunk_record_id,
    is_withdrawn,
    link_metadata,
    record_fingerprint,
)
from core.store.protocol import (
    archive_chunks,
    commit_document,
    commit_links,
    delete_stale,
    delete_withdrawn,
    drop_archives,
    stored_round,
)
from core.store.records import withdrawn_link, withdrawn_marker
from core.timeline.series import ARCHIVED_OF_KEY, facts_entry

# What the readers make of a file is part of its version: when they learn more (version 2:
# each chunk's section heading path; 3: a PDF's running headers and footers dropped, its pages
# without a text layer read by OCR), ingesting the unchanged file again rewrites its chunks.
# What a document states of itself (its facts) is kept in its manifest entry with the version
# of the reading (`FACTS_VERSION`): read again, an unchanged file has only its entry rewritten.
READER_VERSION = 3
# One questionnaire payload, validated or as decoded from JSON.
RoundInput = QuestionnairePayload | dict[str, Any]
# Chunks embedded and written per step of a documents ingest (or the store's largest write,
# if smaller): only one step's vectors are ever held, whatever the size of the ingest.
WRITE_STEP = 512


def document_key(source: str, doc_type: str, round_number: int | None) -> str:
    """A document's identity: its name within its type and round. The same file name sent
    again as a follow-up document (or in another round) is new evidence beside the original,
    never a replacement of it."""
    return short_hash(f"{doc_type}|{round_number or ''}|{source}")


def archive_key(doc_key: str, version: str) -> str:
    """Where a file's earlier version is kept once a new version of it is ingested."""
    return short_hash(f"{doc_key}|archived|{version}")


@dataclass
class _Pending:
    """A document version to write; its records are made when its turn comes. `previous` is
    the manifest entry of the version it replaces, kept as an earlier version."""

    doc: PreparedDocument
    doc_key: str
    version: str
    previous: dict[str, Any] | None = None


class EvidenceWriter:
    """Writes documents and rounds into the store with the embedder the store was built with."""

    def __init__(self, settings: Settings, store: EvidenceStore,
                 embedder: Callable[[], Embedder]) -> None:
        self.settings = settings
        self.store = store
        self._embedder = embedder  # loaded on first use: a refusal needs no model

    @property
    def embedder(self) -> Embedder:
        return self._embedder()

    # Documents -----------------------------------------------------------------------

    def documents(self, vendor_id: str, paths: Iterable[Path | str], *, doc_type: str,
                  round_number: int | None, progress: Progress | None = None,
                  skip_unreadable: bool = False) -> DocumentIngestReport:
        """Validate every file first, then write each document completely or not at all. A
        file that cannot be read refuses the ingest, naming every such file, unless
        `skip_unreadable`: then the others are written and the report lists it."""
        check_vendor_id(vendor_id)
        if isinstance(paths, str | Path):  # one path, not the characters of one
            paths = [paths]
        s = self.settings
        # Type, round, every file found and its size: all refused before any file is read.
        files = check_documents([Path(p) for p in paths], doc_type=doc_type,
                                round_number=round_number, max_bytes=s.max_document_bytes,
                                skip_unreadable=skip_unreadable)
        prepared, skipped = [], []
        for i, doc in enumerate(files, start=1):
            try:
                prepared.append(prepare_document(doc, s.chunk_size, s.chunk_overlap,
                                                 max_bytes=s.max_document_bytes))
            except UserInputError as exc:
                skipped.append(SkippedFile(source=doc.source, reason=str(exc)))
            if progress:
                progress("reading", i, len(files))
        refuse_unreadable(skipped, skip_unreadable, len(files))
        report = self.prepared_documents(vendor_id, prepared, doc_type=doc_type,
                                         round_number=round_number, progress=progress)
        return report.model_copy(update={"skipped": skipped})

    def prepared_documents(self, vendor_id: str, prepared: Sequence[PreparedDocument], *,
                           doc_type: str = "tc_files", round_number: int | None = None,
                           progress: Progress | None = None) -> DocumentIngestReport:
        """Write documents already read and chunked, each completely or not at all."""
        check_vendor_id(vendor_id)
        # Everything from reading the manifest to deleting a replaced version happens under
        # the store's write lock, so a concurrent writer cannot interleave (core/store/locking.py).
        with self.store.write_lock(self._waiting(progress)):
            written, outcomes = self._documents_locked(vendor_id, prepared, doc_type,
                                                       round_number, progress)
        return DocumentIngestReport(vendor_id=vendor_id, type=doc_type,
                                    round_number=round_number, documents=outcomes,
                                    chunks_written=written)

    def _documents_locked(self, vendor_id: str, prepared: Sequence[PreparedDocument],
                          doc_type: str, round_number: int | None, progress: Progress | None
                          ) -> tuple[int, list[DocumentOutcome]]:
        s = self.settings
        existing = self.existing_vendor(vendor_id)
        committed = existing.documents() if existing else {}
        outcomes: list[DocumentOutcome] = []
        pending: list[_Pending] = []
        reread: list[tuple[str, dict[str, Any]]] = []  # unchanged files read anew
        for doc in prepared:
            doc_key = document_key(doc.source, doc_type, round_number)
            version = short_hash(f"{doc.digest}|{s.chunk_size}|{s.chunk_overlap}|{doc_type}|"
                                 f"{round_number}|{READER_VERSION}")
            previous = committed.get(doc_key)
            if previous and previous.get("version") == version:
                outcomes.append(DocumentOutcome(source=doc.source, status="unchanged",
                                                chunks=int(previous["chunks"]), pages=doc.pages))
                if facts_entry(doc.facts) != {k: previous.get(k) for k in facts_entry(doc.facts)}:
                    reread.append((doc_key, {**previous, **facts_entry(doc.facts)}))
                continue
            outcomes.append(DocumentOutcome(source=doc.source,
                                            status="replaced" if previous else "added",
                                            chunks=len(doc.chunks), pages=doc.pages,
                                            earlier_version_kept=True if previous else None))
            pending.append(_Pending(doc, doc_key, version, previous))

        written = self._write_documents(vendor_id, pending, doc_type, round_number, progress)
        with step("write"):
            if existing and reread:  # what they state of themselves, as this reading reads it
                commit_document(existing, reread)
            if existing:
                written_keys = {p.doc_key for p in pending}
                for doc in prepared:  # finish any clean-up an interrupted run left behind
                    doc_key = document_key(doc.source, doc_type, round_number)
                    if doc_key in committed and doc_key not in written_keys:
                        delete_stale(existing, doc_key, committed[doc_key]["version"])
        return written, outcomes

    @staticmethod
    def _waiting(progress: Progress | None) -> Callable[[str], None] | None:
        """Tells the progress callback, once, that the ingest waits for another writer."""
        if progress is None:
            return None
        return lambda message: progress("waiting for another writer", 0, 1)

    def write_step(self) -> int:
        """Chunks embedded and written at a time by a documents ingest."""
        return max(1, min(WRITE_STEP, self.store.max_batch_size()))

    def _write_documents(self, vendor_id: str, pending: Sequence[_Pending], doc_type: str,
                         round_number: int | None, progress: Progress | None) -> int:
        """Embed and write the documents' chunks in steps of `write_step()` (a step may hold
        the end of one document and the start of the next), and commit each document once
        its last chunk is written. The vendor is created only when the first step's vectors
        are ready, so an embedder failing in the first step leaves the store untouched."""
        total = sum(len(item.doc.chunks) for item in pending)
        step_size = self.write_step()
        vendor: VendorStore | None = None
        written = 0

        def steps() -> Iterator[tuple[list[StoredRecord], list[_Pending]]]:
            """(chunks, documents whose last chunk is among them), a step at a time."""
            step: list[StoredRecord] = []
            finished: list[_Pending] = []
            for item in pending:
                records = document_records(vendor_id, item.doc, item.doc_key, item.version,
                                           doc_type, round_number)
                if not records:
                    finished.append(item)
                for index, record in enumerate(records, start=1):
                    step.append(record)
                    if index == len(records):
                        finished.append(item)
                    if len(step) == step_size:
                        yield step, finished
                        step, finished = [], []
            if step or finished:
                yield step, finished

        embedder = self.embedder  # loaded here, not on the embedding thread
        timed = current_steps()  # the embedding thread times its step into this ingest's

        def embed(records: list[StoredRecord]) -> np.ndarray | None:
            if not records:
                return None
            with step("embed", timed):
                return self.embed([r.text for r in records], None)

        # The next step is embedded on a second thread while this one is written: the model
        # and ChromaDB's writes both release the interpreter, so the writes cost little time
        # of their own. Every write stays on this thread, in order; a step's vectors are
        # complete before any of its chunks is written.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed") as embedding:
            upcoming = steps()
            current = next(upcoming, None)
            vectors_ahead = embedding.submit(embed, current[0]) if current else None
            try:
                while current is not None and vectors_ahead is not None:
                    records, finished = current
                    vectors = vectors_ahead.result()
                    current = next(upcoming, None)
                    vectors_ahead = embedding.submit(embed, current[0]) if current else None
                    if records and progress:
                        progress("embedding", written + len(records), total)
                    with step("write"):
                        if vendor is None:
                            vendor = self.store.open_vendor(vendor_id, create=True,
                                                            embedding_model=embedder.name)
                        if records:
                            vendor.write_chunks(records, vectors)  # 1. the new chunks
                        for item in finished:
                            self._commit_document(vendor, item, doc_type, round_number)
                    written += len(records)
            finally:
                if vectors_ahead is not None:
                    vectors_ahead.cancel()
        return written

    def _commit_document(self, vendor: VendorStore, item: _Pending, doc_type: str,
                         round_number: int | None) -> None:
        """Steps 2 and 3 of a document whose chunks are all written. A file sent again with
        other content keeps its earlier version, as superseded: before step 2 the earlier
        version's chunks are copied under the key of its archive (invisible until step 2
        names it), step 2 names both versions at once, and step 3 removes the earlier
        version's chunks under the file's own key."""
        doc = item.doc
        manifest: dict[str, Any] = {
            "source": doc.source, "type": doc_type, "digest": item.version,
            "version": item.version, "file_sha256": doc.digest, "chunks": len(doc.chunks),
            "ingested_at": datetime.now(UTC).isoformat(timespec="seconds"),
            **facts_entry(doc.facts),
        }
        if round_number is not None:
            manifest["round_number"] = round_number
        if doc.pages is not None:
            manifest["pages"] = doc.pages
        entries = [(item.doc_key, manifest)]
        if item.previous is not None:
            archived = archive_key(item.doc_key, str(item.previous["version"]))
            archive_chunks(vendor, item.doc_key, archived, str(item.previous["version"]))
            entries.append((archived, {**item.previous, ARCHIVED_OF_KEY: item.doc_key}))
        commit_document(vendor, entries)  # 2. visible
        delete_stale(vendor, item.doc_key, item.version)  # 3. the old version gone
        if item.previous is not None:
            drop_archives(vendor, item.doc_key, item.version)

    # Questionnaire rounds ------------------------------------------------------------

    def round(self, payload: RoundInput | Sequence[QuestionnairePayload], *, replace: bool = False,
              progress: Progress | None = None) -> QuestionnaireIngestReport:
        """Store a whole round: its links with a new generation, then every response in one
        write (all of them, or none). Several payloads (a round may span several, of at most
        100 responses each) must name one vendor and round; they are written together, as one.

        Payloads of a round accumulate: responses already stored stay. With `replace`, the
        round becomes exactly these payloads' responses, and the report says how many answers
        that removed. The protocol, each step one ChromaDB call:

        1. one manifest write: the link of every response whose link differs from the stored
           one, a tombstone (`core.store.records.withdrawn_link`) for every answer withdrawn, and a
           new generation. Nothing a reader shows changes yet: a tombstone keeps the answer's
           criterion keys, and a reader shows a response exactly when its record exists.
        2. one chunk upsert: every response whose stored record differs, and over the record
           of every withdrawn answer a marker (`core.store.records.withdrawn_marker`: no text, no
           criterion keys) that no reader shows. This one write is the commit: the round
           goes from as before to exactly the new set at once, for every reader.
        3. the markers deleted; 4. the tombstones deleted. Neither changes what a reader
           shows.

        Why the withdrawal is in step 2 and not in step 1's link write: a round's responses
        are written after their links (a record's id is fixed by the contract, so a changed
        answer overwrites the old one in place), so hiding the withdrawn answers with the
        links would show the round without them but with its old answers after a kill
        between the two writes, which is neither state. Readers keep records and the lexical
        index settles by the links' fingerprints; a tombstone has none, so no reader keeps a
        withdrawn answer past step 2 (see `core.retrieval.links.LinkSet`).

        A process killed anywhere leaves round N as before (before step 2) or exactly the new
        set (after it); the same replacement run again writes only what is missing, and any
        ingest of the round deletes the markers and tombstones an interrupted one left. Sent
        again unchanged, a round writes nothing."""
        payloads = self._round_payloads(payload)
        vendor_id, round_number = payloads[0].vendor_id, payloads[0].round_number
        self.existing_vendor(vendor_id)
        records = [record for p in payloads for record in payload_records(p)]
        # An answer keyed by a control is searched with the control's title and statement.
        vectors = self.embed([searched_text(r.text, r.metadata) for r in records], progress)
        with step("write"), self.store.write_lock(self._waiting(progress)):
            existing = self.existing_vendor(vendor_id)
            plan = _plan_round(existing, round_number, records, replace=replace)
            self._check_round_size(plan, vendor_id, round_number)
            if plan.writes_anything():
                vendor = existing or self.store.open_vendor(
                    vendor_id, create=True, embedding_model=self.embedder.name)
                self._write_round(vendor, plan, records, vectors)
        return QuestionnaireIngestReport(indexed_count=len(records), round_number=round_number,
                                         vendor_id=vendor_id,
                                         removed_count=plan.removed if replace else None)

    def _round_payloads(self, payload: RoundInput | Sequence[QuestionnairePayload]
                        ) -> list[QuestionnairePayload]:
        """The payloads of one round, each validated, refused when they name several rounds
        or when two of them answer the same question. Several payloads come validated (a
        list of QuestionnairePayload); anything else is one payload as decoded from JSON, so
        a JSON list is refused as not an object."""
        several = (isinstance(payload, list | tuple) and bool(payload)
                   and all(isinstance(p, QuestionnairePayload) for p in payload))
        items = list(payload) if several else [payload]  # type: ignore[arg-type]
        limits = PayloadLimits.from_settings(self.settings)
        payloads = []
        for item in items:
            if not isinstance(item, QuestionnairePayload):
                payloads.append(parse_payload(item, limits=limits))
                continue
            # A validated payload larger than the bulk API's unit (a standard questionnaire
            # read from a workbook) is that many payloads of one round, written as one.
            step = self.settings.max_responses_per_round
            payloads.extend(item.model_copy(update={"responses": item.responses[at:at + step]})
                            for at in range(0, len(item.responses), step))
        check_one_round(payloads)
        first_seen: dict[str, int] = {}
        for number, item in enumerate(payloads, start=1):
            for record in payload_records(item):
                earlier = first_seen.setdefault(record.id, number)
                if earlier != number:
                    question = str(record.metadata["question_text"])
                    shown = question if len(question) <= 60 else question[:57] + "..."
                    raise UserInputError(
                        f"Payloads {earlier} and {number} of round {item.round_number} of "
                        f"vendor '{item.vendor_id}' both answer the question {shown!r} (for "
                        "the same criterion); a round given in several payloads holds each "
                        "answer once.")
        return payloads

    def _check_round_size(self, plan: _RoundPlan, vendor_id: str, round_number: int) -> None:
        """Steps 1 and 2 are one call each; refuse, before writing, a round that does not fit
        (a link write holds the generation record besides)."""
        largest = self.store.max_batch_size()
        needed = max(len(plan.links) + len(plan.tombstones) + 1,
                     len(plan.records) + len(plan.markers))
        if needed > largest:
            raise UserInputError(
                f"Round {round_number} of vendor '{vendor_id}' needs {needed} records in one "
                f"write, more than the store takes at once ({largest}); send fewer responses "
                "in one command.")

    def _write_round(self, vendor: VendorStore, plan: _RoundPlan,
                     records: Sequence[StoredRecord], vectors: np.ndarray) -> None:
        """Steps 1 to 4 of `round`, each skipped when it has nothing to write."""
        if plan.links or plan.tombstones:  # 1. links and tombstones, and a new generation
            commit_links(vendor, plan.links, plan.tombstones)
        if plan.records or plan.markers:  # 2. the responses and the markers, all or none
            rows = {r.id: i for i, r in enumerate(records)}
            parts = [vectors[[rows[r.id] for r in plan.records]]] if plan.records else []
            if plan.markers:
                parts.append(vendor.vectors([m.id for m in plan.markers]))
            vendor.write_chunks([*plan.records, *plan.markers], np.concatenate(parts))
        # 3. the markers, 4. the tombstones
        delete_withdrawn(vendor, plan.delete_records, plan.delete_links)

    def rounds(self, payloads: Sequence[QuestionnairePayload], *, replace: bool = False,
               progress: Progress | None = None) -> Iterator[QuestionnaireIngestReport]:
        """Several rounds: every vendor id is checked before the first is written (a refusal
        never leaves half a batch), then one report per round as it is stored.

        With `replace`, the payloads must all name one vendor and round (a replacement is one
        atomic step, so one round at a time): they become that round, and one report says so."""
        if replace:
            check_one_round(payloads, what="files given to replace",
                            why="a replacement makes one round at a time (in one atomic "
                                "step); replace each round on its own")
        check_batch_vendor_ids((p.vendor_id for p in payloads), self.store, self.embedder.name)
        if replace:
            if payloads:
                yield self.round(list(payloads), replace=True, progress=progress)
            return
        for payload in payloads:
            yield self.round(payload, progress=progress)

    # Shared --------------------------------------------------------------------------

    def embed(self, texts: Sequence[str], progress: Progress | None, *, done: int = 0,
              total: int | None = None) -> np.ndarray:
        """Every text's vector, embedded in steps so progress can be shown (as `done` more
        of `total`, when these texts are part of a larger ingest)."""
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        total = len(texts) if total is None else total
        size = max(self.settings.embed_batch_size * 4, 1)
        embedder = self.embedder
        parts = []
        with step("embed"):
            for start in range(0, len(texts), size):
                parts.append(embedder.embed(texts[start : start + size]))
                if progress:
                    progress("embedding", done + min(start + size, len(texts)), total)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def existing_vendor(self, vendor_id: str) -> VendorStore | None:
        """The vendor's collections if it exists; a case-only clash is refused before any
        embedding or write."""
        if self.store.existing(vendor_id):
            return self.store.open_vendor(vendor_id, embedding_model=self.embedder.name)
        return None


def check_one_round(payloads: Sequence[QuestionnairePayload], *, what: str = "payloads",
                    why: str = "payloads stored together make one round") -> None:
    """Refuse payloads naming more than one (vendor, round), in one sentence naming two."""
    rounds = list(dict.fromkeys((p.vendor_id, p.round_number) for p in payloads))
    if len(rounds) > 1:
        (first_vendor, first_round), (vendor_id, round_number) = rounds[:2]
        other = (f"round {round_number} of vendor '{vendor_id}'" if vendor_id != first_vendor
                 else f"round {round_number}")
        raise UserInputError(
            f"The {what} name round {first_round} of vendor '{first_vendor}' and {other}, "
            f"but {why}.")


@dataclass
class _RoundPlan:
    """What storing a round takes, from the store as it is (read under the write lock)."""

    records: list[StoredRecord]  # responses whose stored record differs (or is missing)
    links: list[StoredRecord]  # responses whose stored link differs (or is missing)
    tombstones: list[dict[str, Any]]  # links of withdrawn answers, made tombstones
    markers: list[StoredRecord]  # withdrawn answers whose record is not a marker yet
    delete_records: list[str]  # ids of the withdrawn answers' records (markers after step 2)
    delete_links: list[str]  # ids of the withdrawn answers' links (tombstones after step 1)
    removed: int  # answers removed from the round: their record stored, visible or marked

    def writes_anything(self) -> bool:
        return bool(self.records or self.links or self.tombstones or self.markers
                    or self.delete_records or self.delete_links)


def _plan_round(vendor: VendorStore | None, round_number: int,
                records: Sequence[StoredRecord], *, replace: bool) -> _RoundPlan:
    """Compare the round's responses with what round `round_number` holds. Withdrawn: with
    `replace`, every answer of the round these responses do not hold; without, only the
    markers and tombstones an interrupted replacement left (already invisible)."""
    stored, links = stored_round(vendor, round_number) if vendor else ({}, {})
    wanted = {r.id for r in records}
    changed = [r for r in records
               if stored.get(r.id, ("", {}))[0] != record_fingerprint(r.text, dict(r.metadata))]
    relinked = [r for r in records if links.get(r.id) != link_metadata(r)]
    if replace:
        gone = (set(stored) | set(links)) - wanted
    else:
        gone = ({i for i, (_, meta) in stored.items() if is_withdrawn(meta)}
                | {i for i, meta in links.items() if meta.get(WITHDRAWN_KEY)}) - wanted
    gone_ids = sorted(gone)
    visible = [i for i in gone_ids if i in stored and not is_withdrawn(stored[i][1])]
    tombstones = [withdrawn_link(i, links.get(i) or stored[i][1]) for i in gone_ids
                  if not links.get(i, {}).get(WITHDRAWN_KEY)
                  and (i in links or i in visible)]
    return _RoundPlan(
        records=changed, links=relinked, tombstones=tombstones,
        markers=[withdrawn_marker(i, stored[i][1]) for i in visible],
        delete_records=[i for i in gone_ids if i in stored],
        delete_links=[i for i in gone_ids if i in links or i in visible],
        removed=sum(i in stored for i in gone_ids))


def document_records(vendor_id: str, doc: PreparedDocument, doc_key: str, version: str,
                     doc_type: str, round_number: int | None) -> list[StoredRecord]:
    """One record per chunk of a document version, with the metadata retrieval reads: the
    PDF page and the section (heading path) where the document has them."""
    records = []
    for index, chunk in enumerate(doc.chunks):
        metadata: dict[str, Any] = {
            "source_type": DOCUMENT_SOURCE_TYPE,
            "type": doc_type,
            "source": doc.source,
            "vendor_id": vendor_id,
            "doc_key": doc_key,
            "doc_sha": version,
            "chunk_index": index,
        }
        if chunk.page is not None:
            metadata["page"] = chunk.page
        if chunk.section:
            metadata["section"] = chunk.section
        if chunk.ocr:
            metadata["ocr"] = True
        if round_number is not None:
            metadata["round_number"] = round_number
        records.append(StoredRecord(id=chunk_record_id(doc_key, version, index), text=chunk.text,
                                    metadata=metadata))
    return records

