"""Which criterion each stored follow-up answers: read from the link records of the vendor's
manifest, kept per vendor until the manifest generation changes."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from core.controls.answers import answer_control
from core.retrieval.source import RecordReader, StoredChunk
from core.store import (
    WITHDRAWN_KEY,
    FollowupLink,
    VendorStore,
    followup_link,
    record_fingerprint,
)

# follow-up id -> what it answers (see `core.store.FollowupLink`).
Links = dict[str, FollowupLink]


class AnswerIndex:
    """Which stored answers answer one criterion: those whose criterion has its canonical
    hash (so the same criterion hash, whatever the typography), and those with one of its
    questionnaire ids. Ad-hoc answers (no criterion, no id) answer no criterion."""

    def __init__(self, links: Mapping[str, FollowupLink]) -> None:
        self.links = links
        self._by_canonical: dict[str, list[str]] = defaultdict(list)
        self._by_id: dict[str, list[str]] = defaultdict(list)
        self._by_control: dict[str, list[str]] = defaultdict(list)
        self.control_of: dict[str, str] = {}  # follow-up id -> its control key
        for followup_id, link in links.items():
            if link.round_number is None:
                continue
            if link.canonical_hash:
                self._by_canonical[link.canonical_hash].append(followup_id)
            if link.questionnaire_id:
                self._by_id[link.questionnaire_id].append(followup_id)
            control = link.control_key or _control_key(link.questionnaire_id)
            if control:
                self.control_of[followup_id] = control
                self._by_control[control].append(followup_id)

    @property
    def has_controls(self) -> bool:
        """Whether any stored answer is keyed by a known framework's control."""
        return bool(self._by_control)

    @property
    def proposable(self) -> bool:
        """Whether any stored answer is keyed by a control the catalog's proposals can reach
        (NIST SP 800-53, or ISO/IEC 27001:2013 through NIST's mapping)."""
        return any(key.startswith(PROPOSABLE) for key in self._by_control)

    def keyed_by(self, control_key: str) -> list[str]:
        """The answers keyed by this control (any part of it), in any round or sheet."""
        return list(self._by_control.get(control_key, ()))

    def same_control(self, followup_id: str) -> list[str]:
        """The answers keyed by the same control as this one (none for an answer of no
        known control)."""
        control = self.control_of.get(followup_id)
        return self.keyed_by(control) if control else []

    def answering(self, canonical_hash: str | None, questionnaire_ids: Collection[str] = ()
                  ) -> list[str]:
        """The answers to a criterion of this canonical hash or mapped to these ids."""
        found = list(self._by_canonical.get(canonical_hash, ())) if canonical_hash else []
        for questionnaire_id in questionnaire_ids:
            found += [i for i in self._by_id.get(questionnaire_id, ()) if i not in found]
        return found

    def round_of(self, followup_id: str) -> int | None:
        link = self.links.get(followup_id)
        return link.round_number if link is not None else None


# The control keys a proposal over the 800-53 catalog may link to.
PROPOSABLE = ("sp800-53:", "iso27001-2013:")


def _control_key(questionnaire_id: str | None) -> str | None:
    """The control key of a link written before answers knew their control."""
    ref = answer_control(questionnaire_id)
    return ref.key if ref is not None else None


@dataclass(frozen=True)
class LinkSet:
    """Every link the manifest holds at one generation: what each follow-up answers, and the
    fingerprint of the response as its round wrote it (see `core.store.record_fingerprint`).
    A link may name a response that is not written yet; readers fetch responses by id.

    `withdrawn`: the follow-ups whose link is the tombstone of a replaced round's withdrawn
    answer. They stay in `links` (until the round's responses' write turns the record into a
    marker, which no reader shows, the answer is as it was), never in `fingerprints`, so no
    reader keeps their record."""

    links: Links = field(default_factory=dict)
    fingerprints: dict[str, str] = field(default_factory=dict)
    withdrawn: frozenset[str] = frozenset()

    @cached_property
    def answers(self) -> AnswerIndex:
        """The answers of each criterion, indexed once per generation."""
        return AnswerIndex(self.links)

    def indexed_as(self) -> dict[str, str | None]:
        """Follow-up id -> the fingerprint the lexical index must hold for it at this
        generation; None for a withdrawn answer, which it must not hold at all."""
        return {**self.fingerprints, **dict.fromkeys(self.withdrawn)}


