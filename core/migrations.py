"""Named, ordered store migrations: each step upgrades one vendor's collections by one schema
version, in place.

Both collections of a vendor record the schema version they were last upgraded to. Opening a
vendor whose version is older than `core.store.SCHEMA_VERSION` runs every step it has not
had, in order. ChromaDB has no transaction across collections, so each step is written to be
run again safely, and a version is recorded only after its step completed: manifest first,
chunks last. A process killed anywhere leaves the older version recorded, and the next open
runs the same step again and finishes it. A store of a version with no path to this one (a
newer program's, or one that recorded none) is refused and left untouched."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.store import MANIFEST_GENERATION_ID, SCHEMA_VERSION, VendorCollections

# The first version a store recorded; older stores recorded none and cannot be told apart.
FIRST_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Migration:
    """One step: the version a vendor's collections have once `upgrade` ran on them."""

    version: int
    name: str
    upgrade: Callable[[VendorCollections], None]


def _record_manifest_generation(vendor: VendorCollections) -> None:
    """A manifest last written before generations were recorded gets one, so a reader can
    tell in one small read whether the manifest changed since it last read it."""
    found = vendor.manifest.get(ids=[MANIFEST_GENERATION_ID], include=[])
    if found["ids"]:
        return
    vendor.manifest.upsert(ids=[MANIFEST_GENERATION_ID],
                           metadatas=[{"generation": uuid.uuid4().hex}],
                           embeddings=[[1.0]], documents=["manifest generation"])


MIGRATIONS: tuple[Migration, ...] = (
    Migration(2, "record_manifest_generation", _record_manifest_generation),
)


def recorded_version(collection: Any) -> object:
    """The schema version a collection records (None when it records none)."""
    return (collection.metadata or {}).get("schema_version")


def can_upgrade(version: object) -> bool:
    """True for a recorded version older than this program's that the steps lead from."""
    return (isinstance(version, int) and not isinstance(version, bool)
            and FIRST_SCHEMA_VERSION <= version < SCHEMA_VERSION)


def upgrade(vendor: VendorCollections) -> list[str]:
    """Run every step the vendor has not had, in order; the names of those that ran."""
    versions = [recorded_version(vendor.manifest), recorded_version(vendor.chunks)]
    current = min(v for v in versions if isinstance(v, int))
    ran = []
    for migration in MIGRATIONS:
        if migration.version <= current:
            continue
        migration.upgrade(vendor)
        for collection in (vendor.manifest, vendor.chunks):
            if recorded_version(collection) != migration.version:
                metadata = dict(collection.metadata or {})
                metadata["schema_version"] = migration.version
                collection.modify(metadata=metadata)
        ran.append(migration.name)
    return ran
