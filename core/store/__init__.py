"""records <-> ChromaDB: the only package that imports chromadb.

Everything above it asks the store, never a collection: `EvidenceStore` opens the store and
hands out each vendor's `VendorStore` (typed reads and writes of its chunks and manifest),
`VendorEvidence` (the vector search with its guard against an approximate index that answers
short), conversation and verdict records, and the write lock. Filters are the project's own
`Where`; the write protocol's steps are in `protocol`, the audit of what an interrupted write
left in `audit`, the schema's steps in `migrations`."""

from core.store.client import chromadb_version
from core.store.evidence_store import (
    EvidenceStore,
    check_vendor_id,
    chunks_collection_name,
    conversations_collection_name,
    decisions_collection_name,
    judgments_collection_name,
    manifest_collection_name,
    verdicts_collection_name,
)
from core.store.filters import Where
from core.store.migrations import SCHEMA_VERSION
from core.store.protocol import CONSISTENT_READ_ATTEMPTS
from core.store.records import (
    KIND_KEY,
    LINK_KIND,
    MANIFEST_GENERATION_ID,
    WITHDRAWN_KEY,
    WITHDRAWN_SOURCE_TYPE,
    FollowupLink,
    Neighbour,
    StoredChunk,
    chunk_record_id,
    committed_versions,
    followup_canonical_hash,
    followup_link,
    is_committed,
    is_withdrawn,
    link_metadata,
    link_record_id,
    record_fingerprint,
)
from core.store.vendor import VendorEvidence, VendorStore

__all__ = [
    "CONSISTENT_READ_ATTEMPTS", "KIND_KEY", "LINK_KIND", "MANIFEST_GENERATION_ID",
    "SCHEMA_VERSION", "WITHDRAWN_KEY", "WITHDRAWN_SOURCE_TYPE", "EvidenceStore", "Neighbour",
    "StoredChunk", "VendorEvidence", "VendorStore", "Where", "check_vendor_id",
    "chromadb_version",
    "chunks_collection_name", "chunk_record_id", "committed_versions",
    "conversations_collection_name",
    "FollowupLink", "followup_canonical_hash", "followup_link", "is_committed", "is_withdrawn",
    "link_metadata", "link_record_id", "manifest_collection_name", "record_fingerprint",
    "decisions_collection_name",
    "judgments_collection_name",
    "verdicts_collection_name",
]
