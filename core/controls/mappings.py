"""Criteria mapped to controls: proposed by the ranking over the catalog, accepted or edited by
a reviewer, kept in the store per criteria list and used for every vendor.

A criterion's controls, when a retrieval asks, are the first of:
1. the controls a criteria file gives it (its `controls` column): accepted;
2. the controls a reviewer accepted for it in any kept list (the most recently decided list
   first; a decision of "no control" is a decision too): accepted;
3. the confident proposals kept for it by `criteria map`, or, where none was kept, the
   confident proposals of the ranking itself: proposed.
Each is expanded through the ISO/IEC 27001:2013 crosswalk, so an answer keyed by an ISO id
links to a criterion mapped to the 800-53 control it maps to, and the other way round."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from core.controls.answers import NIST_PREFIX
from core.controls.crosswalk import iso2013_to_nist, nist_to_iso2013
from core.controls.ids import ControlRef, parse_control_id
from core.controls.proposals import ControlProposer, Proposal
from core.encoders.embedding import Embedder
from core.errors import UserInputError
from core.hashing import canonical_criterion_hash, criterion_hash, short_hash
from core.models import CriterionControl, MappingStatus

ISO2013_PREFIX = "iso27001-2013:"
NIST_FRAMEWORK = "NIST SP 800-53 Rev. 5"
ISO2013_FRAMEWORK = "ISO/IEC 27001:2013"
# --framework names: the catalog proposals are ranked over, and how they are shown.
FRAMEWORKS = {"800-53": NIST_FRAMEWORK, "iso27001-2013": ISO2013_FRAMEWORK}
# Proposals kept and shown per criterion.
PROPOSALS_SHOWN = 5
# Criteria whose confident proposals a process keeps (the oldest asked go first).
CONFIDENT_KEPT = 4096


@dataclass(frozen=True)
class ControlLink:
    """A control a criterion is mapped to, as a retrieval links by it."""

    key: str  # "sp800-53:ac-7"
    framework: str
    id: str
    title: str | None
    status: MappingStatus
    score: float | None = None

    def linked_keys(self) -> tuple[str, ...]:
        """The control keys whose answers answer this control: its own and, through the
        crosswalk, the other framework's."""
        if self.key.startswith(NIST_PREFIX):
            iso = nist_to_iso2013(self.key[len(NIST_PREFIX):])
            return (self.key, *(ISO2013_PREFIX + i.lower() for i in iso))
        if self.key.startswith(ISO2013_PREFIX):
            nist = iso2013_to_nist(self.id)
            return (self.key, *(NIST_PREFIX + k for k in nist))
        return (self.key,)

    def shown(self) -> CriterionControl:
        return CriterionControl(framework=self.framework, id=self.id, title=self.title,
                                score=self.score, status=self.status)

    def stored(self, confident: bool = True) -> dict[str, Any]:
        return {"key": self.key, "framework": self.framework, "id": self.id,
                "title": self.title, "score": self.score, "status": self.status,
                "confident": confident}


def link_from_ref(ref: ControlRef, status: MappingStatus, score: float | None = None
                  ) -> ControlLink:
    return ControlLink(ref.key, ref.framework, ref.id, ref.title, status, score)


def link_from_proposal(proposal: Proposal) -> ControlLink:
    control = proposal.control
    return ControlLink(NIST_PREFIX + control.key, NIST_FRAMEWORK, control.id, control.title,
                       "proposed", proposal.score)


def parse_controls(text: str, where: str) -> tuple[ControlLink, ...]:
    """The accepted controls of a `controls` cell (ids separated by `;`), each a known
    framework's id, or a one-sentence refusal naming the cell."""
    found: list[ControlLink] = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        ref = parse_control_id(part)
        if ref is None:
            raise UserInputError(
                f"{where}: {part!r} is not a control id the workbench knows (NIST SP 800-53 "
                "like AC-7 or AC-2(1), ISO/IEC 27001 like A.9.4.2 or A.5.15, CAIQ v4 like "
                "IAM-02.1).")
        link = link_from_ref(ref, "accepted")
        if all(f.key != link.key for f in found):
            found.append(link)
    return tuple(found)


