"""One vendor's evidence in ChromaDB: its chunk collection and its manifest collection, read
and written in the project's own types.

This is the one place that calls a vendor's collections and reads ChromaDB's result
dictionaries: results become `StoredChunk`s (with their scores where searched), manifest
entries and link records; filters arrive as `core.store.filters.Where` and are translated
here, once, into ChromaDB's dialect."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from core.models import StoredRecord
from core.store import writes
from core.store.filters import Where
from core.store.records import (
    KIND_KEY,
    LINK_KIND,
    MANIFEST_GENERATION_ID,
    Neighbour,
    StoredChunk,
    is_withdrawn,
)
from core.store.scoping import (
    SCOPED_SINCE,
    read_back,
    scoped_where,
    stored_metadata,
    with_scopes,
    without_scopes,
)

# Records per page of a metadata lookup.
PAGE_SIZE = 5000
FilterInput = Where | Mapping[str, Any] | None
_CHROMA_OPERATORS = {"eq": "$eq", "ne": "$ne", "in": "$in"}


def chroma_where(where: FilterInput) -> dict[str, Any] | None:
    """The filter in ChromaDB's `where` dialect (None: no filter)."""
    found = Where.of(where)
    if not found:
        return None
    parts = [{c.key: c.value if c.op == "eq" else
              {_CHROMA_OPERATORS[c.op]: list(c.value) if c.op == "in" else c.value}}
             for c in found.conditions]
    return parts[0] if len(parts) == 1 else {"$and": parts}


def present_rows(page: dict[str, Any], include: Sequence[str]) -> list[int]:
    """Positions of the records a read really returned. A ChromaDB server that deletes a record
    while a read runs can still answer its id, with no metadata: that record is gone."""
    metadatas = page.get("metadatas") if "metadatas" in include else None
    if metadatas is None:
        return list(range(len(page["ids"])))
    return [i for i, metadata in enumerate(metadatas) if metadata is not None]


def get_all(collection: Any, *, where: FilterInput = None,
            include: Sequence[str] = ("metadatas",), page_size: int = PAGE_SIZE
            ) -> dict[str, list]:
    """collection.get(where=...) paged, so every match comes back at any corpus size."""
    ids: list[str] = []
    columns: dict[str, list] = {name: [] for name in include}
    offset = 0
    translated = chroma_where(where)
    while True:
        page = collection.get(where=translated, include=list(include), limit=page_size,
                              offset=offset)
        present = present_rows(page, include)
        ids.extend(page["ids"][i] for i in present)
        for name in include:
            values = page.get(name)
            if values is not None:
                columns[name].extend(values[i] for i in present)
        if len(page["ids"]) < page_size:
            break
        offset += page_size
    return {"ids": ids, **columns}


def _chunks_of(found: dict[str, list], *, vectors: bool = False, text: bool = True
               ) -> list[StoredChunk]:
    """The records of a read, with their texts (or "" for each: `text=False`)."""
    documents = found.get("documents") or [None] * len(found["ids"])
    chunks = []
    for i, record_id in enumerate(found["ids"]):
        record_text, metadata = read_back(documents[i], found["metadatas"][i])
        chunks.append(StoredChunk(
            record_id, record_text if text else "", metadata,
            np.asarray(found["embeddings"][i], dtype=np.float32) if vectors else None))
    return chunks


def _schema_version(collection: Any) -> int:
    version = (collection.metadata or {}).get("schema_version")
    return version if isinstance(version, int) and not isinstance(version, bool) else 0


class HasEmbedding(Protocol):
    embedding: np.ndarray