class FollowupLinks:
    """The links of each vendor, safe to share between threads.

    Every write of links renews the manifest generation in the same write, so the links read
    at a generation hold until the generation changes: a retrieval on an unchanged store
    reads no link data at all, and none ever lists the chunk collection."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[str, tuple[str, LinkSet]] = {}

    def read(self, vendor: VendorStore, generation: str | None) -> LinkSet:
        """The vendor's links at `generation` (the one the caller read; None for a store
        that records none, which is then read every time)."""
        if generation is not None:
            with self._lock:
                cached = self._known.get(vendor.vendor_id)
            if cached is not None and cached[0] == generation:
                return cached[1]
        found = vendor.links()
        withdrawn = frozenset(i for i, meta in found.items() if meta.get(WITHDRAWN_KEY))
        links = LinkSet(
            links={i: followup_link(meta) for i, meta in found.items()},
            fingerprints={i: str(meta.get("fingerprint") or "") for i, meta in found.items()
                          if i not in withdrawn},
            withdrawn=withdrawn)
        # Read after the caller read `generation`, so never older than it: a newer write
        # changed the generation too, and the caller's run is repeated on the new one.
        if generation is not None:
            with self._lock:
                self._known[vendor.vendor_id] = (generation, links)
        return links


class LinkedResponses:
    """The records (with their vectors) of linked follow-ups, kept per id for as long as the
    record is the one its link fingerprints, safe to share between threads.

    A response's fingerprint covers its text and every metadata key, so a kept record that
    matches the link at the caller's generation is the record the store holds: a round sent
    again renews its links (new fingerprints) before its responses, and a record read before
    those land does not match, so it is returned but not kept. Records are returned in the
    order asked for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, str], tuple[str, StoredChunk]] = {}

    def fetch(self, vendor_id: str, records: RecordReader, ids: Sequence[str],
              fingerprints: Mapping[str, str]) -> list[StoredChunk]:
        """The records of these ids that exist, each with its vector."""
        found = self._kept_as(vendor_id, ids, fingerprints)
        missing = [i for i in ids if i not in found]
        if missing:
            found.update(self._read(vendor_id, records, missing, fingerprints))
        return [found[i] for i in ids if i in found]

    def warm(self, vendor_id: str, records: RecordReader,
             fingerprints: Mapping[str, str]) -> None:
        """Read, in one go, every linked record not kept as its link fingerprints it (all of
        them the first time, then only a new round's or a changed one's)."""
        ids = list(fingerprints)
        kept = self._kept_as(vendor_id, ids, fingerprints)
        missing = [i for i in ids if i not in kept]
        if missing:
            self._read(vendor_id, records, missing, fingerprints)

    def holds(self, vendor_id: str, fingerprints: Mapping[str, str]) -> bool:
        """Whether every record is kept as its link fingerprints it (all of them landed)."""
        return len(self._kept_as(vendor_id, list(fingerprints), fingerprints)) == len(
            fingerprints)

    def _kept_as(self, vendor_id: str, ids: Sequence[str], fingerprints: Mapping[str, str]
                 ) -> dict[str, StoredChunk]:
        found: dict[str, StoredChunk] = {}
        with self._lock:
            for record_id in ids:
                kept = self._kept.get((vendor_id, record_id))
                if kept is not None and kept[0] == fingerprints.get(record_id):
                    found[record_id] = kept[1]
        return found

    def _read(self, vendor_id: str, records: RecordReader, ids: Sequence[str],
              fingerprints: Mapping[str, str]) -> dict[str, StoredChunk]:
        """The records of these ids from the store; those matching their link are kept."""
        found = {}
        for chunk in records.by_ids(ids, embeddings=True):
            found[chunk.id] = chunk
            fingerprint = fingerprints.get(chunk.id)
            if fingerprint and record_fingerprint(chunk.text, chunk.metadata) == fingerprint:
                with self._lock:
                    self._kept[(vendor_id, chunk.id)] = (fingerprint, chunk)
        return found
