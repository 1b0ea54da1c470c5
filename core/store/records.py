"""What the store holds, in the project's own types: records, neighbours, and the record kinds
of the write protocol (manifest generation, follow-up links, withdrawn markers and tombstones).

Nothing here talks to ChromaDB; `core.store.vendor` turns its results into these types."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from core.hashing import canonical_criterion_question_hash
from core.models import FOLLOWUP_SOURCE_TYPE, StoredRecord
from core.store.scoping import without_scopes

# A record of the manifest collection that is not a document: every commit rewrites it in
# the same write as the document's entry, so readers can tell in one small read whether the
# manifest changed since they last read it.
MANIFEST_GENERATION_ID = "__generation__"
# Records of the manifest collection that are not documents carry this key: a follow-up's
# link (what criterion it answers) is one, written before the round's responses.
KIND_KEY = "kind"
LINK_KIND = "followup_link"
_LINK_PREFIX = "link:"
# A round replaced with `--replace` withdraws the answers its new payloads no longer hold. A
# withdrawn answer's record is rewritten as a marker of this source type (no text, no link
# keys), in the same single write that stores the round's new responses, and deleted after;
# its link record carries WITHDRAWN_KEY (a tombstone) from the link write before that until
# it is deleted last. See `core.ingest.writer.EvidenceWriter.round`.
WITHDRAWN_SOURCE_TYPE = "withdrawn_follow_up_response"
WITHDRAWN_KEY = "withdrawn"


@dataclass(frozen=True)
class StoredChunk:
    """One stored record: its id, text, flat metadata and, when asked for, its vector."""

    id: str
    text: str
    metadata: dict[str, Any]
    embedding: np.ndarray | None = None


@dataclass(frozen=True)
class Neighbour:
    """A record a candidate source found, its score, and whether its ingest completed.

    A fusion of sources fills in the parts its score was made from; a single source leaves
    them None."""

    chunk: StoredChunk
    # The source's own score: cosine similarity for the vector search, -bm25() for the
    # lexical index, the reciprocal-rank-fusion score for the hybrid search.
    score: float
    committed: bool
    vector_rank: int | None = None
    vector_score: float | None = None  # cosine similarity
    lexical_rank: int | None = None
    lexical_score: float | None = None  # BM25, higher is better
    fused_score: float | None = None

    def score_parts(self) -> dict[str, int | float | None]:
        """The parts of a fused score, by the names a candidate gives them."""
        return {"vector_rank": self.vector_rank, "vector_score": self.vector_score,
                "lexical_rank": self.lexical_rank, "lexical_score": self.lexical_score,
                "fused_score": self.fused_score}


def record_fingerprint(text: str, metadata: dict[str, Any]) -> str:
    """A digest of a stored record as a reader gets it back: its text and every metadata key
    (the store's scoped copies of filtered keys left out, see core/store/scoping.py). A round
    sent again keeps its ids, so only this tells an edited answer from the old one."""
    return hashlib.sha256(json.dumps([text, without_scopes(metadata)], sort_keys=True
                                     ).encode("utf-8")).hexdigest()


def new_generation() -> dict[str, str]:
    """The generation record's metadata for one more manifest write."""
    return {"generation": uuid.uuid4().hex}


def link_record_id(followup_id: str) -> str:
    """The manifest record holding a follow-up's link."""
    return f"{_LINK_PREFIX}{followup_id}"


# The keys of a response that say what it answers, copied into its link record.
LINKED_BY = ("criterion_question_hash", "criterion_canonical_hash", "questionnaire_id",
             "control_key")


def link_metadata(record: StoredRecord) -> dict[str, Any]:
    """The link record of a follow-up response: what criterion it answers (the keys the
    response itself carries), its round, and the fingerprint of the response as written."""
    metadata: dict[str, Any] = {
        KIND_KEY: LINK_KIND, "followup_id": record.id,
        "round_number": record.metadata["round_number"],
        "original_criterion_question_text":
            str(record.metadata.get("original_criterion_question_text") or ""),
        "fingerprint": record_fingerprint(record.text, dict(record.metadata)),
    }
    for key in LINKED_BY:
        if record.metadata.get(key):
            metadata[key] = record.metadata[key]
    return metadata


def withdrawn_link(followup_id: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """The tombstone of an answer a replaced round withdraws, made from its link record (or,
    for an answer stored without one, its response's metadata): the criterion keys stay, so
    until the round's responses' write lands a reader still finds the answer as it was; the
    fingerprint is emptied, so no reader keeps the answer's record past that write."""
    tombstone: dict[str, Any] = {
        KIND_KEY: LINK_KIND, "followup_id": followup_id,
        "round_number": metadata["round_number"],
        "original_criterion_question_text":
            str(metadata.get("original_criterion_question_text") or ""),
        "fingerprint": "", WITHDRAWN_KEY: True,
    }
    for key in LINKED_BY:
        if metadata.get(key):
            tombstone[key] = metadata[key]
    return tombstone


def withdrawn_marker(followup_id: str, metadata: dict[str, Any]) -> StoredRecord:
    """What a withdrawn answer's record (its stored `metadata`) is rewritten as: no text, no
    answer, no criterion keys; only what tells a reader (and a replace run again) that it was
    withdrawn from its round. ChromaDB merges an upsert's metadata into the stored one, so
    every other key of the answer is given as None, which removes it."""
    kept = {"source_type": WITHDRAWN_SOURCE_TYPE, "vendor_id": metadata["vendor_id"],
            "round_number": metadata["round_number"]}
    return StoredRecord(id=followup_id, text="",
                        metadata={**dict.fromkeys(metadata), **kept})


def is_withdrawn(metadata: dict[str, Any] | None) -> bool:
    """True for the marker of an answer a replaced round withdrew: no reader shows it."""
    return bool(metadata) and metadata.get("source_type") == WITHDRAWN_SOURCE_TYPE


class FollowupLink(NamedTuple):
    """What a follow-up response answers: its criterion (None, None and "" for an ad-hoc
    question) and the questionnaire's own id of its question, where it has one; and the round
    that answered it."""

    criterion_hash: str | None
    canonical_hash: str | None
    criterion_text: str
    questionnaire_id: str | None = None
    round_number: int | None = None
    # The control the answer is keyed by ("sp800-53:ac-7"), where its id is a known
    # framework's; a link written before answers knew their control has none.
    control_key: str | None = None


def followup_link(metadata: dict[str, Any]) -> FollowupLink:
    """What a follow-up response (its stored metadata, or its link record's) is linked to."""
    round_number = metadata.get("round_number")
    return FollowupLink(metadata.get("criterion_question_hash"),
                        followup_canonical_hash(metadata),
                        str(metadata.get("original_criterion_question_text") or ""),
                        metadata.get("questionnaire_id") or None,
                        int(round_number) if round_number is not None else None,
                        metadata.get("control_key") or None)


def followup_canonical_hash(metadata: dict[str, Any]) -> str | None:
    """The canonical hash of the criterion a stored follow-up answers (None for an ad-hoc
    question): the stored key, or, for a record written before the key existed, computed
    from its linked criterion text."""
    stored = metadata.get("criterion_canonical_hash")
    if stored:
        return str(stored)
    return canonical_criterion_question_hash(
        str(metadata.get("original_criterion_question_text") or ""))


def committed_versions(manifest: dict[str, dict[str, Any]]) -> dict[str, str]:
    """doc_key -> the version the manifest makes visible."""
    return {doc_key: str(meta["version"]) for doc_key, meta in manifest.items()}


def is_committed(metadata: dict[str, Any], versions: dict[str, str]) -> bool:
    """A follow-up round's responses are written in one call (present means complete, whatever
    links were written before them); the marker of an answer a replaced round withdrew (in
    that same call) never counts; a document chunk counts only when the manifest names its
    version."""
    if metadata.get("source_type") == FOLLOWUP_SOURCE_TYPE:
        return True
    if metadata.get("source_type") == WITHDRAWN_SOURCE_TYPE:
        return False
    return versions.get(metadata.get("doc_key")) == metadata.get("doc_sha")


def chunk_record_id(doc_key: str, version: str, index: int) -> str:
    """The record id of a document version's `index`-th chunk (0 first)."""
    return f"doc-{doc_key}-{version}-{index}"


def chunk_record_version(record_id: str) -> tuple[str, str] | None:
    """(doc_key, version) a chunk's record id names (`chunk_record_id`); None for an id of
    another form (an answer's)."""
    if not record_id.startswith("doc-"):
        return None
    head, version, index = ([*record_id.rsplit("-", 2), "", ""])[:3]
    if not index.isdigit() or not version:
        return None
    return head[len("doc-"):], version


def version_key(doc_key: str, version: str) -> str:
    """One document version as one string: how readers and the lexical index name it."""
    return f"{doc_key}@{version}"


def version_of_key(key: str) -> tuple[str, str] | None:
    """(doc_key, version) a `version_key` names; None for a string of another form. A version
    is a content hash (no "@"), so the key splits at its last "@"."""
    doc_key, at, version = key.rpartition("@")
    return (doc_key, version) if at else None