@dataclass
class CriterionMapping:
    """One criterion of a list with its controls: the accepted ones where a reviewer
    decided, and the ranking's proposals (the confident ones marked)."""

    criterion: str
    canonical_hash: str
    decided: bool = False
    accepted: list[ControlLink] = field(default_factory=list)
    proposals: list[tuple[ControlLink, bool]] = field(default_factory=list)  # (link, confident)

    def in_use(self) -> tuple[ControlLink, ...]:
        """The controls a retrieval links by: the accepted ones once decided, else the
        confident proposals."""
        if self.decided:
            return tuple(self.accepted)
        return tuple(link for link, confident in self.proposals if confident)

    def ordered(self) -> list[ControlLink]:
        """Its controls as `criteria map` lists them: the accepted ones, then the proposals
        not accepted, best first."""
        accepted = {link.key for link in self.accepted}
        return [*self.accepted, *(link for link, _ in self.proposals if link.key not in accepted)]

    def listed(self) -> list[CriterionControl]:
        """What `criteria map` prints for it (see `ordered`)."""
        return [link.shown() for link in self.ordered()]

    def as_line(self) -> dict[str, Any]:
        """The JSON line `criteria map` prints: the criterion, its contract hash, and its
        controls best first (accepted ones first), each marked confident where it links
        until a reviewer decides."""
        confident = {link.key for link, sure in self.proposals if sure}
        return {"criterion": self.criterion, "criterion_hash": criterion_hash(self.criterion),
                "decided": self.decided,
                "controls": [{**link.shown().model_dump(mode="json"),
                              "confident": link.status == "accepted" or link.key in confident}
                             for link in self.ordered()]}

    def as_text(self, width: int = 100) -> str:
        """What `criteria map --format text` prints for it."""
        lines = [self.criterion[: width]]
        if self.decided and not self.accepted:
            lines.append("  decided: no control answers it")
        confident = {link.key for link, sure in self.proposals if sure}
        accepted = {a.key for a in self.accepted}
        for link in self.ordered():
            score = f"{link.score:.2f}" if link.score is not None else "    "
            status = ("accepted" if link.key in accepted else
                      "proposed, linked until decided" if link.key in confident and
                      not self.decided else "proposed")
            title = f" {link.title}" if link.title else ""
            lines.append(f"  {link.id}{title}  {score}  {status}"[: width])
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"criterion": self.criterion, "hash": self.canonical_hash,
                "decided": self.decided, "accepted": [a.stored() for a in self.accepted],
                "proposals": [link.stored(confident) for link, confident in self.proposals]}

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> CriterionMapping:
        def link(data: dict[str, Any]) -> ControlLink:
            return ControlLink(str(data["key"]), str(data["framework"]), str(data["id"]),
                               data.get("title"), data.get("status") or "proposed",
                               data.get("score"))
        return cls(str(item["criterion"]), str(item["hash"]), bool(item.get("decided")),
                   [link(a) for a in item.get("accepted") or ()],
                   [(link(p), bool(p.get("confident"))) for p in item.get("proposals") or ()])


