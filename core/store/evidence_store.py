"""The store: ChromaDB opened lazily, embedded or as a server, handing out each vendor's
evidence (`VendorStore`), conversations and verdicts; never mixes vendors."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from core.config import Settings
from core.errors import StoreError, UnknownVendorError, UserInputError
from core.models import StoredRecord, is_valid_vendor_id
from core.store import writes
from core.store.audit_log import AuditLog
from core.store.bindings import (
    PERSISTED_AT_EVERY_WRITE,
    persist_at_every_write,
    persists_at_every_write,
)
from core.store.client import connect
from core.store.conversation_file import ConversationFile, conversation_file_path
from core.store.conversations import ConversationRecords
from core.store.criteria import CriteriaListRecords
from core.store.decisions import DecisionRecords
from core.store.judgments import JudgmentRecords
from core.store.migrations import FIRST_SCHEMA_VERSION, SCHEMA_VERSION, can_upgrade, upgrade
from core.store.paths import STORE_DATABASE, check_store_path
from core.store.registry import Registered, VendorRegistry, read_vendor_status
from core.store.texts import TextRecords
from core.store.vendor import VendorStore
from core.store.verdicts import VerdictRecords

# ChromaDB reads this before its telemetry client starts; nothing leaves the machine.
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

_CHUNKS_SUFFIX = "__chunks"
_MANIFEST_SUFFIX = "__manifest"
_CONVERSATIONS_SUFFIX = "__conversations"
_VERDICTS_SUFFIX = "__verdicts"
_DECISIONS_SUFFIX = "__decisions"
_JUDGMENTS_SUFFIX = "__judgments"
_CRITERIA_SUFFIX = "__criteria"
_PREFIX = "vendor__"
CRITERIA_CONTROLS_COLLECTION = "workbench__criteria_controls"
Records = TypeVar("Records", VerdictRecords, DecisionRecords, JudgmentRecords,
                  CriteriaListRecords)
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


def verdicts_collection_name(vendor_id: str) -> str:
    return f"{_PREFIX}{vendor_id}{_VERDICTS_SUFFIX}"


def decisions_collection_name(vendor_id: str) -> str:
    return f"{_PREFIX}{vendor_id}{_DECISIONS_SUFFIX}"


def judgments_collection_name(vendor_id: str) -> str:
    return f"{_PREFIX}{vendor_id}{_JUDGMENTS_SUFFIX}"


def criteria_collection_name(vendor_id: str) -> str:
    return f"{_PREFIX}{vendor_id}{_CRITERIA_SUFFIX}"


def check_vendor_id(vendor_id: object) -> str:
    """Return the id, or refuse it in one sentence."""
    if not is_valid_vendor_id(vendor_id):
        shown = repr(vendor_id) if len(repr(vendor_id)) <= 80 else repr(vendor_id)[:77] + "..."
        raise UserInputError(
            f"Vendor id {shown} is not valid: use 1-63 letters, digits, '_' or '-', "
            "starting with a letter or digit."
        )
    return vendor_id  # type: ignore[return-value]


class EvidenceStore:
    """Opens ChromaDB lazily and hands out per-vendor collections; never mixes vendors."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._client: Any = None
        self._lock = threading.Lock()
        # Vendors opened and checked once; collections are never deleted, so a handle stays
        # good, and a retrieval need not ask ChromaDB for three collections every time.
        self._opened: dict[str, VendorStore] = {}
        self._conversations: dict[str, Any] = {}
        self._criteria_controls: TextRecords | None = None
        # What runs the embedding model of this process's writes ("onnx", "torch"; None for
        # none), set by the workbench. Each chunk write records it on the vendor's chunk
        # collection as `embedding_runtime`: the store says which runtime wrote last. Only
        # `embedding_model` decides compatibility; the runtimes' vectors agree to 1e-4.
        self.writer_runtime: Callable[[], str | None] = lambda: None
        # A seam for tests: called as soon as this store's write lock is held, before the
        # writer goes on (a race test holds it there until the other writer is seen waiting).
        self.on_lock_held: Callable[[], None] | None = None
        # The register of vendors (core/store/registry.py), once found complete; the vendors
        # each thread holding the write lock has written to, recorded when it lets go.
        self._registry: VendorRegistry | None = None
        self._writing: dict[int, dict[str, None]] = {}
        self._registering = False
        self._audit_log: AuditLog | None = None

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
        return connect(self.settings, self.location)

    def write_lock(self, on_wait: Callable[[str], None] | None = None
                   ) -> contextlib.AbstractContextManager[None]:
        """The store's write lock (core/store/locking.py), held by one ingest at a time."""
        from core.store.locking import LeaseLock, folder_lock

        s = self.settings
        if s.chroma_host:
            lock = LeaseLock(self.client, self.location, lease_s=s.write_lease_s,
                             wait_s=s.write_lock_wait_s).held(on_wait)
        else:
            store = s.store
            check_store_path(store, opening=True)  # a file, a pipe, a broken link, a folder
            lock = folder_lock(store, self.location, s.write_lock_wait_s, on_wait)
        return self._held(lock)

    @contextlib.contextmanager
    def _held(self, lock: contextlib.AbstractContextManager[None]) -> Iterator[None]:
        with lock:
            if self.on_lock_held is not None:
                self.on_lock_held()
            thread = threading.get_ident()
            written: dict[str, None] = {}
            self._writing[thread] = written
            try:
                yield
                self._record_written(written)
            finally:
                del self._writing[thread]

    def audit_log(self) -> AuditLog:
        """The store's audit log (core/store/audit_log.py): one store-wide collection, which
        is no vendor's; made at its first entry, so reading it creates nothing."""
        with self._lock:
            if self._audit_log is None:
                self._audit_log = AuditLog(self._collection, self.location)
            return self._audit_log

    # The register of vendors ---------------------------------------------------------

    def registered(self) -> dict[str, Registered] | None:
        """Every vendor of the store's register, by id; None for a store without a complete
        register (written before it existed, or never written), whose vendors are found by
        listing its collections. A pending vendor whose collections were never made (its
        first write interrupted before them) is no vendor and is left out."""
        registry = self._find_registry()
        if registry is None:
            return None
        return {vendor_id: entry for vendor_id, entry in registry.entries().items()
                if not entry.pending or self.holds(vendor_id)}

    def recount(self, vendor_id: str) -> None:
        """Record the vendor's counts afresh when the write lock is let go (under the lock)."""
        self._written(vendor_id)

    def _find_registry(self) -> VendorRegistry | None:
        if self._registry is None and self.exists():
            self._registry = VendorRegistry.find(self.client)
        return self._registry

    def _written(self, vendor_id: str, changes: Callable[[], bool] | None = None) -> None:
        """Before a write to the vendor: mark it pending in the register (made first, under
        the write lock, when the store has none), once per holding of the lock; a write that
        `changes` says changes nothing marks nothing."""
        if self._registering:  # the register is being made: it reads every vendor anyway
            return
        written = self._writing.get(threading.get_ident())
        if written is not None and vendor_id in written:
            return
        if changes is not None and not changes():
            return
        if written is None:  # a write outside the lock (a migration a reader runs)
            registry = self._find_registry()
            if registry is not None:
                registry.mark_pending(vendor_id)
            return
        registry = self._find_registry() or self._build_registry()
        registry.mark_pending(vendor_id)
        written[vendor_id] = None

    def _build_registry(self) -> VendorRegistry:
        self._registering = True
        try:
            vendors = [self.open_vendor(v) for v in self._listed_vendor_ids()]
            self._registry = VendorRegistry.build(self.client, vendors)
        finally:
            self._registering = False
        return self._registry

    def _record_written(self, written: dict[str, None]) -> None:
        """What each vendor written to holds now, read back from its committed state."""
        registry = self._find_registry()
        if registry is None or not written:
            return
        statuses = []
        for vendor_id in written:
            if self.holds(vendor_id):
                statuses.append(read_vendor_status(self.open_vendor(vendor_id)))
        registry.record(statuses)

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
        registered = self.registered()
        if registered is None:
            return self._listed_vendor_ids()
        return sorted(registered)

    def holds(self, vendor_id: str) -> bool:
        """True when the vendor's evidence exists in the store."""
        return self._find(chunks_collection_name(vendor_id)) is not None

    def existing(self, vendor_id: str) -> bool:
        """True when the vendor exists; False for a new one, after refusing an id that
        differs only in case from an existing vendor's (one lookup each, at any number of
        vendors, in a store with a register)."""
        if self.holds(vendor_id):
            return True
        registry = self._find_registry()
        self.refuse_case_clash(vendor_id, registry.same_but_case(vendor_id)
                               if registry is not None else self._listed_vendor_ids())
        return False

    def _listed_vendor_ids(self) -> list[str]:
        """Every vendor, found by listing the store's collections."""
        if not self.exists():
            return []
        vendors = []
        for collection in self.client.list_collections():
            name = collection if isinstance(collection, str) else collection.name
            if name.startswith(_PREFIX) and name.endswith(_CHUNKS_SUFFIX):
                vendors.append(name[len(_PREFIX) : -len(_CHUNKS_SUFFIX)])
        return sorted(vendors)

    def open_vendor(self, vendor_id: str, *, create: bool = False,
                    embedding_model: str | None = None) -> VendorStore:
        """The vendor's evidence; refused when missing (unless create) or incompatible."""
        check_vendor_id(vendor_id)
        with self._lock:
            opened = self._opened.get(vendor_id)
        if opened is not None:
            self._check_compatible(vendor_id, opened.chunks.metadata or {}, embedding_model)
            return opened
        # One lookup by name for a vendor that exists; for one that does not, one more in the
        # register (to refuse an id differing only in case from an existing vendor's).
        if not self.existing(vendor_id):
            if not create:
                raise UnknownVendorError(
                    f"No evidence is stored for vendor '{vendor_id}' in the {self.location}."
                )
            self._written(vendor_id)
        metadata = {"vendor_id": vendor_id, "schema_version": SCHEMA_VERSION}
        if embedding_model:
            metadata["embedding_model"] = embedding_model
        chunks = writes.create(
            self.client, chunks_collection_name(vendor_id),
            metadata=metadata,
            configuration={"hnsw": {"space": "cosine", **PERSISTED_AT_EVERY_WRITE}},
            embedding_function=None,
        )
        self._check_compatible(vendor_id, chunks.metadata or {}, embedding_model, older=True)
        manifest = writes.create(
            self.client, manifest_collection_name(vendor_id),
            metadata={"vendor_id": vendor_id, "schema_version": SCHEMA_VERSION},
            configuration={"hnsw": PERSISTED_AT_EVERY_WRITE},
            embedding_function=None,
        )
        self._check_compatible(vendor_id, manifest.metadata or {}, None, older=True)
        opened = self._upgraded(self._vendor(vendor_id, chunks, manifest), embedding_model)
        with self._lock:
            self._opened[vendor_id] = opened
        return opened

    def conversations(self, vendor_id: str, *, create: bool = False
                      ) -> ConversationRecords | ConversationFile | None:
        """The vendor's conversation messages, made at the first question (a store written
        before conversations existed simply has none yet): beside an embedded store, the
        vendor's file (core/store/conversation_file.py), which takes in once what a
        collection of an earlier version held; on a server, a collection of its own."""
        vendor = self.open_vendor(vendor_id)
        with self._lock:
            found = self._conversations.get(vendor.vendor_id)
        if found is not None:  # collections are never deleted: a handle stays good
            return found
        earlier = self._collection(conversations_collection_name(vendor.vendor_id),
                                   create=create and bool(self.settings.chroma_host),
                                   metadata={"vendor_id": vendor_id,
                                             "schema_version": SCHEMA_VERSION},
                                   configuration={"hnsw": {"space": "cosine",
                                                           **PERSISTED_AT_EVERY_WRITE}})
        if self.settings.chroma_host:
            if earlier is None:
                return None
            found = ConversationRecords(earlier)
        else:
            found = ConversationFile(conversation_file_path(self.settings.store,
                                                            vendor.vendor_id))
            if earlier is not None:
                found.import_once(ConversationRecords(earlier).every_message)
            elif not create and not found.exists():
                return None
        with self._lock:
            self._conversations[vendor.vendor_id] = found
        return found

    def verdicts(self, vendor_id: str, *, create: bool = False) -> VerdictRecords | None:
        """The vendor's verdicts (a collection made at the first verdict written: a read of a
        vendor never assessed creates nothing)."""
        return self._records(vendor_id, verdicts_collection_name, VerdictRecords, create)

    def decisions(self, vendor_id: str, *, create: bool = False) -> DecisionRecords | None:
        """The vendor's reviewer decisions (a collection made at the first decision: a read
        of a vendor never decided creates nothing)."""
        return self._records(vendor_id, decisions_collection_name, DecisionRecords, create)

    def judgments(self, vendor_id: str, *, create: bool = False) -> JudgmentRecords | None:
        """The vendor's relevance judgments (a collection made at the first judgment: a read
        of a vendor never judged creates nothing)."""
        return self._records(vendor_id, judgments_collection_name, JudgmentRecords, create)

    def criteria_lists(self, vendor_id: str, *, create: bool = False
                       ) -> CriteriaListRecords | None:
        """The criteria lists used with the vendor (a collection made at the first list
        kept: a read of a vendor none was used with creates nothing)."""
        return self._records(vendor_id, criteria_collection_name, CriteriaListRecords,
                             create)

    def criteria_controls(self, *, create: bool = False) -> TextRecords | None:
        """The criteria lists' mappings to controls (core/controls/mappings.py): one
        store-wide collection, which is no vendor's, as every vendor's answers link by them;
        made at the first list kept, so reading it creates nothing. Its handle is kept once
        found, as the conversations' are (the collection is never deleted), so a retrieval
        that links by controls does not look it up again."""
        with self._lock:
            found = self._criteria_controls
        if found is not None:
            return found
        collection = self._collection(
            CRITERIA_CONTROLS_COLLECTION, create=create,
            metadata={"schema_version": SCHEMA_VERSION},
            configuration={"hnsw": PERSISTED_AT_EVERY_WRITE})
        if collection is None:
            return None
        with self._lock:
            self._criteria_controls = TextRecords(collection)
            return self._criteria_controls

    def _records(self, vendor_id: str, name: Callable[[str], str], kind: type[Records],
                 create: bool) -> Records | None:
        """One of the vendor's collections of records without vectors of their own, made
        when `create`; None when there is none yet."""
        vendor = self.open_vendor(vendor_id)
        collection = self._collection(
            name(vendor.vendor_id), create=create,
            metadata={"vendor_id": vendor.vendor_id, "schema_version": SCHEMA_VERSION},
            configuration={"hnsw": PERSISTED_AT_EVERY_WRITE})
        return kind(collection) if collection is not None else None

    def _collection(self, name: str, *, create: bool, **options: Any) -> Any | None:
        """A collection of the store, made when `create`; else None when there is none."""
        found = (writes.create(self.client, name, embedding_function=None, **options) if create
                 else self._find(name))
        if found is not None and not persists_at_every_write(found):
            persist_at_every_write(found)  # a collection made before indexes persisted so
        return found

    def _find(self, name: str) -> Any | None:
        """The collection of this name, or None (reading a store never written creates
        nothing)."""
        if not self.exists():
            return None
        from chromadb.errors import NotFoundError

        try:
            return self.client.get_collection(name, embedding_function=None)
        except NotFoundError:
            return None

    @staticmethod
    def refuse_case_clash(vendor_id: str, existing: Sequence[str]) -> None:
        """Vendor ids differing only in case would be one vendor to a reader: refuse."""
        clash = [v for v in existing if v.lower() == vendor_id.lower() and v != vendor_id]
        if clash:
            raise UserInputError(
                f"Vendor id '{vendor_id}' differs only in case from the existing vendor "
                f"'{clash[0]}'; use '{clash[0]}'."
            )

    def _vendor(self, vendor_id: str, chunks: Any, manifest: Any) -> VendorStore:
        # Late-bound, so that what a test puts in place of either is what writes.
        return VendorStore(vendor_id, chunks, manifest,
                           batch_size=lambda: self.max_batch_size(),
                           chunk_writer=lambda *args: self.upsert(*args),
                           before_write=lambda changes: self._written(vendor_id, changes))

    def upsert(self, vendor: VendorStore, records: Sequence[StoredRecord],
               embeddings: Any) -> None:
        """Every chunk write of the write protocol: the writer's runtime noted on the
        collection, then the records in batches under the client's maximum batch size. The
        one seam through which a test stops or fails a write."""
        if records:
            self._record_runtime(vendor)
        vendor.upsert_batches(records, embeddings)

    def _upgraded(self, vendor: VendorStore, embedding_model: str | None) -> VendorStore:
        """The vendor's evidence at SCHEMA_VERSION, older versions upgraded in place first."""
        if not upgrade(vendor):
            return vendor
        chunks = self.client.get_collection(chunks_collection_name(vendor.vendor_id),
                                            embedding_function=None)
        manifest = self.client.get_collection(manifest_collection_name(vendor.vendor_id),
                                              embedding_function=None)
        self._check_compatible(vendor.vendor_id, chunks.metadata or {}, embedding_model)
        self._check_compatible(vendor.vendor_id, manifest.metadata or {}, None)
        return self._vendor(vendor.vendor_id, chunks, manifest)

    def _check_compatible(self, vendor_id: str, metadata: dict[str, Any],
                          embedding_model: str | None, *, older: bool = False) -> None:
        """Refuse a vendor this program cannot read; with `older`, a version the migrations
        upgrade passes (the caller upgrades it)."""

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

    def _record_runtime(self, vendor: VendorStore) -> None:
        """Note this writer's embedding runtime on the chunk collection, read fresh so that no
        other key another process wrote meanwhile is lost; no write when it is already there."""
        runtime = self.writer_runtime()
        if not runtime:
            return
        stored = self.client.get_collection(vendor.chunks.name, embedding_function=None)
        metadata = dict(stored.metadata or {})
        if metadata.get("embedding_runtime") != runtime:
            writes.apply(vendor.chunks, "modify",
                         metadata={**metadata, "embedding_runtime": runtime})
