"""Reads of a vendor's store as the tests check it, by the names they were written with."""

from __future__ import annotations

from typing import Any

from core.store import VendorStore
from core.store.protocol import commit_links
from core.store.vendor import get_all

# A vendor's two collections, as tests build them from raw ChromaDB collections.
VendorCollections = VendorStore

__all__ = ["VendorCollections", "commit_links", "get_all", "manifest_generation",
           "read_links", "read_manifest"]


def read_manifest(vendor: VendorStore) -> dict[str, dict[str, Any]]:
    return vendor.documents()


def read_links(vendor: VendorStore) -> dict[str, dict[str, Any]]:
    return vendor.links()


def manifest_generation(vendor: VendorStore) -> str | None:
    return vendor.generation()
