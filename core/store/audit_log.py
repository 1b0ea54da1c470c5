"""The store's audit log: who did what, when, to which vendor, as a hash chain kept in one
store-wide collection (`workbench__audit`), records without vectors of their own.

Each entry holds the hash of the one before it (`prev`) and its own `hash`, SHA-256 over the
canonical JSON of every other field, so an entry changed, removed or put out of order after
it was written breaks the chain there, and `verify` names the entry. A chain cannot show the
newest entries replaced together with their hashes: keeping the head hash `verify` reports
somewhere else (a ticket, a change record) closes that.

Appending takes no lock, so recording a page view never waits for an ingest holding the
store's write lock, nor for another writer. Record ids are the zero-padded sequence numbers,
and ChromaDB's `add` of an id that exists is a no-op: a writer adds the next number, reads it
back, and when another writer's entry is there instead, chains onto that one and tries the
number after it. One add is one write, so a process killed while appending leaves the whole
entry or none."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Protocol

from core.config import MAX_CRITERION_CHARS
from core.errors import StoreError, UserInputError
from core.models import is_valid_vendor_id
from core.store import writes
from core.store.bindings import PERSISTED_AT_EVERY_WRITE

AUDIT_COLLECTION = "workbench__audit"
AUDIT_VERSION = 1
# Digits of a record id: the entry's sequence number, zero-padded, so ids sort as numbers.
ID_DIGITS = 12
# How many times an append tries the next number after another writer took the one it tried.
APPEND_ATTEMPTS = 200
# Records per page of a read.
PAGE_SIZE = 5000
# What each kind of field may hold.
MAX_USER_CHARS = 320
MAX_LABEL_CHARS = 200
MAX_DETAIL_CHARS = 1000
_ACTION = re.compile(r"[a-z][a-z0-9_]{0,39}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# The metadata each record keeps beside its document, for the filters: what the entry holds.
_FILTERED = ("seq", "at", "user", "action", "vendor", "hash", "prev")
_NO_VENDOR = ""  # metadata cannot hold None


@dataclass(frozen=True)
class AuditEntry:
    """One entry of the log; `hash` covers every other field, `prev` included."""

    seq: int
    at: str
    user: str
    action: str
    vendor: str | None = None
    criterion: str | None = None
    page: str | None = None
    strategy: str | None = None
    context_sha256: str | None = None
    detail: str | None = None
    prev: str = ""
    hash: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def computed_hash(self) -> str:
        """SHA-256 hex of the canonical JSON of every field but `hash`."""
        held = {k: v for k, v in asdict(self).items() if k != "hash"}
        return hashlib.sha256(canonical_json(held).encode("utf-8")).hexdigest()

    def document(self) -> str:
        """The record's text: the canonical JSON of the whole entry."""
        return canonical_json(asdict(self))

    def metadata(self) -> dict[str, Any]:
        """What the record keeps for the filters (and `at_us`, the time as a number, for
        `since`)."""
        held = asdict(self)
        found = {key: held[key] for key in _FILTERED}
        found["vendor"] = self.vendor or _NO_VENDOR
        found["at_us"] = _microseconds(datetime.fromisoformat(self.at))
        return found

    @classmethod
    def from_document(cls, text: str) -> AuditEntry:
        """The entry a record's text holds; ValueError when it holds no entry."""
        data = json.loads(text)
        names = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or set(data) != names:
            raise ValueError("not the fields of an entry")
        entry = cls(**data)
        if not isinstance(entry.seq, int) or not all(
                isinstance(getattr(entry, name), str) for name in ("at", "user", "action",
                                                                   "prev", "hash")):
            raise ValueError("fields of the wrong type")
        return entry


@dataclass(frozen=True)
class AuditCheck:
    """What `verify` found: whether the chain holds, how many entries it has, the hash of the
    newest that holds, and the first entry that breaks it: its sequence number (None for a
    record that is no entry) and why, in words."""

    ok: bool
    count: int
    head: str
    broken_seq: int | None = None
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"ok": self.ok, "entries": self.count, "head": self.head}
        if not self.ok:
            found.update(broken=self.broken_seq, problem=self.problem)
        return found