class CriteriaControls:
    """The store's criteria-to-control mappings and the ranking that proposes them; safe to
    share between threads."""

    def __init__(self, store: Any, proposer: ControlProposer) -> None:
        self.store = store
        self.proposer = proposer
        self._lock = threading.Lock()
        # The kept lists as last read, and the (id, when changed) of each record they were
        # read at: a retrieval reads the lists' metadata alone while they are unchanged.
        self._kept: tuple[tuple[tuple[str, str], ...], list[Any]] | None = None
        self._kept_by_criterion: dict[str, CriterionMapping] | None = None
        # (criterion text, its vector) -> the ranking's confident proposals (the catalog and
        # the model are the process's, so one text's ranking never changes in it).
        self._confident: dict[tuple[str, bytes | None], tuple[ControlLink, ...]] = {}

    # Proposals ---------------------------------------------------------------------------

    def propose(self, text: str, embedding: np.ndarray | None = None, *,
                framework: str = "800-53") -> list[tuple[ControlLink, bool]]:
        """The ranking's proposals for a criterion, (control, confident), best first."""
        proposals = self.proposer.propose(text, embedding, top=PROPOSALS_SHOWN)
        links = [(link_from_proposal(p), p.confident) for p in proposals]
        # The enhancements that raised a proposal, after the base controls: their answers
        # answer the criterion as the base control's do (IA-2(1) under IA-2).
        links += [(ControlLink(NIST_PREFIX + p.through.key, NIST_FRAMEWORK, p.through.id,
                               p.through.title, "proposed", p.score), p.confident)
                  for p in proposals if p.through is not None]
        if framework == "800-53":
            return links
        if framework != "iso27001-2013":
            raise UserInputError(
                f"--framework {framework!r} is not one the workbench proposes controls of; "
                f"use one of {', '.join(FRAMEWORKS)}.")
        shown: dict[str, tuple[ControlLink, bool]] = {}
        for link, confident in links:
            for iso in nist_to_iso2013(link.key[len(NIST_PREFIX):]):
                key = ISO2013_PREFIX + iso.lower()
                if key not in shown:
                    shown[key] = (ControlLink(key, ISO2013_FRAMEWORK, iso, None, "proposed",
                                              link.score), confident)
        return list(shown.values())

    # Kept mappings -----------------------------------------------------------------------

    def _records(self, create: bool = False) -> Any | None:
        return self.store.criteria_controls(create=create)

    def kept(self) -> list[tuple[str, str, list[CriterionMapping]]]:
        """Every kept list: (name, when it was last changed, its criteria's mappings), the
        most recently changed first."""
        lists = self._read_kept()
        return [(name, when, [replace(item) for item in items]) for name, when, items in lists]

    def _read_kept(self) -> list[tuple[str, str, list[CriterionMapping]]]:
        """The kept lists as read at their records' last change (read again only then),
        with each criterion's mapping indexed as `kept_for` picks it; not to be changed."""
        records = self._records()
        if records is None:
            with self._lock:
                self._kept, self._kept_by_criterion = None, {}
            return []
        stamp = tuple(sorted((record_id, str(meta.get("updated_at") or ""))
                             for record_id, meta in records.metadata()))
        with self._lock:
            kept = self._kept
        if kept is not None and kept[0] == stamp:
            return kept[1]
        found, read = [], []
        for record_id, text, meta in records.all():
            items = [CriterionMapping.from_json(i) for i in json.loads(text or "[]")]
            found.append((str(meta.get("name") or ""), str(meta.get("updated_at") or ""),
                          items))
            read.append((record_id, str(meta.get("updated_at") or "")))
        found.sort(key=lambda f: f[1], reverse=True)
        by_criterion: dict[str, CriterionMapping] = {}
        for _name, _when, items in found:
            for item in items:
                held = by_criterion.get(item.canonical_hash)
                if held is None or (item.decided and not held.decided):
                    by_criterion[item.canonical_hash] = item
        with self._lock:
            self._kept, self._kept_by_criterion = (tuple(sorted(read)), found), by_criterion
        return found

    def keep(self, name: str, mappings: Sequence[CriterionMapping]) -> None:
        """Keep a list's mappings in the store (replacing the list's earlier ones)."""
        with self._lock:
            records = self._records(create=True)
            records.upsert("controls-" + short_hash(name),
                           json.dumps([m.to_json() for m in mappings]),
                           {"name": name, "updated_at": datetime.now(UTC).isoformat(
                               timespec="microseconds"),
                            "catalog": self.proposer.catalog.version})

    def kept_for(self, canonical_hash: str) -> CriterionMapping | None:
        """The criterion's mapping in the kept lists: a decided one first (the most
        recently changed list's), else the most recently changed list's proposals."""
        self._read_kept()
        with self._lock:
            found = (self._kept_by_criterion or {}).get(canonical_hash)
        return replace(found) if found is not None else None

    def mapping(self, text: str, embedding: np.ndarray | None = None, *,
                given: Sequence[ControlLink] | None = None, framework: str = "800-53"
                ) -> CriterionMapping:
        """A criterion's mapping now: a kept decision, or the criterion file's controls, and
        fresh proposals."""
        canonical = canonical_criterion_hash(text)
        kept = self.kept_for(canonical)
        mapping = CriterionMapping(text, canonical)
        if given is not None:
            mapping.decided, mapping.accepted = True, list(given)
        elif kept is not None and kept.decided:
            mapping.decided, mapping.accepted = True, list(kept.accepted)
        mapping.proposals = self.propose(text, embedding, framework=framework)
        return mapping

    def map_list(self, name: str, entries: Sequence[Any], *, framework: str = "800-53",
                 accept: bool = False) -> list[CriterionMapping]:
        """Every criterion of a list mapped: the controls its `controls` cell gives are
        accepted; with `accept`, the confident proposals of the others are; the rest keep a
        kept decision or stay proposed. The list's mappings are kept in the store (the
        proposals too, so retrievals link by the confident ones without ranking again)."""
        texts = [entry.text for entry in entries]
        vectors = self.proposer.embed(texts)
        mappings = []
        for entry, vector in zip(entries, vectors, strict=True):
            given = (list(parse_controls(";".join(entry.controls), entry.text[:60]))
                     if entry.controls_given else None)
            mapping = self.mapping(entry.text, vector, given=given, framework=framework)
            if accept and given is None and not mapping.decided:
                mapping.decided = True
                mapping.accepted = [replace(link, status="accepted")
                                    for link, sure in mapping.proposals if sure]
            mappings.append(mapping)
        self.keep(name, mappings)
        return mappings

    def decide(self, name: str, decisions: dict[str, Sequence[ControlLink]]
               ) -> list[CriterionMapping]:
        """A reviewer's decisions on a kept list: criterion (canonical hash) -> the controls
        accepted for it (none: no control answers it). The others stay as they were."""
        items = next((found for kept_name, _when, found in self.kept() if kept_name == name),
                     None)
        if items is None:
            raise UserInputError(f"No criteria list named {name!r} is mapped yet; map it "
                                 "first.")
        for item in items:
            if item.canonical_hash in decisions:
                item.decided = True
                item.accepted = [replace(link, status="accepted")
                                 for link in decisions[item.canonical_hash]]
        self.keep(name, items)
        return items

    def state(self) -> str:
        """When any list's mappings last changed ("" while none is kept): a view of a
        retrieval is stale once it changes."""
        records = self._records()
        if records is None:
            return ""
        return max((str(meta.get("updated_at") or "") for _i, _t, meta in records.all()),
                   default="")

    # What a retrieval links by -----------------------------------------------------------

    def for_query(self, text: str, embedding: np.ndarray | None,
                  given: Sequence[str] = (), proposable: bool = True
                  ) -> tuple[ControlLink, ...]:
        """The controls a retrieval links the criterion's answers by (see the module); the
        catalog is ranked only where `proposable` says answers keyed by its controls (or
        through its crosswalk) are there to link."""
        if given:
            return parse_controls(";".join(given), "the criterion's controls")
        kept = self.kept_for(canonical_criterion_hash(text))
        if kept is not None:
            return kept.in_use()
        if not proposable:
            return ()
        key = (text, None if embedding is None else np.asarray(embedding).tobytes())
        with self._lock:
            found = self._confident.get(key)
        if found is None:
            found = tuple(link for link, confident in self.propose(text, embedding) if confident)
            with self._lock:
                self._confident[key] = found
                while len(self._confident) > CONFIDENT_KEPT:
                    self._confident.pop(next(iter(self._confident)))
        return found



def criteria_controls(settings: Any, store: Any, embedder: Callable[[], Embedder],
                      runner: Any) -> CriteriaControls:
    """The store's mappings with the ranking over the shipped catalog, given to the runner
    so that every retrieval links by them."""
    controls = CriteriaControls(store, ControlProposer(embedder, settings.controls_cache_dir))
    runner.criterion_controls = lambda query, proposable: controls.for_query(
        query.linked_text, query.embedding, query.control_ids, proposable)
    return controls
