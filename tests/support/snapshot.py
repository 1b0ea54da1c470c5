"""Snapshots of an evidence store, to show that a refused command left it exactly as it was.

Hashing the files of an embedded ChromaDB store does not work: a process that loads a
collection rewrites its HNSW index files (same vectors, different bytes), and the first client
to open a store adds a row to the `acquire_write` table. Reads change bytes; they change no
content. So a snapshot compares content, in two views that survive reads and catch any write:

- `database_snapshot(folder)`: every row of every table of `chroma.sqlite3` except
  `acquire_write`, read with sqlite3 itself (no ChromaDB client, so it is just as honest for a
  store written by another process such as the CLI), plus the names of every file and folder
  under the store. Every write ChromaDB makes lands in that database: collections and their
  configuration, records, documents and metadata, and the log that carries every vector.
- `collections_snapshot(client)`: the list of collections and, for each, its metadata and
  its full content (ids, documents, metadatas, embeddings), read through a ChromaDB client;
  this one also works for a ChromaDB server.

`store_snapshot(workbench)` takes both for a Workbench; `assert_unchanged(before, after)`
fails with a short list of what differs instead of a diff of the whole store.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

# Written when a client opens the store, whatever it then does; it holds no evidence.
VOLATILE_TABLES = frozenset({"acquire_write"})
_PAGE = 5000


def _digest(parts: list[str]) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part.encode("utf-8", "backslashreplace"))
        sha.update(b"\n")
    return sha.hexdigest()


def file_names(folder: Path) -> list[str]:
    """Every file and folder under `folder`, relative, folders ending in '/'."""
    folder = Path(folder)
    return sorted(f"{p.relative_to(folder).as_posix()}{'/' if p.is_dir() else ''}"
                  for p in folder.rglob("*"))


def database_snapshot(folder: Path) -> dict[str, Any]:
    """The content of an embedded store, table by table, and the names of its files.

    {"exists": False} when the folder does not exist, so creating an empty store counts as a
    change too."""
    folder = Path(folder)
    if not folder.exists():
        return {"exists": False}
    snapshot: dict[str, Any] = {"exists": True, "files": file_names(folder), "tables": {}}
    database = folder / "chroma.sqlite3"
    if not database.exists():
        return snapshot
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        tables = [name for (name,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        for table in tables:
            if table in VOLATILE_TABLES or table.startswith("sqlite_"):
                continue
            rows = sorted(repr(row) for row in connection.execute(f'SELECT * FROM "{table}"'))
            snapshot["tables"][table] = (len(rows), _digest(rows))
    finally:
        connection.close()
    return snapshot


def collections_snapshot(client: Any, *, skip: Collection[str] = ()) -> dict[str, Any]:
    """Every collection (but those named in `skip`) with its metadata and every record,
    embeddings compared as float32 bytes: any change to any record shows."""
    snapshot: dict[str, Any] = {}
    for listed in client.list_collections():
        name = listed if isinstance(listed, str) else listed.name
        if name in skip:
            continue
        collection = client.get_collection(name, embedding_function=None)
        records = []
        offset = 0
        while True:
            page = collection.get(include=["documents", "metadatas", "embeddings"],
                                  limit=_PAGE, offset=offset)
            embeddings = page["embeddings"]
            for index, record_id in enumerate(page["ids"]):
                vector = np.asarray(embeddings[index], dtype=np.float32).tobytes()
                records.append((record_id, page["documents"][index],
                                sorted((page["metadatas"][index] or {}).items()),
                                hashlib.sha256(vector).hexdigest()))
            if len(page["ids"]) < _PAGE:
                break
            offset += _PAGE
        records.sort(key=lambda record: record[0])
        snapshot[name] = {
            "metadata": sorted((collection.metadata or {}).items()),
            "count": len(records),
            "records": _digest([repr(record) for record in records]),
            "ids": [record[0] for record in records],
        }
    return snapshot


def store_snapshot(workbench: Any) -> dict[str, Any]:
    """Both views of a Workbench's store. A store that was never written is not opened (opening
    an embedded store creates its folder)."""
    settings = workbench.settings
    snapshot: dict[str, Any] = {}
    if not settings.chroma_host:
        snapshot["database"] = database_snapshot(settings.store)
    snapshot["collections"] = (collections_snapshot(workbench.store.client)
                               if workbench.store.exists() else None)
    return snapshot


def differences(before: Any, after: Any, where: str = "store") -> list[str]:
    """Where two snapshots differ, one line each: tables, collections, files."""
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        found = []
        for key in sorted(set(before) | set(after), key=str):
            if key not in before:
                found.append(f"{where}/{key}: added")
            elif key not in after:
                found.append(f"{where}/{key}: removed")
            else:
                found.extend(differences(before[key], after[key], f"{where}/{key}"))
        return found
    if isinstance(before, list) and isinstance(after, list):
        added = [x for x in after if x not in before][:5]
        removed = [x for x in before if x not in after][:5]
        return [f"{where}: added {added}, removed {removed}"]
    return [f"{where}: {before!r} -> {after!r}"]


def assert_unchanged(before: Any, after: Any) -> None:
    """Fail with what changed, if anything did."""
    changed = differences(before, after)
    assert not changed, "the store changed:\n" + "\n".join(changed[:20])