class VendorStore:
    """The vendor's two collections. `chunks` holds document chunks, follow-up responses and
    withdrawn markers; `manifest` the committed document versions, the follow-ups' links and
    the generation record. Outside `core.store` only tests read the collections themselves."""

    def __init__(self, vendor_id: str, chunks: Any, manifest: Any, *,
                 batch_size: Callable[[], int] | None = None,
                 chunk_writer: Callable[[VendorStore, Sequence[StoredRecord], Any], None]
                 | None = None,
                 before_write: Callable[[Callable[[], bool] | None], None] | None = None
                 ) -> None:
        self.vendor_id = vendor_id
        self.chunks = chunks
        self.manifest = manifest
        self._batch_size = batch_size
        self._chunk_writer = chunk_writer
        # Told before every write to either collection (the store's register of vendors
        # marks the vendor pending until the writer records what it left); given, for a write
        # that may change nothing, what tells whether it changes anything, asked only when
        # the register needs to know.
        self._before_write = before_write or (lambda changes: None)

    @property
    def scoped(self) -> bool:
        """Whether every record of the vendor carries its scoped filter keys
        (core/store/scoping.py): both collections record schema 6 or later."""
        return all(_schema_version(c) >= SCOPED_SINCE for c in (self.chunks, self.manifest))

    def scope_filter(self, where: FilterInput) -> Where | None:
        """The filter as this vendor's records are asked it: on the scoped keys where the
        records carry them, so its cost is the vendor's, not the store's."""
        found = Where.of(where)
        if not found or not self.scoped:
            return found
        return scoped_where(self.vendor_id, found)

    @property
    def collection_id(self) -> str:
        """The chunk collection's id: another store's (or a re-made vendor's) differs."""
        return str(self.chunks.id)

    def batch_size(self) -> int:
        """The most records one write or one read by id takes."""
        return self._batch_size() if self._batch_size else PAGE_SIZE

    # Chunks: reads ---------------------------------------------------------------------

    def count_chunks(self) -> int:
        return int(self.chunks.count())

    def records(self, where: FilterInput = None, *, text: bool = True,
                page_size: int = PAGE_SIZE) -> list[StoredChunk]:
        """Every chunk record whose metadata matches (markers included), with its text (or
        with none: `text=False`)."""
        include = ("documents", "metadatas") if text else ("metadatas",)
        return _chunks_of(get_all(self.chunks, where=self.scope_filter(where), include=include,
                                  page_size=page_size), text=text)

    def record_ids(self, where: FilterInput = None, *, page_size: int = PAGE_SIZE) -> list[str]:
        return get_all(self.chunks, where=self.scope_filter(where), include=(),
                       page_size=page_size)["ids"]

    def records_by_ids(self, ids: Sequence[str], *, vectors: bool = False,
                       batch_size: int | None = None) -> list[StoredChunk]:
        """The records of these ids that exist, in the store's order, a batch at a time."""
        include = ["documents", "metadatas"] + (["embeddings"] if vectors else [])
        batch = batch_size or len(ids) or 1
        found: list[StoredChunk] = []
        for start in range(0, len(ids), batch):
            page = self.chunks.get(ids=list(ids[start : start + batch]), include=include)
            present = present_rows(page, include)
            found += _chunks_of({name: [page[name][i] for i in present]
                                 for name in ("ids", *include)}, vectors=vectors)
        return found

    def vectors(self, ids: Sequence[str]) -> np.ndarray:
        """The stored vectors of these records, in the order of `ids`."""
        found = self.chunks.get(ids=list(ids), include=["embeddings"])
        by_id = dict(zip(found["ids"], found["embeddings"], strict=True))
        return np.asarray([by_id[i] for i in ids], dtype=np.float32)

    def holds_any(self, where: FilterInput) -> bool:
        """Whether any chunk record matches (a one-record lookup)."""
        return bool(self.chunks.get(where=chroma_where(self.scope_filter(where)), limit=1,
                                    include=[])["ids"])

    def page(self, where: FilterInput = None, *, contains: str | None = None, limit: int,
             offset: int) -> tuple[list[StoredChunk], int]:
        """One page of `limit` chunk records (those deleted while read left out), only those
        holding `contains` in their text (case aside) when it is given, and how many the page
        read. The text is matched here: ChromaDB indexes no chunk text for `where_document`."""
        found = self.chunks.get(where=chroma_where(self.scope_filter(where)),
                                limit=limit, offset=offset, include=["documents", "metadatas"])
        present = present_rows(found, ("metadatas",))
        chunks = _chunks_of({name: [found[name][i] for i in present]
                             for name in ("ids", "documents", "metadatas")})
        if contains:
            needle = contains.casefold()
            chunks = [c for c in chunks if needle in c.text.casefold()]
        return chunks, len(found["ids"])

    def bare_query(self, embedding: np.ndarray, n: int) -> int:
        """One unfiltered nearest-neighbour query, nothing converted: the floor a retrieval is
        measured against. Returns how many records it answered."""
        return len(self.chunks.query(query_embeddings=[embedding], n_results=n)["ids"][0])

    def unreachable_by_search(self, *, batch: int = 256, window: int = 10) -> list[str]:
        """Ids of records the vector search does not return for their own vector, among its
        `window` nearest: an approximate index can stop returning live records after many
        deletes and upserts (chroma#7758), and such a record is found by `get` alone."""
        total = self.count_chunks()
        unreachable: list[str] = []
        offset = 0
        while offset < total:
            page = self.chunks.get(include=["embeddings"], limit=batch, offset=offset)
            if not page["ids"]:
                break
            found = self.chunks.query(query_embeddings=page["embeddings"],
                                      n_results=min(window, total), include=[])
            unreachable += [record_id for record_id, hits in zip(page["ids"], found["ids"],
                                                                 strict=True)
                            if record_id not in hits]
            offset += len(page["ids"])
        return unreachable

    # Chunks: writes --------------------------------------------------------------------

    def write_again(self, ids: Sequence[str]) -> None:
        """Write these records again exactly as they are stored (text, metadata and vector),
        so the vector index holds them afresh."""
        if ids:
            self._before_write(None)
        batch = self.batch_size()
        for start in range(0, len(ids), batch):
            page = self.chunks.get(ids=list(ids[start : start + batch]),
                                   include=["embeddings", "documents", "metadatas"])
            if page["ids"]:
                records = _chunks_of(page)
                writes.apply(self.chunks, "upsert", ids=page["ids"],
                             embeddings=page["embeddings"],
                             metadatas=[stored_metadata(self.vendor_id, c.text, c.metadata)
                                        for c in records])

    def write_chunks(self, records: Sequence[StoredRecord],
                     embeddings: np.ndarray | Sequence[Sequence[float]]) -> None:
        """Write chunk records (document chunks, responses, markers) with their vectors,
        through the store's chunk writer (`EvidenceStore.upsert`) when it has one."""
        if self._chunk_writer is not None:
            self._chunk_writer(self, records, embeddings)
        else:
            self.upsert_batches(records, embeddings)

    def upsert_batches(self, records: Sequence[StoredRecord],
                       embeddings: np.ndarray | Sequence[Sequence[float]]) -> None:
        """Upsert in batches under the client's maximum batch size."""
        if records:
            self._before_write(None)
        batch = self.batch_size()
        for start in range(0, len(records), batch):
            part = records[start : start + batch]
            writes.apply(
                self.chunks, "upsert",
                ids=[r.id for r in part],
                metadatas=[stored_metadata(self.vendor_id, r.text, r.metadata) for r in part],
                embeddings=np.asarray(embeddings[start : start + batch], dtype=np.float32),
            )

    def update_chunk_metadata(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]
                              ) -> None:
        """Merge these keys into the stored metadata of each record (text and vector kept)."""
        if ids:
            self._before_write(None)
        writes.apply(self.chunks, "update", ids=list(ids),
                     metadatas=[with_scopes(self.vendor_id, m) for m in metadatas])

    def delete_chunks(self, ids: Iterable[str] | None = None, where: FilterInput = None
                      ) -> None:
        """Delete the records of these ids (each only if it matches `where`, when given), a
        batch at a time; without ids, every record matching `where`. A delete that finds
        nothing to delete changes nothing a reader sees, so the store's register is told only
        of one that does."""
        translated = chroma_where(self.scope_filter(where))
        if ids is None:
            self._before_write(lambda: self.holds_any(where))
            writes.apply(self.chunks, "delete", where=translated)
            return
        ids = list(ids)
        if ids:
            self._before_write(None)
        batch = self.batch_size()
        for start in range(0, len(ids), batch):
            writes.apply(self.chunks, "delete", ids=ids[start : start + batch],
                         where=translated)

    def record_scoped_keys(self, *, batch: int) -> None:
        """Give every record of both collections the scoped copies of its filtered keys
        (those that lack them), `batch` records per write; text and vectors are kept."""
        for collection in (self.chunks, self.manifest):
            found = get_all(collection, include=("metadatas",))
            changed = [(record_id, scoped) for record_id, metadata in
                       zip(found["ids"], found["metadatas"], strict=True)
                       if (scoped := with_scopes(self.vendor_id, metadata)) != metadata]
            if changed:
                self._before_write(None)
            for start in range(0, len(changed), batch):
                part = changed[start : start + batch]
                writes.apply(collection, "update", ids=[i for i, _ in part],
                             metadatas=[m for _, m in part])

    # Manifest --------------------------------------------------------------------------

    def manifest_records(self) -> list[tuple[str, dict[str, Any]]]:
        """Every manifest record (documents, links, the generation) with its metadata."""
        found = get_all(self.manifest, include=("metadatas",))
        return [(record_id, without_scopes(metadata))
                for record_id, metadata in zip(found["ids"], found["metadatas"], strict=True)]

    def documents(self) -> dict[str, dict[str, Any]]:
        """doc_key -> manifest entry of each document whose ingest completed (the generation
        and the follow-ups' link records are not documents)."""
        return {doc_key: meta for doc_key, meta in self.manifest_records()
                if doc_key != MANIFEST_GENERATION_ID and KIND_KEY not in meta}

    def generation(self) -> str | None:
        """A value that changes with every manifest commit; None for a store whose manifest
        was last written before generations were recorded (then only a full read tells)."""
        found = self.manifest.get(ids=[MANIFEST_GENERATION_ID], include=["metadatas"])
        metadatas = found.get("metadatas") or []
        if not found["ids"] or not metadatas or not metadatas[0]:
            return None
        return str(metadatas[0].get("generation"))

    def links(self, where: Where | None = None) -> dict[str, dict[str, Any]]:
        """follow-up id -> its link record's metadata, for every link the manifest holds (and
        matches `where`). A link may name a response that is not written yet."""
        linked = Where.eq(**{KIND_KEY: LINK_KIND}) & (where or Where())
        found = get_all(self.manifest, where=self.scope_filter(linked), include=("metadatas",))
        return {str(meta["followup_id"]): without_scopes(meta) for meta in found["metadatas"]}

    def write_manifest(self, records: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Upsert manifest records (id, metadata) in one write. They hold no text: a document
        would also be written to ChromaDB's store-wide full-text index, which nothing asks."""
        self._before_write(None)
        writes.apply(self.manifest, "upsert", ids=[i for i, _ in records],
                     metadatas=[with_scopes(self.vendor_id, m) for _, m in records],
                     embeddings=[[1.0]] * len(records))

    def delete_manifest(self, ids: Sequence[str], where: FilterInput = None) -> None:
        """Delete these manifest records (each only if it matches `where`), a batch at a time."""
        if ids:
            self._before_write(None)
        translated = chroma_where(self.scope_filter(where))
        batch = self.batch_size()
        for start in range(0, len(ids), batch):
            writes.apply(self.manifest, "delete", ids=list(ids[start : start + batch]),
                         where=translated)


class VendorEvidence:
    """One vendor's chunks at one committed state, as a candidate source (the vector search)
    and a record reader. Records looked up are never the marker of an answer a replaced round
    withdrew: to a reader that answer no longer exists.

    `is_committed` says whether a record belongs to a completed ingest. After an interrupted
    ingest the collection holds chunks no manifest entry names yet (a new version) or any more
    (an old one). `nearest` widens its window by the number of such chunks until it holds n
    committed ones or the whole collection, then cuts it just after the n-th, so the caller
    still sees (and can report) every uncommitted chunk ranked among them."""

    name = "vector"

    def __init__(self, vendor: VendorStore, is_committed: Callable[[dict[str, Any]], bool],
                 *, page_size: int = PAGE_SIZE, batch_size: int | None = None) -> None:
        self.vendor = vendor
        self._is_committed = is_committed
        self._page_size = page_size
        self._batch_size = batch_size
        # nearest_ids' answers, by query vector and n: the same vector searched twice at this
        # one committed state (an ask turn's continuation check, then its search) is asked once.
        self._ids_found: dict[tuple[bytes, int], list[tuple[str, float]] | None] = {}

    def is_committed(self, metadata: dict[str, Any]) -> bool:
        """Whether a record with this metadata belongs to a completed ingest."""
        return bool(self._is_committed(metadata))

    def nearest(self, query: HasEmbedding, n: int, *, where: FilterInput = None
                ) -> list[Neighbour]:
        embedding = np.asarray(query.embedding, dtype=np.float32)
        window = n
        while True:
            # No count() first: a write between the two reads would size the window for a
            # store that no longer exists; ChromaDB answers a wider window with all it has.
            result = self.vendor.chunks.query(query_embeddings=[embedding], n_results=window,
                                              where=chroma_where(self.vendor.scope_filter(where)),
                                              include=["documents", "metadatas", "distances"])
            rows = list(zip(result["ids"][0], result["documents"][0], result["metadatas"][0],
                            result["distances"][0], strict=True))
            exhausted = len(rows) < window
            if exhausted:
                rows = self._with_unreached(rows, embedding, where)
            found: list[Neighbour] = []
            committed = 0
            for record_id, document, stored, distance in rows:
                if stored is None:  # deleted while the query ran (see present_rows)
                    continue
                text, metadata = read_back(document, stored)
                ok = bool(self._is_committed(metadata))
                found.append(Neighbour(StoredChunk(record_id, text, metadata),
                                       1.0 - float(distance), ok))
                committed += ok
                if committed == n:
                    break
            if committed >= n or exhausted:
                return found
            # committed < n here, so the next window is strictly wider than this one. It is
            # not capped by count(): while another thread writes, a count read a moment ago
            # can be too low and would end the widening early.
            window = n + len(rows) - committed

    def nearest_ids(self, query: HasEmbedding, n: int) -> list[tuple[str, float]] | None:
        """The ids and cosine similarities of the `n` nearest records, with no filter and
        nothing else read: ChromaDB searches without the GIL and converts no text or metadata.
        None when the collection answered fewer than `n`, where `nearest` checks what the
        approximate index did not reach. Whether each id is committed is for the caller."""
        embedding = np.asarray(query.embedding, dtype=np.float32)
        key = (embedding.tobytes(), n)
        if key not in self._ids_found:
            result = self.vendor.chunks.query(query_embeddings=[embedding], n_results=n,
                                              include=["distances"])
            ids, distances = result["ids"][0], result["distances"][0]
            self._ids_found[key] = None if len(ids) < n else [
                (record_id, 1.0 - float(distance))
                for record_id, distance in zip(ids, distances, strict=True)]
        found = self._ids_found[key]
        return None if found is None else list(found)

    def _with_unreached(self, rows: list[tuple], embedding: np.ndarray,
                        where: FilterInput) -> list[tuple]:
        """The rows of a query that answered fewer than asked, plus any matching record the
        approximate index did not reach, scored exactly, all in distance order.

        An HNSW search may stop short of records it holds (a poorly connected node, or an
        index whose last writes were lost to a killed process and not yet replayed), so a
        window wider than the answer is checked against the records themselves. This runs
        only when the whole (filtered) collection fits in the window."""
        returned = {row[0] for row in rows}
        if where is None and self.vendor.count_chunks() <= len(returned):
            return rows
        missing = [i for i in self.vendor.record_ids(where, page_size=self._page_size)
                   if i not in returned]
        if not missing:
            return rows
        extra = [(c.id, c.text, c.metadata, 1.0 - float(c.embedding @ embedding))
                 for c in self.by_ids(missing, embeddings=True)]
        return sorted([*rows, *extra], key=lambda row: row[3])

    def ids(self, where: FilterInput) -> list[str]:
        return [c.id for c in self.vendor.records(where, text=False, page_size=self._page_size)
                if not is_withdrawn(c.metadata)]

    def by_metadata(self, where: FilterInput) -> list[StoredChunk]:
        return [c for c in self.vendor.records(where, page_size=self._page_size)
                if not is_withdrawn(c.metadata)]

    def by_ids(self, ids: Sequence[str], *, embeddings: bool = False) -> list[StoredChunk]:
        return [c for c in self.vendor.records_by_ids(ids, vectors=embeddings,
                                                      batch_size=self._batch_size)
                if not is_withdrawn(c.metadata)]
