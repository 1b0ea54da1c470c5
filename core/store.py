"""ChromaDB: one chunk collection and one manifest collection per vendor, embedded or server."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.config import Settings
from core.errors import StoreError, UnknownVendorError, UserInputError
from core.hashing import canonical_criterion_question_hash
from core.models import FOLLOWUP_SOURCE_TYPE, StoredRecord, is_valid_vendor_id
from core.store_path import STORE_DATABASE, check_store_path

# ChromaDB reads this before its telemetry client starts; nothing leaves the machine.
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

# The schema this program writes; core.migrations upgrades older stores to it in place.
SCHEMA_VERSION = 4
# Reads that race a writer are repeated until they saw one committed state, at most this often.
CONSISTENT_READ_ATTEMPTS = 5
_CHUNKS_SUFFIX = "__chunks"
_MANIFEST_SUFFIX = "__manifest"
_CONVERSATIONS_SUFFIX = "__conversations"
_PREFIX = "vendor__"
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
# ChromaDB keeps one shared system per store path (or server) in a process-wide registry that
# it fills without a lock: clients created at the same moment in two threads can come up
# without their tenant, or on a system another thread then replaces, and writes go missing.
# So clients are created one at a time, whichever EvidenceStore asks.
_CLIENT_CREATION = threading.Lock()


def chunks_collection_name(vendor_id: str) -> str:
    return f"{_PREFIX}{vendor_id}{_CHUNKS_SUFFIX}"


def manifest_collection_name(vendor_id: str) -> str:
    return f"{_PREFIX}{vendor_id}{_MANIFEST_SUFFIX}"


def conversations_collection_name(vendor_id: str) -> str:
    return f"{_PREFIX}{vendor_id}{_CONVERSATIONS_SUFFIX}"


def check_vendor_id(vendor_id: object) -> str:
    """Return the id, or refuse it in one sentence."""
    if not is_valid_vendor_id(vendor_id):
        shown = repr(vendor_id) if len(repr(vendor_id)) <= 80 else repr(vendor_id)[:77] + "..."
        raise UserInputError(
            f"Vendor id {shown} is not valid: use 1-63 letters, digits, '_' or '-', "
            "starting with a letter or digit."
        )
    return vendor_id  # type: ignore[return-value]


@dataclass
class VendorCollections:
    """The two collections that hold one vendor's evidence."""

    vendor_id: str
    chunks: Any
    manifest: Any


