"""One writer at a time per store: ingests of documents and rounds take the store's write lock
for their whole write (from reading the manifest to deleting the replaced version), so two
processes writing at once leave the store as one of the two serial orders would.

Why a lock and not an optimistic check on the manifest: a document's replacement is three
writes (chunks, manifest entry, the old version's delete), and ChromaDB offers no conditional
write to fence them. A writer that found, at its commit, that another had committed meanwhile
could not undo the chunks it wrote, nor stop the other from deleting them ("every version but
mine"), so the check would narrow the race without closing it. Holding a lock across the
three writes closes it, at the price of ingests into one store running one after the other.

Two kinds, by where the store lives:

- An embedded store (a folder): `flock` on the folder itself. Nothing is written to take it,
  so a refused or failed ingest still leaves every file as it was, and the kernel releases it
  when a process dies, however it dies.
- A ChromaDB server, shared by processes on several machines: a lease record in the
  `workbench__locks` collection. ChromaDB's `add` of an id that exists is a no-op, so the
  first of two writers adding the record at once owns it, and both read back the same owner.
  The owner renews the lease while it writes; a lease not renewed for `write_lease_s` (its
  process died) is taken over, by a delete conditioned on the stale owner."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from core.errors import StoreError
from core.store import writes

LOCKS_COLLECTION = "workbench__locks"
LOCK_ID = "write"
# How often a waiting writer looks again.
POLL_S = 0.05


def _waited_too_long(location: str, waited_s: float, holder: str) -> StoreError:
    return StoreError(
        f"Another process has been writing to the {location} for the {waited_s:g} s this one "
        f"waited ({holder}); try again when it has finished, or raise "
        "EVIDENCE_WRITE_LOCK_WAIT_S.")


@contextlib.contextmanager
def folder_lock(folder: Path, location: str, wait_s: float,
                on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """An exclusive `flock` on the store folder, waited for at most `wait_s`."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        began = time.monotonic()
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise StoreError(f"Cannot lock the {location} for writing: {exc.strerror}."
                                     ) from exc
            if time.monotonic() - began >= wait_s:
                raise _waited_too_long(location, wait_s, "another ingest")
            if on_wait and not told:
                on_wait(f"Waiting for another process writing to the {location} to finish.")
                told = True
            time.sleep(POLL_S)
        yield
    finally:
        os.close(fd)  # closing the only descriptor releases the lock


class LeaseLock:
    """The write lock of a ChromaDB server: a record only its owner renews and deletes."""

    def __init__(self, client: Any, location: str, *, lease_s: float, wait_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.location = location
        self.lease_s = lease_s
        self.wait_s = wait_s
        self.clock = clock
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._collection: Any = None

    def _locks(self) -> Any:
        if self._collection is None:
            self._collection = writes.create(
                self.client, LOCKS_COLLECTION, embedding_function=None,
                metadata={"purpose": "one writer at a time"})
        return self._collection

    def _record(self) -> dict[str, Any] | None:
        found = self._locks().get(ids=[LOCK_ID], include=["metadatas"])
        return found["metadatas"][0] if found["ids"] else None

    def _metadata(self) -> dict[str, Any]:
        now = self.clock()
        return {"owner": self.owner, "acquired_at": now, "expires_at": now + self.lease_s}

    def _claim(self) -> dict[str, Any] | None:
        writes.apply(self._locks(), "add", ids=[LOCK_ID], embeddings=[[0.0]],
                     metadatas=[self._metadata()])
        record = self._record()
        if record is not None and record.get("owner") == self.owner:
            return None
        return record or {}

    def try_acquire(self) -> dict[str, Any] | None:
        """None when this process now owns the lock, else the holder's record."""
        holder = self._claim()
        if holder and float(holder.get("expires_at", 0.0)) < self.clock():
            # The holder stopped renewing: remove exactly that record, then claim again.
            writes.apply(self._locks(), "delete", ids=[LOCK_ID],
                         where={"owner": str(holder.get("owner"))})
            holder = self._claim()
        return holder

    def renew(self) -> None:
        """Push the expiry on, if the record is still this process's. An update, never an
        upsert: a record that was taken away is not made again."""
        record = self._record()
        if record is not None and record.get("owner") == self.owner:
            writes.apply(self._locks(), "update", ids=[LOCK_ID],
                         metadatas=[{**record, "expires_at": self.clock() + self.lease_s}])

    def release(self) -> None:
        writes.apply(self._locks(), "delete", ids=[LOCK_ID], where={"owner": self.owner})

    @contextlib.contextmanager
    def held(self, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
        began = time.monotonic()
        told = False
        while True:
            holder = self.try_acquire()
            if holder is None:
                break
            if time.monotonic() - began >= self.wait_s:
                raise _waited_too_long(self.location, self.wait_s,
                                       f"held by {holder.get('owner', 'another writer')}")
            if on_wait and not told:
                on_wait(f"Waiting for {holder.get('owner', 'another writer')}, writing to the "
                        f"{self.location}, to finish.")
                told = True
            time.sleep(POLL_S * 4)
        stop = threading.Event()

        def keep_renewing() -> None:
            while not stop.wait(self.lease_s / 4):
                with contextlib.suppress(Exception):  # a failed renewal is retried next time
                    self.renew()

        renewer = threading.Thread(target=keep_renewing, name="write-lease", daemon=True)
        renewer.start()
        try:
            yield
        finally:
            stop.set()
            renewer.join()
            with contextlib.suppress(Exception):  # a server gone: the lease expires by itself
                self.release()
