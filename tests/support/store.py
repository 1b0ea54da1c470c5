"""Reads of a vendor's store as the tests check it, by the names they were written with."""

from __future__ import annotations

from typing import Any

from core.store import VendorStore
from core.store.protocol import commit_links
from core.store.scoping import TEXT_KEY, read_back
from core.store.vendor import get_all

# A vendor's two collections, as tests build them from raw ChromaDB collections.
VendorCollections = VendorStore

__all__ = ["VendorCollections", "chunk_rows", "commit_links", "get_all", "manifest_generation",
           "read_links", "read_manifest", "with_texts"]


def with_texts(found: dict[str, Any]) -> dict[str, Any]:
    """A ChromaDB read of chunk records (`get` or a paged `get_all`, with metadatas) with each
    record's text under "documents" and its metadata as stored, the text key left out: a
    chunk's text is kept in its metadata (core/store/scoping.py), not as a document."""
    metadatas = found["metadatas"]
    documents = found.get("documents") or [None] * len(metadatas)
    texts = [read_back(d, m)[0] if m is not None else d for d, m in zip(documents, metadatas,
                                                                          strict=True)]
    return {**found, "documents": texts,
            "metadatas": [None if m is None else {k: v for k, v in m.items() if k != TEXT_KEY}
                          for m in metadatas]}


def chunk_rows(collection: Any, **get: Any) -> dict[str, Any]:
    """`collection.get(**get)` of a chunk collection, with texts and metadatas (`with_texts`)."""
    include = list(dict.fromkeys([*get.pop("include", []), "documents", "metadatas"]))
    return with_texts(collection.get(include=include, **get))


def read_manifest(vendor: VendorStore) -> dict[str, dict[str, Any]]:
    return vendor.documents()


def read_links(vendor: VendorStore) -> dict[str, dict[str, Any]]:
    return vendor.links()


def manifest_generation(vendor: VendorStore) -> str | None:
    return vendor.generation()
