"""ChromaDB's embedded API with a bound of our own on the vector indexes it keeps loaded.

ChromaDB 1.5 keeps every vector index it has loaded in an LRU of `RLIMIT_NOFILE // 5`
entries (4,000 with 20,000 file handles), about 2.6 MB for even a small one, so a process that
reads every vendor of a thousand-vendor programme held gigabytes. The bound here is
`EVIDENCE_STORE_OPEN_INDEXES` (never above ChromaDB's own). An index evicted and read again
is reloaded from its files, which is only whole when ChromaDB persisted it after its last
write: every collection of the store persists its index at every write
(`PERSISTED_AT_EVERY_WRITE`), or an index evicted since its last persist comes back without
the records written since (ChromaDB's default persists every 1,000 records)."""

from __future__ import annotations

from typing import Any

# Set by `core.store.client.connect` before the process's first embedded client; ChromaDB
# makes one system per store path and process, so the first client's bound holds for all.
open_indexes = 256
# The collection configuration that makes ChromaDB persist a vector index at every write.
PERSISTED_AT_EVERY_WRITE: dict[str, Any] = {"sync_threshold": 1}


_bounded: type | None = None


def bound_open_indexes(limit: int) -> None:
    """Make the embedded clients this process creates from now on keep at most `limit` vector
    indexes loaded. ChromaDB accepts only its own class names as the embedded API and finds
    the class by that name in its module, so a bounded subclass takes the name there."""
    global open_indexes, _bounded
    import chromadb.api.rust as rust  # ChromaDB is imported only when a store is opened

    open_indexes = limit
    if _bounded is None:
        class BoundedRustBindingsAPI(rust.RustBindingsAPI):  # type: ignore[misc, name-defined]
            """The embedded API, its vector-index cache bounded by `open_indexes`."""

            def __init__(self, system: Any) -> None:
                super().__init__(system)
                self.hnsw_cache_size = max(1, min(self.hnsw_cache_size, open_indexes))

        _bounded = BoundedRustBindingsAPI
    rust.RustBindingsAPI = _bounded  # type: ignore[misc]


def persists_at_every_write(collection: Any) -> bool:
    """True when the collection's vector index is persisted at every write."""
    hnsw = (getattr(collection, "configuration", None) or {}).get("hnsw") or {}
    return hnsw.get("sync_threshold") == PERSISTED_AT_EVERY_WRITE["sync_threshold"]


def persist_at_every_write(collection: Any) -> None:
    """Make a collection written before its index was persisted at every write persist it so,
    and persist it now: one of its records written again as it is (the index persists at its
    next write). Run again after an interruption, it finishes."""
    from core.store import writes

    if not persists_at_every_write(collection):
        writes.apply(collection, "modify", configuration={"hnsw": PERSISTED_AT_EVERY_WRITE})
    found = collection.get(limit=1, include=["embeddings", "documents", "metadatas"])
    if found["ids"]:
        writes.apply(collection, "upsert", ids=found["ids"], embeddings=found["embeddings"],
                     documents=found["documents"], metadatas=found["metadatas"])