class EvidenceStore:
    """Opens ChromaDB lazily and hands out per-vendor collections; never mixes vendors."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._client: Any = None
        self._lock = threading.Lock()
        # Vendors opened and checked once; collections are never deleted, so a handle stays
        # good, and a retrieval need not ask ChromaDB for three collections every time.
        self._opened: dict[str, VendorCollections] = {}
        self._conversations: dict[str, Any] = {}
        # What runs the embedding model of this process's writes ("onnx", "torch"; None for
        # none), set by the workbench. Each chunk write records it on the vendor's chunk
        # collection as `embedding_runtime`: the store says which runtime wrote last. Only
        # `embedding_model` decides compatibility; the runtimes' vectors agree to 1e-4.
        self.writer_runtime: Callable[[], str | None] = lambda: None

    @property
    def location(self) -> str:
        if self.settings.chroma_host:
            scheme = "https://" if self.settings.chroma_ssl else ""
            return (f"ChromaDB server {scheme}{self.settings.chroma_host}:"
                    f"{self.settings.chroma_port}")
        return f"store {self.settings.store}"

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                if not self.settings.chroma_host:  # ChromaDB makes its files on connecting
                    check_store_path(self.settings.store, opening=True)
                with _CLIENT_CREATION:
                    self._client = self._connect()
            return self._client

    def _connect(self) -> Any:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        chroma_settings = ChromaSettings(anonymized_telemetry=False)
        try:
            if self.settings.chroma_host:
                return _ServerCalls(_server_client(self.settings),
                                    _ServerProblems(self.settings, self.location))
            store = self.settings.store  # checked by `client` (core/store_path.py)
            store.mkdir(parents=True, exist_ok=True)
            return chromadb.PersistentClient(path=str(store), settings=chroma_settings)
        except (UserInputError, StoreError):
            raise
        except Exception as exc:  # chromadb raises plain exceptions for connection failures
            problems = _ServerProblems(self.settings, self.location)
            sentence = (problems.sentence(exc, connecting=True) if self.settings.chroma_host
                        else None)
            raise StoreError(sentence or problems.redacted(
                f"Cannot open the {self.location}: {_one_line(exc)}")) from exc

    def write_lock(self, on_wait: Callable[[str], None] | None = None
                   ) -> contextlib.AbstractContextManager[None]:
        """The store's write lock (core/locking.py), held by one ingest at a time."""
        from core.locking import LeaseLock, folder_lock

        s = self.settings
        if s.chroma_host:
            return LeaseLock(self.client, self.location, lease_s=s.write_lease_s,
                             wait_s=s.write_lock_wait_s).held(on_wait)
        store = s.store
        check_store_path(store, opening=True)  # a file, a pipe, a broken link, someone's folder
        return folder_lock(store, self.location, s.write_lock_wait_s, on_wait)

    def max_batch_size(self) -> int:
        return int(self.client.get_max_batch_size())

    # Vendors -------------------------------------------------------------------------

    def exists(self) -> bool:
        """False for an embedded store that was never written: reading it creates nothing.
        A path that cannot be a store (a file, say) is refused, not read as an empty store."""
        if self.settings.chroma_host:
            return True
        check_store_path(self.settings.store)
        return (self.settings.store / STORE_DATABASE).exists()

    def vendor_ids(self) -> list[str]:
        """Every vendor that has a chunk collection, sorted."""
        if not self.exists():
            return []
        vendors = []
        for collection in self.client.list_collections():
            name = collection if isinstance(collection, str) else collection.name
            if name.startswith(_PREFIX) and name.endswith(_CHUNKS_SUFFIX):
                vendors.append(name[len(_PREFIX) : -len(_CHUNKS_SUFFIX)])
        return sorted(vendors)

    def open_vendor(self, vendor_id: str, *, create: bool = False,
                    embedding_model: str | None = None) -> VendorCollections:
        """The vendor's collections; refused when missing (unless create) or incompatible."""
        check_vendor_id(vendor_id)
        with self._lock:
            opened = self._opened.get(vendor_id)
        if opened is not None:
            self._check_compatible(vendor_id, opened.chunks.metadata or {}, embedding_model)
            return opened
        existing = self.vendor_ids()
        if vendor_id not in existing:
            self.refuse_case_clash(vendor_id, existing)
            if not create:
                raise UnknownVendorError(
                    f"No evidence is stored for vendor '{vendor_id}' in the {self.location}."
                )
        metadata = {"vendor_id": vendor_id, "schema_version": SCHEMA_VERSION}
        if embedding_model:
            metadata["embedding_model"] = embedding_model
        chunks = self.client.get_or_create_collection(
            chunks_collection_name(vendor_id),
            metadata=metadata,
            configuration={"hnsw": {"space": "cosine"}},
            embedding_function=None,
        )
        self._check_compatible(vendor_id, chunks.metadata or {}, embedding_model, older=True)
        manifest = self.client.get_or_create_collection(
            manifest_collection_name(vendor_id),
            metadata={"vendor_id": vendor_id, "schema_version": SCHEMA_VERSION},
            embedding_function=None,
        )
        self._check_compatible(vendor_id, manifest.metadata or {}, None, older=True)
        opened = VendorCollections(vendor_id=vendor_id, chunks=chunks, manifest=manifest)
        opened = self._upgraded(opened, embedding_model)
        with self._lock:
            self._opened[vendor_id] = opened
        return opened

    def conversations(self, vendor_id: str, *, create: bool = False) -> Any | None:
        """The vendor's conversation messages (a collection of its own, made at the first
        question: a store written before conversations existed simply has none yet)."""
        vendor = self.open_vendor(vendor_id)
        with self._lock:
            found = self._conversations.get(vendor.vendor_id)
        if found is not None:  # collections are never deleted: a handle stays good
            return found
        name = conversations_collection_name(vendor.vendor_id)
        if create:
            found = self.client.get_or_create_collection(
                name, metadata={"vendor_id": vendor_id, "schema_version": SCHEMA_VERSION},
                configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
        else:
            names = {c if isinstance(c, str) else c.name for c in self.client.list_collections()}
            if name not in names:
                return None
            found = self.client.get_collection(name, embedding_function=None)
        with self._lock:
            self._conversations[vendor.vendor_id] = found
        return found

    @staticmethod
    def refuse_case_clash(vendor_id: str, existing: Sequence[str]) -> None:
        """Vendor ids differing only in case would be one vendor to a reader: refuse."""
        clash = [v for v in existing if v.lower() == vendor_id.lower() and v != vendor_id]
        if clash:
            raise UserInputError(
                f"Vendor id '{vendor_id}' differs only in case from the existing vendor "
                f"'{clash[0]}'; use '{clash[0]}'."
            )

    def _upgraded(self, vendor: VendorCollections, embedding_model: str | None
                  ) -> VendorCollections:
        """The vendor's collections at SCHEMA_VERSION, older ones upgraded in place first."""
        from core.migrations import can_upgrade, recorded_version, upgrade

        if not any(can_upgrade(recorded_version(c)) for c in (vendor.chunks, vendor.manifest)):
            return vendor
        upgrade(vendor)
        chunks = self.client.get_collection(chunks_collection_name(vendor.vendor_id),
                                            embedding_function=None)
        manifest = self.client.get_collection(manifest_collection_name(vendor.vendor_id),
                                              embedding_function=None)
        self._check_compatible(vendor.vendor_id, chunks.metadata or {}, embedding_model)
        self._check_compatible(vendor.vendor_id, manifest.metadata or {}, None)
        return VendorCollections(vendor_id=vendor.vendor_id, chunks=chunks, manifest=manifest)

    def _check_compatible(self, vendor_id: str, metadata: dict[str, Any],
                          embedding_model: str | None, *, older: bool = False) -> None:
        """Refuse a vendor this program cannot read; with `older`, a version the migrations
        upgrade passes (the caller upgrades it)."""
        from core.migrations import FIRST_SCHEMA_VERSION, can_upgrade

        version = metadata.get("schema_version")
        if version != SCHEMA_VERSION and not (older and can_upgrade(version)):
            written = ("records no store schema version" if version is None
                       else f"was written with store schema version {version!r}")
            raise StoreError(
                f"Vendor '{vendor_id}' in the {self.location} {written}; this workbench reads "
                f"versions {FIRST_SCHEMA_VERSION} to {SCHEMA_VERSION} (upgrading older ones in "
                "place), so it leaves the store untouched."
            )
        stored_model = metadata.get("embedding_model")
        if embedding_model and stored_model and stored_model != embedding_model:
            raise UserInputError(
                f"Vendor '{vendor_id}' was indexed with the embedding model '{stored_model}', "
                f"not '{embedding_model}'; set EVIDENCE_EMBEDDING_MODEL={stored_model} or "
                "index into a new store."
            )

    # Writes --------------------------------------------------------------------------

    def upsert(self, collection: Any, records: Sequence[StoredRecord],
               embeddings: np.ndarray | Sequence[Sequence[float]]) -> None:
        """Upsert in batches under the client's maximum batch size."""
        if records and collection.name.endswith(_CHUNKS_SUFFIX):
            self._record_runtime(collection)
        batch = self.max_batch_size()
        for start in range(0, len(records), batch):
            part = records[start : start + batch]
            collection.upsert(
                ids=[r.id for r in part],
                documents=[r.text for r in part],
                metadatas=[r.metadata for r in part],
                embeddings=np.asarray(embeddings[start : start + batch], dtype=np.float32),
            )

    def _record_runtime(self, collection: Any) -> None:
        """Note this writer's embedding runtime on the chunk collection, read fresh so that no
        other key another process wrote meanwhile is lost; no write when it is already there."""
        runtime = self.writer_runtime()
        if not runtime:
            return
        stored = self.client.get_collection(collection.name, embedding_function=None)
        metadata = dict(stored.metadata or {})
        if metadata.get("embedding_runtime") != runtime:
            collection.modify(metadata={**metadata, "embedding_runtime": runtime})

    def delete_ids(self, collection: Any, ids: Iterable[str]) -> None:
        ids = list(ids)
        batch = self.max_batch_size()
        for start in range(0, len(ids), batch):
            collection.delete(ids=ids[start : start + batch])


def present_rows(page: dict[str, Any], include: Sequence[str]) -> list[int]:
    """Positions of the records a read really returned. A ChromaDB server that deletes a record
    while a read runs can still answer its id, with no metadata: that record is gone."""
    metadatas = page.get("metadatas") if "metadatas" in include else None
    if metadatas is None:
        return list(range(len(page["ids"])))
    return [i for i, metadata in enumerate(metadatas) if metadata is not None]


def get_all(collection: Any, *, where: dict[str, Any] | None = None,
            include: Sequence[str] = ("metadatas",), page_size: int = 5000) -> dict[str, list]:
    """collection.get(where=...) paged, so every match comes back at any corpus size."""
    ids: list[str] = []
    columns: dict[str, list] = {name: [] for name in include}
    offset = 0
    while True:
        page = collection.get(where=where, include=list(include), limit=page_size, offset=offset)
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


def read_manifest(vendor: VendorCollections) -> dict[str, dict[str, Any]]:
    """doc_key -> manifest entry of each document whose ingest completed (the generation and
    the follow-ups' link records are not documents)."""
    found = get_all(vendor.manifest, include=("metadatas",))
    return {doc_key: meta for doc_key, meta in zip(found["ids"], found["metadatas"], strict=True)
            if doc_key != MANIFEST_GENERATION_ID and KIND_KEY not in meta}


def manifest_generation(vendor: VendorCollections) -> str | None:
    """A value that changes with every manifest commit; None for a store whose manifest was
    last written before generations were recorded (then only a full read tells)."""
    found = vendor.manifest.get(ids=[MANIFEST_GENERATION_ID], include=["metadatas"])
    metadatas = found.get("metadatas") or []
    if not found["ids"] or not metadatas or not metadatas[0]:
        return None
    return str(metadatas[0].get("generation"))


def commit_manifest_entry(vendor: VendorCollections, doc_key: str, entry: dict[str, Any],
                          source: str) -> None:
    """Make a document version visible: its entry and a new generation, in one write."""
    vendor.manifest.upsert(
        ids=[doc_key, MANIFEST_GENERATION_ID],
        metadatas=[entry, new_generation()],
        embeddings=[[1.0], [1.0]],
        documents=[source, "manifest generation"],
    )


def new_generation() -> dict[str, str]:
    """The generation record's metadata for one more manifest write."""
    return {"generation": uuid.uuid4().hex}


def record_fingerprint(text: str, metadata: dict[str, Any]) -> str:
    """A digest of a stored record as a reader gets it back: its text and every metadata key.
    A round sent again keeps its ids, so only this tells an edited answer from the old one."""
    return hashlib.sha256(json.dumps([text, metadata], sort_keys=True).encode("utf-8")
                          ).hexdigest()


def link_record_id(followup_id: str) -> str:
    """The manifest record holding a follow-up's link."""
    return f"{_LINK_PREFIX}{followup_id}"


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
    for key in ("criterion_question_hash", "criterion_canonical_hash"):
        if record.metadata.get(key):
            metadata[key] = record.metadata[key]
    return metadata


def commit_links(vendor: VendorCollections, records: Sequence[StoredRecord],
                 tombstones: Sequence[dict[str, Any]] = ()) -> None:
    """Write the links of these follow-ups (and the tombstones of the answers a replaced round
    withdraws, see `withdrawn_link`) and a new generation, in one manifest write.

    A round's links go in before its responses: a link naming a response not written yet (the
    process killed between the two writes) finds no record when a reader fetches it, and the
    same ingest run again writes the responses. The new generation tells every reader that
    the links changed, so none needs to list the chunk collection to find out."""
    links = [*((link_record_id(r.id), link_metadata(r), f"link of {r.id}") for r in records),
             *((link_record_id(str(t["followup_id"])), t, f"withdrawn {t['followup_id']}")
               for t in tombstones)]
    vendor.manifest.upsert(
        ids=[*(i for i, _, _ in links), MANIFEST_GENERATION_ID],
        metadatas=[*(m for _, m, _ in links), new_generation()],
        embeddings=[[1.0]] * (len(links) + 1),
        documents=[*(d for _, _, d in links), "manifest generation"],
    )


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
    for key in ("criterion_question_hash", "criterion_canonical_hash"):
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


def read_links(vendor: VendorCollections) -> dict[str, dict[str, Any]]:
    """follow-up id -> its link record's metadata, for every link the manifest holds (a link
    may name a response that is not written yet: a reader fetches responses by id)."""
    found = get_all(vendor.manifest, where={KIND_KEY: LINK_KIND}, include=("metadatas",))
    return {str(meta["followup_id"]): meta for meta in found["metadatas"]}


def followup_link(metadata: dict[str, Any]) -> tuple[str | None, str | None, str]:
    """What a follow-up response (its stored metadata, or its link record's) is linked to:
    (criterion hash, canonical criterion hash, linked criterion text); None, None and "" for
    an ad-hoc question."""
    return (metadata.get("criterion_question_hash"), followup_canonical_hash(metadata),
            str(metadata.get("original_criterion_question_text") or ""))


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


class _ServerCalls:
    """A ChromaDB HttpClient (or one of its collections) whose calls turn a server that went
    away, hangs, refuses the token or is not trusted into one StoreError naming it, instead
    of the HTTP library's own exception."""

    def __init__(self, target: Any, problems: _ServerProblems) -> None:
        self._target = target
        self._problems = problems

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                result = value(*args, **kwargs)
            except Exception as exc:
                sentence = self._problems.sentence(exc, connecting=False)
                if sentence is None:
                    raise
                raise StoreError(sentence) from exc
            if type(result).__name__ == "Collection":
                return _ServerCalls(result, self._problems)
            return result

        return call


class _ServerProblems:
    """What went wrong between this process and a ChromaDB server, as one sentence that
    names the server and the setting to look at, and never shows the token."""

    # What a TLS port answers to plain HTTP: nginx, and Go's servers (Caddy, Traefik).
    _PLAIN_HTTP_TO_TLS = ("plain http request was sent to https port",
                          "http request to an https server")

    def __init__(self, settings: Settings, location: str) -> None:
        self._where = f"The {location}"
        self._location = location
        self._timeout_s = settings.chroma_timeout_s
        token = settings.chroma_token
        self._token = token.get_secret_value() if token is not None else None

    def redacted(self, text: str) -> str:
        return text.replace(self._token, "[token]") if self._token else text

    def sentence(self, exc: BaseException, *, connecting: bool) -> str | None:
        """The sentence for a problem of the connection to the server, or None for any
        other error (ChromaDB's own errors pass through unchanged)."""
        import ssl

        import httpx

        causes = _causes(exc)
        where = self._where
        for cause in causes:
            if isinstance(cause, httpx.TimeoutException):
                then = ("check that it is running and not overloaded" if connecting else
                        "what was written before is complete, so try again once it answers")
                return (f"{where} did not answer within {self._timeout_s:g} s "
                        f"(EVIDENCE_CHROMA_TIMEOUT_S); {then}.")
        for cause in causes:
            if isinstance(cause, ssl.SSLCertVerificationError):
                why = cause.verify_message or cause.reason or "not verified"
                if cause.verify_code == _X509_HOSTNAME_MISMATCH:
                    return (f"The certificate of the {self._location} does not name that host "
                            f"({why}); connect with a host name the certificate names.")
                return (f"The certificate of the {self._location} is not trusted ({why}); "
                        "set EVIDENCE_CHROMA_CA_BUNDLE to the PEM file of the CA that signed "
                        "it.")
        for cause in causes:
            if isinstance(cause, ssl.SSLError):
                why = cause.reason or _one_line(cause)
                return (f"The TLS handshake with the {self._location} failed ({why}); if the "
                        "server is not behind TLS, unset EVIDENCE_CHROMA_SSL.")
        for cause in causes:
            if isinstance(cause, httpx.HTTPStatusError):
                sentence = self._status_sentence(cause.response)
                if sentence is not None:
                    return sentence
        if not connecting:
            for cause in causes:
                if isinstance(cause, httpx.TransportError):
                    return self.redacted(
                        f"{where} stopped answering ({_one_line(cause)}); what was written "
                        "before is complete, so run the command again once it is back.")
        return None

    def _status_sentence(self, response: Any) -> str | None:
        status = response.status_code
        if status in (401, 403):
            if self._token:
                return (f"{self._where} refused the token (HTTP {status}); check "
                        "EVIDENCE_CHROMA_TOKEN.")
            return f"{self._where} asks for a token (HTTP {status}); set EVIDENCE_CHROMA_TOKEN."
        if status == 400:
            try:
                body = response.text.lower()
            except Exception:  # an undecodable body says nothing either way
                body = ""
            if any(phrase in body for phrase in self._PLAIN_HTTP_TO_TLS):
                return (f"{self._where} is served over TLS and refused plain HTTP (HTTP 400); "
                        "set EVIDENCE_CHROMA_SSL=true.")
        if status in (502, 503, 504):
            return (f"{self._where} answered HTTP {status}: the proxy in front of it could not "
                    "reach ChromaDB in time; check the ChromaDB server behind the proxy.")
        return None


# OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH.
_X509_HOSTNAME_MISMATCH = 62


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception and every exception it was raised from or while handling, outermost
    first: ChromaDB wraps the HTTP library's errors in plain ones."""
    found: list[BaseException] = []
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop(0)
        if current is None or any(current is seen for seen in found):
            continue
        found.append(current)
        pending += [current.__cause__, current.__context__]
    return found


def _server_client(settings: Settings) -> Any:
    """A ChromaDB client of the server `settings` name, as chromadb.HttpClient makes it, with
    TLS, the CA bundle and the token as set, and every HTTP request bounded by
    chroma_timeout_s."""
    from chromadb.config import Settings as ChromaSettings

    token = settings.chroma_token
    chroma_settings = ChromaSettings(
        anonymized_telemetry=False,
        chroma_api_impl="chromadb.api.fastapi.FastAPI",
        chroma_server_host=settings.chroma_host,
        chroma_server_http_port=settings.chroma_port,
        chroma_server_ssl_enabled=settings.chroma_ssl,
        chroma_server_ssl_verify=(str(settings.chroma_ca_bundle)
                                  if settings.chroma_ca_bundle is not None else None),
        chroma_server_headers=({"Authorization": f"Bearer {token.get_secret_value()}"}
                               if token is not None else None),
    )
    return _bounded_client_class()(chroma_settings, settings.chroma_timeout_s)


@functools.cache
def _bounded_client_class() -> type:
    """chromadb's Client (what chromadb.HttpClient returns), every HTTP request of which gives
    up after a timeout.

    ChromaDB 1.5 makes the httpx session of each of its server components with timeout=None
    and has no setting for it, and the client's constructor already asks the server (its
    identity through one component, then the tenant and database through a second one, the
    admin client's). So the timeout is put on each session just before its first request,
    and checked on both once the client stands."""
    import httpx
    from chromadb.api.client import Client

    class BoundedHttpClient(Client):
        def __init__(self, settings: Any, timeout_s: float) -> None:
            self._http_timeout = httpx.Timeout(timeout_s)
            super().__init__(settings=settings)
            _bound_session(self._server, self._http_timeout)
            _bound_session(self._admin_client._server, self._http_timeout)

        def get_user_identity(self) -> Any:
            _bound_session(self._server, self._http_timeout)
            return super().get_user_identity()

        def _validate_tenant_database(self, tenant: str, database: str) -> None:
            _bound_session(self._admin_client._server, self._http_timeout)
            super()._validate_tenant_database(tenant=tenant, database=database)

    return BoundedHttpClient


def _bound_session(server: Any, timeout: Any) -> None:
    import httpx

    session = getattr(server, "_session", None)
    if not isinstance(session, httpx.Client):
        raise StoreError(
            "This chromadb version keeps its HTTP session where chromadb 1.5 did not, so "
            "requests to the server cannot be given a timeout; install chromadb 1.5.")
    session.timeout = timeout


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