def canonical_json(data: dict[str, Any]) -> str:
    """Keys sorted, no spaces, text as it is: one text for one value, whoever writes it."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def record_id(seq: int) -> str:
    return f"{seq:0{ID_DIGITS}d}"


def _seq_of(record: str) -> int | None:
    return int(record) if len(record) == ID_DIGITS and record.isdigit() else None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _microseconds(moment: datetime) -> int:
    """Microseconds since 1970 in UTC, exactly (no float in between)."""
    return (moment - _EPOCH) // timedelta(microseconds=1)


def now_utc() -> str:
    """The time now in UTC, ISO 8601 to the microsecond: 2026-11-27T21:04:05.123456Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str, *, name: str = "--since") -> datetime:
    """An ISO 8601 date (its start, in UTC) or time (UTC unless it names an offset)."""
    shown = text if len(text) <= 60 else text[:57] + "..."
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text.strip()):
            moment = datetime.combine(date.fromisoformat(text.strip()), time())
        else:
            moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UserInputError(
            f"{name} {shown!r} is not an ISO 8601 date or time, such as 2026-11-27 or "
            "2026-11-27T21:04:05Z.") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _checked_text(name: str, value: object, most: int, *, optional: bool = True,
                  one_line: bool = True) -> str | None:
    """A text field as given, or a refusal in one sentence naming it."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise UserInputError(f"The audit entry's {name} must be text, not "
                             f"{type(value).__name__}.")
    if not value.strip():
        raise UserInputError(f"The audit entry's {name} is empty.")
    if len(value) > most:
        raise UserInputError(f"The audit entry's {name} is {len(value):,} characters long; "
                             f"at most {most:,} are kept.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UserInputError(f"The audit entry's {name} is not valid UTF-8 text (character "
                             f"{exc.start + 1} is a stray byte).") from None
    if one_line and (found := _CONTROL.search(value)):
        raise UserInputError(f"The audit entry's {name} holds a control character "
                             f"(character {found.start() + 1}).")
    return value


def checked_fields(user: object, action: object, **given: object) -> dict[str, Any]:
    """The fields of a new entry, each checked, or a refusal in one sentence."""
    found: dict[str, Any] = {"user": _checked_text("user", user, MAX_USER_CHARS,
                                                   optional=False)}
    if not isinstance(action, str) or not _ACTION.fullmatch(action):
        shown = repr(action)[:60]
        raise UserInputError(f"The audit entry's action {shown} is not one word of lower-case "
                             "letters, digits and '_' (such as view or audit_view).")
    found["action"] = action
    vendor = given.get("vendor")
    if vendor is not None and not is_valid_vendor_id(vendor):
        raise UserInputError(f"The audit entry's vendor {repr(vendor)[:80]} is not a vendor "
                             "id.")
    found["vendor"] = vendor
    found["criterion"] = _checked_text("criterion", given.get("criterion"),
                                       MAX_CRITERION_CHARS, one_line=False)
    for name in ("page", "strategy"):
        found[name] = _checked_text(name, given.get(name), MAX_LABEL_CHARS)
    context = given.get("context_sha256")
    if context is not None and not (isinstance(context, str) and _SHA256.fullmatch(context)):
        raise UserInputError(f"The audit entry's context_sha256 {repr(context)[:80]} is not "
                             "64 lower-case hex digits.")
    found["context_sha256"] = context
    found["detail"] = _checked_text("detail", given.get("detail"), MAX_DETAIL_CHARS,
                                    one_line=False)
    return found


class CollectionOpener(Protocol):
    """Opens one of the store's collections by name: made when `create`, else None when the
    store has none of that name."""

    def __call__(self, name: str, *, create: bool, **options: Any) -> Any | None: ...


class AuditLog:
    """The store's audit log: `append` an entry, read `entries`, `verify` the chain. It is
    given what it needs of the store, a collection opener and the store's place in words,
    not the store itself."""

    def __init__(self, open_collection: CollectionOpener, location: str) -> None:
        self._open = open_collection
        self.location = location
        self._handle: Any = None

    def _collection(self, *, create: bool) -> Any | None:
        """The log's collection, made when `create`; None for a log never written (reading
        one creates nothing). Collections are never deleted, so a handle found stays good."""
        if self._handle is None:
            self._handle = self._open(
                AUDIT_COLLECTION, create=create,
                metadata={"purpose": "audit log", "audit_version": AUDIT_VERSION},
                configuration={"hnsw": PERSISTED_AT_EVERY_WRITE})
        return self._handle

    # Appending ----------------------------------------------------------------------

    def append(self, user: str, action: str, *, vendor: str | None = None,
               criterion: str | None = None, page: str | None = None,
               strategy: str | None = None, context_sha256: str | None = None,
               detail: str | None = None) -> AuditEntry:
        """Add one entry after the newest, chained to it, and return it as stored. Bad
        fields are refused in one sentence before anything is written."""
        checked = checked_fields(user, action, vendor=vendor, criterion=criterion, page=page,
                                 strategy=strategy, context_sha256=context_sha256,
                                 detail=detail)
        collection = self._collection(create=True)
        writer = uuid.uuid4().hex  # tells this append's record from another writer's
        head = self._head(collection)
        for _ in range(APPEND_ATTEMPTS):
            seq = 0 if head is None else head[0] + 1
            draft = AuditEntry(seq=seq, at=now_utc(), prev="" if head is None else head[1],
                               **checked)
            entry = AuditEntry(**{**asdict(draft), "hash": draft.computed_hash()})
            writes.apply(collection, "add", ids=[record_id(seq)], documents=[entry.document()],
                         metadatas=[{**entry.metadata(), "writer": writer}],
                         embeddings=[[1.0]])
            stored = collection.get(ids=[record_id(seq)], include=["metadatas"])
            metadata = stored["metadatas"][0] if stored["ids"] else None
            if metadata is not None and metadata.get("writer") == writer:
                return entry
            # Another writer's entry holds this number: it is the newest one can chain to.
            head = ((seq, str(metadata.get("hash", ""))) if metadata is not None
                    else self._head(collection))
        raise StoreError(
            f"Could not append to the audit log of the {self.location}: other writers "
            f"took each of the next {APPEND_ATTEMPTS} entries first; try again.")

    def _head(self, collection: Any) -> tuple[int, str] | None:
        """(seq, hash) of the entry of the highest sequence number, or None for an empty log.

        Of n records the highest id is at least n - 1, so it is among the records from n - 1
        up: one count and one lookup, whatever the log's length (more than one record only
        when entries below were removed, or others are appending)."""
        count = collection.count()
        if count == 0:
            return None
        found = collection.get(where={"seq": {"$gte": count - 1}}, include=["metadatas"])
        if not found["ids"]:  # sequence numbers changed on disk: look at every record
            found = self._read(collection, include=("metadatas",))
        rows = [(seq, meta) for record, meta in zip(found["ids"], found["metadatas"],
                                                   strict=True)
                if (seq := _seq_of(record)) is not None and meta is not None]
        if not rows:
            return None
        seq, meta = max(rows, key=lambda row: row[0])
        return seq, str(meta.get("hash", ""))

    # Reading ------------------------------------------------------------------------

    def _read(self, collection: Any, *, where: dict[str, Any] | None = None,
              include: tuple[str, ...] = ("documents", "metadatas")) -> dict[str, list]:
        """Every record matching `where`, a page at a time."""
        ids: list[str] = []
        columns: dict[str, list] = {name: [] for name in include}
        offset = 0
        while True:
            page = collection.get(where=where, include=list(include), limit=PAGE_SIZE,
                                  offset=offset)
            ids += page["ids"]
            for name in include:
                columns[name] += page[name]
            if len(page["ids"]) < PAGE_SIZE:
                return {"ids": ids, **columns}
            offset += PAGE_SIZE

    def _records(self, where: dict[str, Any] | None = None
                 ) -> Iterator[tuple[int | None, str, str | None, dict[str, Any] | None]]:
        """(seq, id, text, metadata) of every record matching `where`, in sequence order
        (records whose id is no sequence number last)."""
        collection = self._collection(create=False)
        if collection is None:
            return iter(())
        found = self._read(collection, where=where)
        rows = [(_seq_of(record), record, text, meta) for record, text, meta in
                zip(found["ids"], found["documents"], found["metadatas"], strict=True)]
        return iter(sorted(rows, key=lambda row: (row[0] is None, row[0] or 0, row[1])))

    def entries(self, vendor: str | None = None, user: str | None = None,
                since: datetime | str | None = None) -> list[AuditEntry]:
        """The entries, oldest first: of one vendor, of one user, at or after a time (an
        ISO 8601 date or time, or a datetime; UTC unless it says otherwise)."""
        conditions: list[dict[str, Any]] = []
        if vendor is not None:
            conditions.append({"vendor": vendor})
        if user is not None:
            conditions.append({"user": user})
        if since is not None:
            moment = parse_time(since) if isinstance(since, str) else (
                since if since.tzinfo else since.replace(tzinfo=UTC))
            conditions.append({"at_us": {"$gte": _microseconds(moment)}})
        where = (None if not conditions else conditions[0] if len(conditions) == 1
                 else {"$and": conditions})
        found = []
        for seq, record, text, _meta in self._records(where):
            try:
                found.append(AuditEntry.from_document(text or ""))
            except (ValueError, TypeError):
                shown = f"entry {seq}" if seq is not None else f"the record {record!r}"
                raise StoreError(
                    f"The audit log's {shown} holds no entry it can read; "
                    "`evidence audit --verify` says where the log was changed.") from None
        return found

    def verify(self) -> AuditCheck:
        """Check the whole chain: every entry's hash against what it holds, its metadata
        against it, its `prev` against the entry before, and no sequence number missing."""
        count = 0
        head = ""
        broken: tuple[int | None, str] | None = None
        previous: AuditEntry | None = None
        for seq, record, text, meta in self._records():
            count += 1
            if broken is not None:
                continue
            if seq is None:  # an id that is no number: a record someone else put there
                broken = (None, f"the record {record!r} is not an entry of the log")
                continue
            expected = previous.seq + 1 if previous else 0
            if seq != expected:
                broken = (expected, f"entry {expected} is missing: " + (
                    f"entry {seq} follows entry {expected - 1}" if previous
                    else f"the log starts at entry {seq}"))
                continue
            entry, problem = _read_entry(seq, text, meta)
            if problem is None and entry is not None:
                if previous is None and entry.prev != "":
                    problem = "entry 0 was changed: it names an entry before it"
                elif previous is not None and entry.prev != previous.hash:
                    problem = (f"entry {seq} does not follow entry {previous.seq}: its prev "
                               f"is not entry {previous.seq}'s hash")
            if problem is not None:
                broken = (seq, problem)
                continue
            previous = entry
            head = entry.hash if entry else ""
        if broken is not None:
            return AuditCheck(False, count, head, broken[0], broken[1])
        return AuditCheck(True, count, head)


def _read_entry(seq: int, text: str | None, meta: dict[str, Any] | None
                ) -> tuple[AuditEntry | None, str | None]:
    """The entry a record holds, or why it cannot be trusted."""
    try:
        entry = AuditEntry.from_document(text or "")
    except (ValueError, TypeError):
        return None, f"entry {seq} was changed: its text is not an entry"
    if entry.seq != seq:
        return None, f"entry {seq} was changed: it holds the number {entry.seq}"
    if entry.computed_hash() != entry.hash:
        return None, f"entry {seq} was changed: its hash does not match what it holds"
    held = entry.metadata()
    changed = [key for key in (*_FILTERED, "at_us") if (meta or {}).get(key) != held[key]]
    if changed:
        return None, (f"entry {seq} was changed: its metadata ({', '.join(changed)}) does "
                      "not match what it holds")
    return entry, None
