"""ChromaDB: one chunk collection and one manifest collection per vendor, embedded or server."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.config import Settings
from core.errors import StoreError, UnknownVendorError, UserInputError
from core.models import StoredRecord, is_valid_vendor_id

# ChromaDB reads this before its telemetry client starts; nothing leaves the machine.
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

SCHEMA_VERSION = 1
_CHUNKS_SUFFIX = "__chunks"
_MANIFEST_SUFFIX = "__manifest"
_PREFIX = "vendor__"


def chunks_collection_name(vendor_id: str) -> str:
    return f"{_PREFIX}{vendor_id}{_CHUNKS_SUFFIX}"


def manifest_collection_name(vendor_id: str) -> str:
    return f"{_PREFIX}{vendor_id}{_MANIFEST_SUFFIX}"


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

    @property
    def location(self) -> str:
        if self.settings.chroma_host:
            return f"ChromaDB server {self.settings.chroma_host}:{self.settings.chroma_port}"
        return f"store {self.settings.store}"

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._connect()
            return self._client

    def _connect(self) -> Any:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        chroma_settings = ChromaSettings(anonymized_telemetry=False)
        try:
            if self.settings.chroma_host:
                return chromadb.HttpClient(
                    host=self.settings.chroma_host,
                    port=self.settings.chroma_port,
                    settings=chroma_settings,
                )
            store = self.settings.store
            if store.exists() and not store.is_dir():
                raise UserInputError(f"The store path {store} exists and is not a folder.")
            store.mkdir(parents=True, exist_ok=True)
            return chromadb.PersistentClient(path=str(store), settings=chroma_settings)
        except UserInputError:
            raise
        except Exception as exc:  # chromadb raises plain exceptions for connection failures
            raise StoreError(f"Cannot open the {self.location}: {_one_line(exc)}") from exc

    def max_batch_size(self) -> int:
        return int(self.client.get_max_batch_size())

    # Vendors -------------------------------------------------------------------------

    def exists(self) -> bool:
        """False for an embedded store that was never written: reading it creates nothing."""
        return bool(self.settings.chroma_host) or (self.settings.store / "chroma.sqlite3").exists()

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
        self._check_compatible(vendor_id, chunks.metadata or {}, embedding_model)
        manifest = self.client.get_or_create_collection(
            manifest_collection_name(vendor_id),
            metadata={"vendor_id": vendor_id, "schema_version": SCHEMA_VERSION},
            embedding_function=None,
        )
        return VendorCollections(vendor_id=vendor_id, chunks=chunks, manifest=manifest)

    @staticmethod
    def refuse_case_clash(vendor_id: str, existing: Sequence[str]) -> None:
        """Vendor ids differing only in case would be one vendor to a reader: refuse."""
        clash = [v for v in existing if v.lower() == vendor_id.lower() and v != vendor_id]
        if clash:
            raise UserInputError(
                f"Vendor id '{vendor_id}' differs only in case from the existing vendor "
                f"'{clash[0]}'; use '{clash[0]}'."
            )

    def _check_compatible(self, vendor_id: str, metadata: dict[str, Any],
                          embedding_model: str | None) -> None:
        version = metadata.get("schema_version")
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"Vendor '{vendor_id}' in the {self.location} was written with store schema "
                f"version {version}; this workbench reads version {SCHEMA_VERSION}."
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
        batch = self.max_batch_size()
        for start in range(0, len(records), batch):
            part = records[start : start + batch]
            collection.upsert(
                ids=[r.id for r in part],
                documents=[r.text for r in part],
                metadatas=[r.metadata for r in part],
                embeddings=np.asarray(embeddings[start : start + batch], dtype=np.float32),
            )

    def delete_ids(self, collection: Any, ids: Iterable[str]) -> None:
        ids = list(ids)
        batch = self.max_batch_size()
        for start in range(0, len(ids), batch):
            collection.delete(ids=ids[start : start + batch])


def get_all(collection: Any, *, where: dict[str, Any] | None = None,
            include: Sequence[str] = ("metadatas",), page_size: int = 5000) -> dict[str, list]:
    """collection.get(where=...) paged, so every match comes back at any corpus size."""
    ids: list[str] = []
    columns: dict[str, list] = {name: [] for name in include}
    offset = 0
    while True:
        page = collection.get(where=where, include=list(include), limit=page_size, offset=offset)
        ids.extend(page["ids"])
        for name in include:
            values = page.get(name)
            if values is not None:
                columns[name].extend(values)
        if len(page["ids"]) < page_size:
            break
        offset += page_size
    return {"ids": ids, **columns}


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
