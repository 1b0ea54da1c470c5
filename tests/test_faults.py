"""Faults injected into ingests: each document and each round ends as it was or complete.

CONTRACT.md: an ingest killed at any moment never leaves a half-written document or round
behind, and running the same ingest again completes the rest. Three kinds of fault are
injected: the embedder failing halfway; ChromaDB raising at each of an ingest's writes, just
before or just after the write reached the store; and a real subprocess killed with SIGKILL
just before each write (and just after the last), at an arbitrary moment of a running
`evidence ingest docs`, and at arbitrary moments inside one large ChromaDB write call.

After every fault the store is opened fresh and compared, document by document and round by
round, with the state before the ingest and the complete state after it; status must count
exactly that mix, and every strategy must retrieve from it without a chunk of an unfinished
version and without losing a committed one. Then the same ingest runs again and the store
must equal the complete state exactly.

Write points are the ChromaDB calls that change the store: chunk upsert batches, manifest
upserts, deletes of stale chunks (and of a replaced round's withdrawn answers and their
links), and the creation of a new vendor's two collections."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.config import Settings
from core.hashing import criterion_hash
from core.ingest.writer import document_key
from core.models import FOLLOWUP_SOURCE_TYPE, followup_type
from core.store import (
    KIND_KEY,
    LINK_KIND,
    WITHDRAWN_SOURCE_TYPE,
    EvidenceStore,
    record_fingerprint,
    writes,
)
from core.store.registry import REGISTRY_COLLECTION
from core.store.scoping import SUFFIX
from core.workbench import Workbench
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support import payloads, warm
from tests.support.store import get_all, read_links, read_manifest, with_texts

REPO = Path(__file__).resolve().parents[1]
BATCH = 25  # ChromaDB's own limit is 5461; a small one splits each document into batches
KEY_CRITERION = "Does the vendor rotate encryption keys?"
OTHER_CRITERION = "Is access to production reviewed quarterly?"
STRATEGY_WINDOWS = {  # strategy -> the first-stage window its trace reports
    "semantic": "semantic_first_stage_n",
    "hash_extraction": "top_first_stage_n",
    "doc_boost": "semantic_first_stage_n",
    "tiered": "semantic_path_top_k",
    "precedence": "top_first_stage_n",
}


# Inputs --------------------------------------------------------------------------------------

def document_text(topic: str, sections: int, salt: str, *, filler: int = 60,
                  emphasis: int = 0) -> str:
    """One chunk per section (each 560-830 characters, two never fit in one chunk), each with
    its own mix of query words, so every chunk has its own similarity to KEY_CRITERION."""
    parts = []
    for p in range(sections):
        head = " ".join([topic] * (1 + p % 11) + ["keys"] * (1 + p % 7) + ["rotate"] * emphasis)
        words = " ".join(f"{salt}{p}w{j}" for j in range(filler))
        parts.append(f"Section {p}. {head}. {words}.")
    return "\n\n".join(parts) + "\n"


POLICY_SECTIONS, ACCESS_SECTIONS, BADGE_SECTIONS, EXTRA_SECTIONS = 60, 30, 10, 30


def key_round(vendor_id: str, round_number: int, responses: int, answer: str) -> dict:
    """A round of `responses` answers on key handling, each `answer` numbered; the first two
    linked to KEY_CRITERION and OTHER_CRITERION."""
    return payloads.round_payload(round_number, payloads.numbered(
        responses, "Question {i}: how are encryption keys handled?",
        "{answer} (response {i}, round {round}).",
        criterion={0: KEY_CRITERION, 1: OTHER_CRITERION}, answer=answer, round=round_number),
        vendor=vendor_id)  # rounds 1 to 3: the timestamp of month N


def write_inputs(root: Path) -> None:
    def put(name: str, text: str) -> None:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    policy_v1 = document_text("encryption", POLICY_SECTIONS, "old")
    policy_v2 = document_text("encryption", POLICY_SECTIONS, "new", filler=61)
    access = document_text("access", ACCESS_SECTIONS, "acc", filler=62)
    badges = document_text("badge", BADGE_SECTIONS, "bdg", filler=64)
    put("docs_v1/policy.md", policy_v1)
    put("docs_v1/badges.txt", badges)
    for folder in ("docs_v2", "docs_cli"):
        put(f"{folder}/policy.md", policy_v2)
        put(f"{folder}/badges.txt", badges)
        put(f"{folder}/access.md", access)
    for n in range(8):
        put(f"docs_cli/extra_{n}.md",
            document_text("encryption", EXTRA_SECTIONS, f"x{n}y", filler=65 + n))
    put("docs_big/policy.md",
        document_text("encryption", 120, "big", filler=63, emphasis=3))
    rounds = {
        "acme_round_1.json": key_round("acme", 1, 6, "Keys rotate yearly"),
        "acme_round_2.json": key_round("acme", 2, 6, "Keys rotate every six months"),
        "acme_round_2_resent.json": key_round("acme", 2, 7, "Keys rotate every 90 days"),
        "acme_round_3.json": key_round("acme", 3, 5, "Keys rotate monthly"),
        "northwind_round_1.json": key_round("northwind", 1, 6, "Keys rotate weekly"),
    }
    for name, payload in rounds.items():
        put(f"rounds/{name}", json.dumps(payload))
    for number, payload in enumerate(replaced_round_2(), start=1):
        put(f"rounds/acme_round_2_replaced_{number}.json", json.dumps(payload))
    put("rounds/acme_round_2_withdrawn.json",
        json.dumps({**ROUND_2, "responses": ROUND_2["responses"][1:3]}))


# Round 2 replaced (`--replace`). "round_replace": by two files, response 1 as it was,
# response 2 with a new answer, and a new response 7 linked to KEY_CRITERION.
# "round_withdraw": by one file holding responses 1 and 2 as they were, nothing new. Both
# withdraw responses 0 (linked to KEY_CRITERION), 3, 4 and 5.
ROUND_2 = key_round("acme", 2, 6, "Keys rotate every six months")
NEW_ANSWER_2 = "Keys rotate every 45 days (response 2, round 2)."
NEW_ANSWER_7 = "Keys rotate every 30 days, approved by the CISO (response 7, round 2)."
WITHDRAWN_ANSWERS = tuple(ROUND_2["responses"][i]["answer_text"] for i in (0, 3, 4, 5))


def replaced_round_2() -> tuple[dict, dict]:
    kept = ROUND_2["responses"][1]
    changed = {**ROUND_2["responses"][2], "answer_text": NEW_ANSWER_2}
    added = payloads.response("Question 7: who approves a key rotation?", NEW_ANSWER_7,
                              KEY_CRITERION)
    return {**ROUND_2, "responses": [kept, changed]}, {**ROUND_2, "responses": [added]}


@dataclass(frozen=True)
class Replacement:
    """What a replacement of round 2 stores and what it takes away."""

    indexed: int  # responses the round holds once replaced
    new: frozenset[str]  # answers added or changed
    gone: frozenset[str]  # answers withdrawn, and the old text of those changed
    kept: str  # an answer the round holds before and after


REPLACEMENTS = {
    "round_replace": Replacement(
        3, frozenset({NEW_ANSWER_2, NEW_ANSWER_7}),
        frozenset({*WITHDRAWN_ANSWERS, ROUND_2["responses"][2]["answer_text"]}),
        ROUND_2["responses"][1]["answer_text"]),
    "round_withdraw": Replacement(2, frozenset(), frozenset(WITHDRAWN_ANSWERS),
                                  ROUND_2["responses"][1]["answer_text"]),
}


def document_writes(*documents: tuple[str, int], replaced: dict[str, int] | None = None
                    ) -> list[str]:
    """A documents ingest: the chunks in steps of BATCH (a step may hold the end of one
    document and the start of the next), and each document's manifest entry and the delete of
    its older version as soon as the step holding its last chunk is written. A document in
    `replaced` (source -> the chunks of the version it replaces) first copies that version's
    chunks under its archive's key, in batches of BATCH, to keep it as superseded."""
    writes: list[str] = []
    step: list[str] = []  # the source of each chunk in the step
    finished: list[str] = []

    def write_step() -> None:
        writes.append(f"upsert chunks {'+'.join(dict.fromkeys(step))} ({len(step)})")
        for source in finished:
            old = (replaced or {}).get(source, 0)
            writes.extend(f"upsert chunks {source} ({min(BATCH, old - at)})"
                          for at in range(0, old, BATCH))
            writes.extend([f"upsert manifest {source}", f"delete chunks {source}"])
        step.clear()
        finished.clear()

    for source, chunks in documents:
        for index in range(1, chunks + 1):
            step.append(source)
            if index == chunks:
                finished.append(source)
            if len(step) == BATCH:
                write_step()
    if step:
        write_step()
    return writes


def round_writes(round_number: int, responses: int) -> list[str]:
    """A round: its links with a new generation, then its responses in one write."""
    return [f"upsert manifest links round {round_number} ({responses})",
            f"upsert chunks round {round_number} ({responses})"]


def replace_writes(round_number: int, links: int, responses: int, withdrawn: int) -> list[str]:
    """A replaced round: its changed links and the withdrawn answers' tombstones with a new
    generation; its changed responses and the withdrawn answers' markers in one write; then
    the markers deleted, then the tombstones."""
    return [f"upsert manifest links round {round_number} ({links + withdrawn})",
            f"upsert chunks round {round_number} ({responses + withdrawn})",
            f"delete withdrawn answers ({withdrawn})", f"delete withdrawn links ({withdrawn})"]


NEW_VENDOR = ["create chunks collection", "create manifest collection"]


def registered(vendor_id: str, *writes: str) -> tuple[str, ...]:
    """An ingest's writes as the store makes them: the vendor marked pending in the store's
    register of vendors before the first, its counts recorded there after the last."""
    return (f"register {vendor_id} pending", *writes, f"register {vendor_id}")


@dataclass(frozen=True)
class Scenario:
    """One ingest, run the way the CLI runs it, and the write points it makes, in order."""

    name: str
    kind: str  # docs | rounds | replace (the rounds' files as one round, --replace)
    vendor_id: str
    inputs: tuple[str, ...]
    writes: tuple[str, ...]


SCENARIOS = {s.name: s for s in (
    # replaces policy.md, adds access.md, finds badges.txt unchanged (and tidies it up)
    Scenario("docs", "docs", "acme", ("docs_v2",), registered(
        "acme",
        *document_writes(("access.md", ACCESS_SECTIONS), ("policy.md", POLICY_SECTIONS),
                         replaced={"policy.md": POLICY_SECTIONS}),
        "delete chunks badges.txt",
    )),
    Scenario("docs_new_vendor", "docs", "northwind", ("docs_v2/access.md",), registered(
        "northwind", *NEW_VENDOR, *document_writes(("access.md", ACCESS_SECTIONS)),
    )),
    # round 2 sent again with changed answers and one more response, then a new round 3
    Scenario("rounds", "rounds", "acme",
             ("rounds/acme_round_2_resent.json", "rounds/acme_round_3.json"),
             registered("acme", *round_writes(2, 7)) + registered("acme", *round_writes(3, 5))),
    Scenario("round_new_vendor", "rounds", "northwind", ("rounds/northwind_round_1.json",),
             registered("northwind", *NEW_VENDOR, *round_writes(1, 6))),
    # what the killed `evidence ingest docs` runs: "docs" with eight more new documents
    Scenario("docs_cli", "docs", "acme", ("docs_cli",), registered(
        "acme",
        *document_writes(("access.md", ACCESS_SECTIONS),
                         *((f"extra_{n}.md", EXTRA_SECTIONS) for n in range(8)),
                         ("policy.md", POLICY_SECTIONS), replaced={"policy.md": POLICY_SECTIONS}),
        "delete chunks badges.txt",
    )),
    # policy.md replaced by a much longer version, closer to KEY_CRITERION
    Scenario("docs_big", "docs", "acme", ("docs_big",),
             registered("acme", *document_writes(("policy.md", 120),
                                                 replaced={"policy.md": POLICY_SECTIONS}))),
    # round 2 replaced by two files: 1 response kept as it is (not written again), 1
    # changed, 1 added, 4 withdrawn
    Scenario("round_replace", "replace", "acme",
             ("rounds/acme_round_2_replaced_1.json", "rounds/acme_round_2_replaced_2.json"),
             registered("acme", *replace_writes(2, links=2, responses=2, withdrawn=4))),
    # round 2 replaced by 2 of its responses, unchanged: only the 4 others withdrawn
    Scenario("round_withdraw", "replace", "acme", ("rounds/acme_round_2_withdrawn.json",),
             registered("acme", *replace_writes(2, links=0, responses=0, withdrawn=4))),
)}
SOURCES = ("policy.md", "access.md", "badges.txt", *(f"extra_{n}.md" for n in range(8)))
DOC_NAMES = {document_key(source, "tc_files", None): source for source in SOURCES}


def run_ingest(workbench: Workbench, scenario: Scenario, inputs: Path) -> list[dict]:
    """The ingest as `evidence ingest docs|questionnaire` runs it."""
    paths = [inputs / name for name in scenario.inputs]
    if scenario.kind == "docs":
        return [workbench.ingest_documents(scenario.vendor_id, paths).model_dump()]
    if scenario.kind == "replace":
        return [report.model_dump() for report in workbench.ingest_questionnaires(
            workbench.load_questionnaires(paths), replace=True)]
    return [workbench.ingest_questionnaire(payload).model_dump()
            for payload in workbench.load_questionnaires(paths)]


def settings_at(store: Path, **overrides: Any) -> Settings:
    return Settings(store=store, reranker_cache_dir=store.parent / "flashrank-cache", **overrides)


def workbench_at(store: Path, **overrides: Any) -> Workbench:
    return Workbench(settings_at(store, **overrides), embedder=FakeEmbedder(),
                     reranker=FakeReranker())


# Faults at ChromaDB's writes ---------------------------------------------------------------

class InjectedFault(RuntimeError):
    """ChromaDB failing at a write, as injected by a test."""


class WriteFaults:
    """Wraps the store's writes (`core.store.writes`, one ChromaDB write each) to label each
    one, in order, and to fail at write number `at`:
    raise InjectedFault, or SIGKILL the whole process, just before or just after the real
    write. Only while armed; reading the store afterwards goes through untouched."""

    def __init__(self, *, at: int | None = None, when: str = "before", action: str = "raise",
                 announce: bool = False) -> None:
        self.at, self.when, self.action, self.announce = at, when, action, announce
        self.writes: list[str] = []
        self.armed = False

    @contextmanager
    def arm(self) -> Iterator[WriteFaults]:
        self.armed = True
        try:
            yield self
        finally:
            self.armed = False

    def install(self, patch: Callable[[Any, str, Any], None]) -> None:
        real_apply, real_create = writes.apply, writes.create
        counted = {
            "upsert": self._wrap(real_apply, lambda c, _, **kw: _upsert_label(c, **kw)),
            "delete": self._wrap(real_apply, lambda c, _, **kw: _delete_label(c, **kw)),
        }

        def apply(collection: Any, operation: str, **arguments: Any) -> Any:
            write = counted.get(operation)
            if write is None:
                return real_apply(collection, operation, **arguments)
            return write(collection, operation, **arguments)

        wrapped_create = self._wrap(real_create, _create_label)

        def create(client: Any, name: str, **kwargs: Any) -> Any:
            existing = {c if isinstance(c, str) else c.name for c in client.list_collections()}
            if name in existing:
                return real_create(client, name, **kwargs)  # opening is not a write
            return wrapped_create(client, name, **kwargs)

        patch(writes, "apply", apply)
        patch(writes, "create", create)

    def _wrap(self, real: Callable[..., Any], label: Callable[..., str]) -> Callable[..., Any]:
        def write(target: Any, *args: Any, **kwargs: Any) -> Any:
            if not self.armed:
                return real(target, *args, **kwargs)
            self.writes.append(label(target, *args, **kwargs))
            number = len(self.writes)
            if self.announce:
                print(f"write {number}: {self.writes[-1]}", file=sys.stderr, flush=True)
            if number == self.at and self.when == "before":
                self._fail(number)
            result = real(target, *args, **kwargs)
            if number == self.at and self.when == "after":
                self._fail(number)
            return result

        return write

    def _fail(self, number: int) -> None:
        message = f"fault {self.when} write {number}: {self.writes[-1]}"
        if self.action == "kill":
            print(message, file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        raise InjectedFault(message)


def _upsert_label(collection: Any, *, ids: list[str], metadatas: list[dict], **_: Any) -> str:
    first = metadatas[0]
    if collection.name == REGISTRY_COLLECTION:
        return f"register {'+'.join(ids)}" + (" pending" if first.get("pending") else "")
    if collection.name.endswith("__manifest"):
        if first.get(KIND_KEY) == LINK_KIND:  # the links, then the generation record
            return f"upsert manifest links round {first['round_number']} ({len(ids) - 1})"
        return f"upsert manifest {first.get('source', 'generation')}"
    what = (f"round {first['round_number']}"
            if first["source_type"] in (FOLLOWUP_SOURCE_TYPE, WITHDRAWN_SOURCE_TYPE)
            else "+".join(dict.fromkeys(m["source"] for m in metadatas)))
    return f"upsert chunks {what} ({len(ids)})"


def _delete_label(collection: Any, *, where: dict[str, Any],
                  ids: list[str] | None = None, **_: Any) -> str:
    if ids is not None:  # a replaced round's withdrawn answers, or their links
        what = "links" if collection.name.endswith("__manifest") else "answers"
        return f"delete withdrawn {what} ({len(ids)})"
    doc_key = next(str(value).rsplit(":", 1)[-1] if key.endswith(SUFFIX) else value
                   for part in where["$and"] for key, value in part.items()
                   if key.removesuffix(SUFFIX) == "doc_key")
    return f"delete chunks {DOC_NAMES.get(doc_key, doc_key)}"


def _create_label(client: Any, name: str, **_: Any) -> str:
    return f"create {name.rsplit('__', 1)[-1]} collection"


@contextmanager
def injected(faults: WriteFaults) -> Iterator[WriteFaults]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(EvidenceStore, "max_batch_size", lambda self: BATCH)
        faults.install(patch.setattr)
        with faults.arm():
            yield faults


# What a reader of the store can observe ------------------------------------------------------

@dataclass(frozen=True)
class Document:
    source: str
    type: str
    version: str
    chunks: tuple[tuple[str, str], ...]  # (id, text) in chunk order
    archived: bool = False  # a file's earlier version, kept as superseded


@dataclass(frozen=True)
class StoreView:
    """Per vendor: committed documents with the chunks their version has in the store,
    rounds with their responses (id, text, criterion hash, fingerprint), chunks no manifest
    entry accounts for, status, and the manifest's link records (follow-up id -> round,
    criterion hash, fingerprint)."""

    documents: dict[str, dict[str, Document]]
    rounds: dict[str, dict[int, tuple[tuple[str, str, str, str], ...]]]
    uncommitted: dict[str, frozenset[str]]
    status: dict[str, dict[str, Any]]
    links: dict[str, dict[str, tuple[int, str, str]]]

    def committed_ids(self, vendor_id: str) -> set[str]:
        ids = {i for doc in self.documents.get(vendor_id, {}).values() for i, _ in doc.chunks}
        return ids | {r[0] for rows in self.rounds.get(vendor_id, {}).values() for r in rows}

    def linked_ids(self, vendor_id: str, criterion: str) -> set[str]:
        return {r[0] for rows in self.rounds.get(vendor_id, {}).values() for r in rows
                if r[2] == criterion_hash(criterion)}


def observe(store: Path) -> StoreView:
    workbench = workbench_at(store)
    documents, rounds, uncommitted, links = {}, {}, {}, {}
    for vendor_id in workbench.vendor_ids():
        vendor = workbench.store.open_vendor(vendor_id)
        manifest = read_manifest(vendor)
        links[vendor_id] = {
            i: (int(m["round_number"]), str(m.get("criterion_question_hash", "")),
                m["fingerprint"]) for i, m in read_links(vendor).items()}
        records = with_texts(get_all(vendor.chunks, include=("documents", "metadatas")))
        by_version: dict[tuple[str, str], list[tuple[int, str, str]]] = {}
        by_round: dict[int, list[tuple[str, str, str, str]]] = {}
        withdrawn: set[str] = set()  # markers a replaced round has not deleted yet
        for record_id, text, meta in zip(records["ids"], records["documents"],
                                         records["metadatas"], strict=True):
            if meta["source_type"] == WITHDRAWN_SOURCE_TYPE:
                assert text == "" and "answer_text" not in meta, record_id
                withdrawn.add(record_id)
            elif meta["source_type"] == FOLLOWUP_SOURCE_TYPE:
                by_round.setdefault(int(meta["round_number"]), []).append(
                    (record_id, text, str(meta.get("criterion_question_hash", "")),
                     record_fingerprint(text, meta)))
            else:
                by_version.setdefault((meta["doc_key"], meta["doc_sha"]), []).append(
                    (int(meta["chunk_index"]), record_id, text))
        documents[vendor_id] = {}
        for doc_key, meta in manifest.items():
            rows = sorted(by_version.pop((doc_key, meta["version"]), []))
            documents[vendor_id][doc_key] = Document(
                source=meta["source"], type=meta["type"], version=meta["version"],
                chunks=tuple((record_id, text) for _, record_id, text in rows),
                archived=bool(meta.get("archived_of")))
            assert meta["chunks"] == len(rows), (
                f"{meta['source']}: the manifest counts {meta['chunks']} chunks of version "
                f"{meta['version']}, the store holds {len(rows)}")
        rounds[vendor_id] = {n: tuple(sorted(rows)) for n, rows in by_round.items()}
        uncommitted[vendor_id] = frozenset(
            {r for rows in by_version.values() for _, r, _ in rows} | withdrawn)
    status = {s.vendor_id: s.model_dump() for s in workbench.status()}
    return StoreView(documents=documents, rounds=rounds, uncommitted=uncommitted, status=status,
                     links=links)


def expected_status(vendor_id: str, documents: list[Document],
                    rounds: dict[int, tuple]) -> dict[str, Any]:
    by_type: Counter[str] = Counter()
    current = [doc for doc in documents if not doc.archived]
    for doc in current:
        by_type[doc.type] += len(doc.chunks)
    for number, rows in rounds.items():
        by_type[followup_type(number)] += len(rows)
    return {
        "vendor_id": vendor_id, "documents": len(current),
        "chunks": sum(len(d.chunks) for d in current),
        "earlier_versions": len(documents) - len(current),
        "followup_responses": sum(len(rows) for rows in rounds.values()),
        "rounds": sorted(n for n, rows in rounds.items() if rows),
        "by_type": dict(sorted((t, n) for t, n in by_type.items() if n)),
    }


def assert_old_or_new(now: StoreView, before: StoreView, after: StoreView) -> None:
    """Each document and each round as before the ingest or as after it, complete; status
    counting exactly that, and the leftovers of the unfinished part as incomplete_chunks."""
    vendors = set(before.status) | set(after.status) | set(now.status)
    for vendor_id in sorted(vendors):
        kept_documents: list[Document] = []
        old_docs, new_docs = before.documents.get(vendor_id, {}), after.documents.get(vendor_id, {})
        now_docs = now.documents.get(vendor_id, {})
        for doc_key in sorted(set(old_docs) | set(new_docs) | set(now_docs)):
            got = now_docs.get(doc_key)
            assert got in (old_docs.get(doc_key), new_docs.get(doc_key)), (
                f"{vendor_id}/{DOC_NAMES.get(doc_key, doc_key)} is neither as it was nor "
                "complete")
            if got is not None:
                kept_documents.append(got)
        kept_rounds = {}
        old_rounds, new_rounds = before.rounds.get(vendor_id, {}), after.rounds.get(vendor_id, {})
        now_rounds = now.rounds.get(vendor_id, {})
        for number in sorted(set(old_rounds) | set(new_rounds) | set(now_rounds)):
            got_round = now_rounds.get(number, ())
            assert got_round in (old_rounds.get(number, ()), new_rounds.get(number, ())), (
                f"{vendor_id} round {number} is neither as it was nor complete")
            kept_rounds[number] = got_round
        status = dict(now.status.get(vendor_id, expected_status(vendor_id, [], {})))
        incomplete = status.pop("incomplete_chunks", 0)
        assert status == expected_status(vendor_id, kept_documents, kept_rounds), vendor_id
        assert incomplete == len(now.uncommitted.get(vendor_id, ())), vendor_id
        # Each link as it was or as the ingest writes it (the link of an answer a replaced
        # round withdraws may be its tombstone: the same criterion, no fingerprint); a stored
        # response is never without the link to its criterion (links are written first).
        old_links, new_links = before.links.get(vendor_id, {}), after.links.get(vendor_id, {})
        now_links = now.links.get(vendor_id, {})
        for followup_id, link in now_links.items():
            old = old_links.get(followup_id)
            tombstone = (old[0], old[1], "") if old and followup_id not in new_links else None
            assert link in (old, new_links.get(followup_id), tombstone), (
                f"{vendor_id} link of {followup_id} is neither as it was nor as written")
        for rows in now_rounds.values():
            for followup_id, _, linked_hash, _ in rows:
                assert now_links.get(followup_id, (0, None))[1] == linked_hash, (
                    f"{vendor_id} response {followup_id} is stored without its link")


def assert_retrieval_sees_the_committed_store(store: Path, now: StoreView) -> None:
    """Every strategy, and the chunk browser, show committed records only, and an unfinished
    version takes no place in any first-stage window: each window is as full as the
    committed records allow."""
    workbench = workbench_at(store)
    for vendor_id in workbench.vendor_ids():
        committed = now.committed_ids(vendor_id)
        browsed = {row["id"] for row in workbench.browse_chunks(vendor_id, limit=1000)}
        assert browsed == committed, vendor_id
        for strategy, window_setting in STRATEGY_WINDOWS.items():
            trace = workbench.retrieve(vendor_id, KEY_CRITERION, strategy)
            seen = {c.id for c in [*trace.first_stage, *trace.evidence, *trace.reranked]}
            seen |= {h.id for h in [*trace.followups, *(trace.hash_path or []),
                                    *(trace.semantic_path or [])]}
            seen |= {d.followup.id for d in trace.dropped_followups}
            assert seen <= committed, f"{vendor_id} {strategy}: {sorted(seen - committed)[:3]}"
            window = getattr(workbench.settings, window_setting)
            assert len(trace.first_stage) == min(window, len(committed)), (vendor_id, strategy)
            if strategy == "precedence":
                linked = now.linked_ids(vendor_id, KEY_CRITERION)
                assert {h.id for h in trace.hash_path or []} == linked, vendor_id


def assert_interrupted_state(store: Path, before: StoreView, after: StoreView) -> StoreView:
    now = observe(store)
    assert_old_or_new(now, before, after)
    assert_retrieval_sees_the_committed_store(store, now)
    return now


def assert_complete(now: StoreView, after: StoreView) -> None:
    assert now == after
    assert all(not ids for ids in now.uncommitted.values())
    assert all(s["incomplete_chunks"] == 0 for s in now.status.values())
    for vendor_id, by_round in now.rounds.items():  # one link per response, as written
        stored = {r[0]: (n, r[2], r[3]) for n, rows in by_round.items() for r in rows}
        assert now.links.get(vendor_id, {}) == stored, vendor_id


# Fixtures --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fault-inputs")
    write_inputs(root)
    return root


@pytest.fixture(scope="module")
def template(tmp_path_factory, inputs) -> Path:
    """acme with policy.md (old version), badges.txt and rounds 1 and 2 committed."""
    store = tmp_path_factory.mktemp("fault-template") / "store"
    workbench = workbench_at(store)
    workbench.ingest_documents("acme", [inputs / "docs_v1"])
    for name in ("acme_round_1.json", "acme_round_2.json"):
        workbench.ingest_questionnaire(json.loads((inputs / "rounds" / name).read_text()))
    return store


@pytest.fixture(scope="module")
def before(template) -> StoreView:
    return observe(template)


@dataclass
class Reference:
    view: StoreView
    writes: list[str]


@pytest.fixture(scope="module")
def references(tmp_path_factory, template, inputs) -> Callable[[str], Reference]:
    """The complete state after each scenario's ingest, run without faults, computed once."""
    done: dict[str, Reference] = {}

    def reference(name: str) -> Reference:
        if name not in done:
            store = tmp_path_factory.mktemp(f"after-{name}") / "store"
            shutil.copytree(template, store)
            with injected(WriteFaults()) as faults:
                run_ingest(workbench_at(store), SCENARIOS[name], inputs)
            done[name] = Reference(view=observe(store), writes=faults.writes)
        return done[name]

    return reference


@pytest.fixture
def store(tmp_path, template) -> Path:
    """A private copy of the template, never opened before by this process."""
    copy = tmp_path / "store"
    shutil.copytree(template, copy)
    return copy


def cases(names: tuple[str, ...], *, after: str = "every") -> list[Any]:
    """(scenario, write number, before|after) for every write point of the scenarios: just
    before each write, and just after each write (after="every") or after the last only
    (after="last": the store a process leaves when killed just after write k is the one it
    leaves when killed just before write k + 1)."""
    params = []
    for name in names:
        writes = SCENARIOS[name].writes
        for number, label in enumerate(writes, start=1):
            moments = ("before", "after") if after == "every" or number == len(writes) else (
                "before",)
            params += [pytest.param(name, number, when,
                                    id=f"{name}-{when}-{number:02d}-{label.replace(' ', '_')}")
                       for when in moments]
    return params


# The write points ------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_write_point_is_enumerated(references, name, before):
    """The fault matrix below covers exactly the writes each ingest makes."""
    reference = references(name)
    assert reference.writes == list(SCENARIOS[name].writes)
    assert_complete(reference.view, reference.view)
    assert reference.view != before


def test_documents_split_into_one_chunk_per_section(references, before):
    after = references("docs").view
    current = [d for d in after.documents["acme"].values() if not d.archived]
    sizes = {d.source: len(d.chunks) for d in current}
    assert sizes == {"policy.md": POLICY_SECTIONS, "access.md": ACCESS_SECTIONS,
                     "badges.txt": BADGE_SECTIONS}
    old = {d.source: d for d in before.documents["acme"].values()}
    new = {d.source: d for d in current}
    assert old["badges.txt"] == new["badges.txt"]
    assert old["policy.md"].version != new["policy.md"].version
    # The replaced version stays, as superseded: the same text under its archive's key.
    [kept] = [d for d in after.documents["acme"].values() if d.archived]
    assert (kept.source, kept.version) == ("policy.md", old["policy.md"].version)
    assert [text for _, text in kept.chunks] == [text for _, text in old["policy.md"].chunks]


# 1. The embedder failing halfway ---------------------------------------------------------

def ingest_with_failing_embedder(store, scenario, inputs, *, fail_after_calls: int,
                                 batch_size: int = 4):
    """The scenario's ingest with an embedder that fails after `fail_after_calls` calls (of
    4 batches each: 16 texts by default), the failure checked; the embedder and the writes
    made."""
    embedder = FakeEmbedder(fail_after_calls=fail_after_calls)
    failing = Workbench(settings_at(store, embed_batch_size=batch_size), embedder=embedder,
                        reranker=FakeReranker())
    with injected(WriteFaults()) as faults, pytest.raises(RuntimeError, match="fake embedder"):
        run_ingest(failing, scenario, inputs)
    return embedder, faults


@pytest.mark.parametrize("name", ["docs", "docs_new_vendor"])
def test_embedder_failing_halfway_through_documents_writes_nothing(store, inputs, references,
                                                                   before, name):
    scenario = SCENARIOS[name]
    # the 90 (or 30) chunks need several embed calls
    embedder, faults = ingest_with_failing_embedder(store, scenario, inputs, fail_after_calls=1)
    assert embedder.calls == 2
    assert faults.writes == []
    assert observe(store) == before
    run_ingest(workbench_at(store), scenario, inputs)
    assert_complete(observe(store), references(name).view)


def test_embedder_failing_after_the_first_step_leaves_old_or_complete(store, inputs,
                                                                    references, before):
    """A documents ingest embeds and writes a step of BATCH chunks at a time. 4 texts per
    batch, 16 per embed call: step 1 (25 chunks of access.md) takes calls 1-2 and is written;
    step 2 fails in call 4. access.md is absent (its chunks so far are leftovers), policy.md
    as it was; the same ingest again completes both."""
    scenario = SCENARIOS["docs"]
    embedder, faults = ingest_with_failing_embedder(store, scenario, inputs, fail_after_calls=3)
    assert embedder.calls == 4
    assert faults.writes == list(scenario.writes[:2])
    now = assert_interrupted_state(store, before, references("docs").view)
    assert now.documents["acme"] == before.documents["acme"]
    assert len(now.uncommitted["acme"]) == BATCH
    run_ingest(workbench_at(store), scenario, inputs)
    assert_complete(observe(store), references("docs").view)


@pytest.mark.parametrize(("fail_after_calls", "rounds_written"), [(1, 0), (3, 1)])
def test_embedder_failing_halfway_through_a_round(store, inputs, references, before,
                                                  fail_after_calls, rounds_written):
    """One text per batch, 4 per embed call: round 2 (7 responses) takes calls 1-2 and
    round 3 (5 responses) calls 3-4. A failure in the second call of a round leaves that
    round as it was (not even its links written); the round before it is complete."""
    after = references("rounds").view
    _, faults = ingest_with_failing_embedder(store, SCENARIOS["rounds"], inputs,
                                             fail_after_calls=fail_after_calls, batch_size=1)
    assert faults.writes == list(SCENARIOS["rounds"].writes[:4 * rounds_written])
    now = assert_interrupted_state(store, before, after)
    assert now.rounds["acme"][2] == (after if rounds_written else before).rounds["acme"][2]
    assert now.rounds["acme"].get(3) is None
    run_ingest(workbench_at(store), SCENARIOS["rounds"], inputs)
    assert_complete(observe(store), after)


# 2. ChromaDB raising at each write -------------------------------------------------------

@pytest.mark.parametrize(("name", "number", "when"),
                         cases(("docs", "docs_new_vendor", "rounds", "round_new_vendor",
                                "round_replace", "round_withdraw")))
def test_chromadb_raising_at_a_write_leaves_old_or_complete(store, inputs, references, before,
                                                            name, number, when):
    scenario = SCENARIOS[name]
    after = references(name).view
    with injected(WriteFaults(at=number, when=when)) as faults, \
            pytest.raises(InjectedFault):
        run_ingest(workbench_at(store), scenario, inputs)
    assert faults.writes == list(scenario.writes[:number])
    assert_interrupted_state(store, before, after)
    run_ingest(workbench_at(store), scenario, inputs)
    assert_complete(observe(store), after)


def test_a_replacement_interrupted_before_its_manifest_keeps_the_old_version(
        store, inputs, references, before):
    """The sharpest case: every chunk of the new version written, the manifest still naming
    the old one. Status and contents are exactly as before."""
    scenario = SCENARIOS["docs"]
    at = scenario.writes.index("upsert manifest policy.md") + 1
    with injected(WriteFaults(at=at)), pytest.raises(InjectedFault):
        run_ingest(workbench_at(store), scenario, inputs)
    now = assert_interrupted_state(store, before, references("docs").view)
    policy = document_key("policy.md", "tc_files", None)
    assert now.documents["acme"][policy] == before.documents["acme"][policy]
    # The new version's chunks, and the old version's copied under its archive's key.
    assert len(now.uncommitted["acme"]) == 2 * POLICY_SECTIONS
    assert now.status["acme"]["incomplete_chunks"] == 2 * POLICY_SECTIONS


def test_a_replacement_interrupted_before_the_old_chunks_are_deleted_shows_the_new_one(
        store, inputs, references, before):
    scenario = SCENARIOS["docs"]
    at = scenario.writes.index("delete chunks policy.md") + 1
    after = references("docs").view
    with injected(WriteFaults(at=at)), pytest.raises(InjectedFault):
        run_ingest(workbench_at(store), scenario, inputs)
    now = assert_interrupted_state(store, before, after)
    policy = document_key("policy.md", "tc_files", None)
    assert now.documents["acme"][policy] == after.documents["acme"][policy]
    assert now.uncommitted["acme"] == {i for i, _ in before.documents["acme"][policy].chunks}


def _traces(workbench: Workbench) -> dict[str, tuple]:
    traces = {}
    for strategy in STRATEGY_WINDOWS:
        trace = workbench.retrieve("acme", KEY_CRITERION, strategy)
        traces[strategy] = ([c.id for c in trace.first_stage], [c.id for c in trace.evidence],
                            [h.id for h in trace.followups], trace.context)
    return traces


@pytest.mark.parametrize("stop_before", ["upsert manifest policy.md", "delete chunks policy.md"])
def test_an_unfinished_version_never_crowds_retrieval(store, tmp_path, inputs, template,
                                                      stop_before):
    """A new version of policy.md with 120 chunks, every one closer to the criterion than
    anything committed, written but not committed (or committed, the old one not yet
    deleted). Every strategy must retrieve exactly what it retrieves from the store as it was
    before (or as it is once complete): the unfinished version takes no place in any window.
    A plain window of 70 or 100 would hold nothing but skipped chunks."""
    scenario = SCENARIOS["docs_big"]
    complete = tmp_path / "complete"
    shutil.copytree(template, complete)
    run_ingest(workbench_at(complete), scenario, inputs)
    committed = stop_before.startswith("delete")
    expected = _traces(workbench_at(complete if committed else store))
    at = scenario.writes.index(stop_before) + 1
    with injected(WriteFaults(at=at)), pytest.raises(InjectedFault):
        run_ingest(workbench_at(store), scenario, inputs)
    assert _traces(workbench_at(store)) == expected
    if not committed:
        trace = workbench_at(store).retrieve("acme", KEY_CRITERION, "semantic")
        # The new version's 120 chunks, and those of the old version's 60 copied under its
        # archive's key (each as near as its committed original) that ranked in the window.
        [skipped] = [int(n.split()[0]) for n in trace.notes
                     if "chunk(s) of an unfinished document ingest" in n]
        assert 120 <= skipped <= 180
    run_ingest(workbench_at(store), scenario, inputs)
    assert _traces(workbench_at(store)) == _traces(workbench_at(complete))


# 3. SIGKILL ------------------------------------------------------------------------------

DRIVER = '''\
"""Runs one ingest of tests/test_faults.py with the fake models, in its own process, and
(with "at") kills itself with SIGKILL just before or just after that write."""
import json
import sys
from pathlib import Path

from tests.test_faults import SCENARIOS, WriteFaults, injected, run_ingest, workbench_at

spec = json.loads(sys.argv[1])
faults = WriteFaults(at=spec.get("at"), when=spec.get("when", "before"), action="kill",
                     announce=spec.get("announce", False))
if spec.get("warm"):  # every strategy asked first: the lexical index settles at this store
    from tests.test_faults import assert_round_2_shown_whole

    assert_round_2_shown_whole(workbench_at(Path(spec["store"])), spec["warm"], False)
with injected(faults):
    if spec["mode"] == "cli":
        import core.workbench
        from core.cli import main
        from tests.fakes import FakeEmbedder

        core.workbench.SentenceTransformerEmbedder = lambda *args, **kwargs: FakeEmbedder()
        code = main(["--store", spec["store"], *spec["argv"]])
    else:
        workbench = workbench_at(Path(spec["store"]))
        run_ingest(workbench, SCENARIOS[spec["scenario"]], Path(spec["inputs"]))
        code = 0
print(json.dumps({"writes": faults.writes}), flush=True)
sys.exit(code)
'''


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fault-driver") / "fault_driver.py"
    path.write_text(DRIVER, encoding="utf-8")
    return path


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVIDENCE_")}
    env["PYTHONPATH"] = str(REPO)
    return env


def run_driver(driver: Path, spec: dict[str, Any]) -> subprocess.CompletedProcess:
    return warm.run_script(driver, json.dumps(spec), cwd=REPO, env=child_env())


@pytest.mark.parametrize(("name", "number", "when"),
                         cases(("docs", "rounds", "round_new_vendor"), after="last"))
def test_sigkill_at_a_write_leaves_old_or_complete(store, inputs, references, before, driver,
                                                   name, number, when):
    scenario = SCENARIOS[name]
    after = references(name).view
    killed = run_driver(driver, {"mode": "ingest", "scenario": name, "store": str(store),
                                 "inputs": str(inputs), "at": number, "when": when})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert f"fault {when} write {number}: {scenario.writes[number - 1]}" in killed.stderr
    assert killed.stdout == ""
    assert_interrupted_state(store, before, after)
    run_ingest(workbench_at(store), scenario, inputs)
    assert_complete(observe(store), after)


def followups_shown(trace: Any) -> list[Any]:
    """Every follow-up a trace shows anywhere, as (round, answer) pairs."""
    hits = [*trace.followups, *(trace.hash_path or []), *(trace.semantic_path or []),
            *(d.followup for d in trace.dropped_followups)]
    shown = [(h.round_number, h.answer_text) for h in hits]
    return shown + [(c.round_number, c.metadata["answer_text"])
                    for c in [*trace.first_stage, *trace.evidence] if c.is_followup]


@pytest.mark.parametrize("round_number", [2, 3])
def test_a_round_killed_between_its_links_and_its_responses(store, inputs, references,
                                                            before, driver, round_number):
    """SIGKILL just after a round's links (and a new generation) were written, before its
    responses: round 2 is sent again with new answers, round 3 is new. The links name records
    that are not written (or not in this edition); every strategy, the hybrid one's lexical
    index included, shows the round as it was, never part of it. The same ingest again
    completes it, and the hybrid search then finds the new answers by their words."""
    scenario = SCENARIOS["rounds"]
    after = references("rounds").view
    number = next(i for i, label in enumerate(scenario.writes, start=1)
                  if label.startswith(f"upsert manifest links round {round_number} "))
    killed = run_driver(driver, {"mode": "ingest", "scenario": "rounds", "store": str(store),
                                 "inputs": str(inputs), "at": number, "when": "after"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    now = assert_interrupted_state(store, before, after)
    written = {r[0] for r in after.rounds["acme"][round_number]}
    assert {i: now.links["acme"][i] for i in written} == {
        i: after.links["acme"][i] for i in written}
    assert now.rounds["acme"].get(round_number) == before.rounds["acme"].get(round_number)

    new_answer = {2: "Keys rotate every 90 days", 3: "Keys rotate monthly"}[round_number]
    bench = workbench_at(store)
    criteria = (KEY_CRITERION, f"Do the vendor's keys rotate? {new_answer}.")
    for strategy in [*STRATEGY_WINDOWS, "hybrid"]:
        for criterion in criteria:
            shown = followups_shown(bench.retrieve("acme", criterion, strategy))
            assert not [a for _, a in shown if a.startswith(new_answer)], (strategy, criterion)
            if round_number == 2 and strategy == "precedence" and criterion == KEY_CRITERION:
                assert any(r == 2 and "six months" in a for r, a in shown)

    run_ingest(bench, scenario, inputs)
    assert_complete(observe(store), after)
    trace = bench.retrieve("acme", criteria[1], "hybrid")
    assert any(c.is_followup and c.lexical_rank is not None
               and c.metadata["answer_text"].startswith(new_answer) for c in trace.first_stage)


# A replaced round, seen by every strategy ----------------------------------------------------

# The criterion, and questions worded like a withdrawn answer (linked and ad hoc) and like the
# new ones, so that the hash path, the vector search and the lexical index each reach them.
REPLACE_QUERIES = (
    KEY_CRITERION,
    f"Do the vendor's keys rotate? {WITHDRAWN_ANSWERS[0]}",
    f"How are encryption keys handled? {WITHDRAWN_ANSWERS[1]}",
    f"Do the vendor's keys rotate? {NEW_ANSWER_7}",
    f"Do the vendor's keys rotate? {NEW_ANSWER_2}",
)


def assert_round_2_shown_whole(bench: Workbench, name: str, committed: bool) -> None:
    """Every strategy, the hybrid one's lexical index included, shows round 2 as it was before
    the replacement `name` (`committed` False: none of its new answers) or as it made it
    (True: none of the answers it withdrew or changed), in what it shows and in its context;
    and it does show answers of that state."""
    replacement = REPLACEMENTS[name]
    hidden = replacement.gone if committed else replacement.new
    seen: set[str] = set()
    for strategy in [*STRATEGY_WINDOWS, "hybrid"]:
        for criterion in REPLACE_QUERIES:
            trace = bench.retrieve("acme", criterion, strategy)
            shown = {answer for number, answer in followups_shown(trace) if number == 2}
            assert not shown & hidden, (strategy, criterion, shown & hidden)
            assert not [a for a in hidden if a in trace.context], (strategy, criterion)
            seen |= shown
    expected = ({*replacement.new, replacement.kept} if committed
                else {WITHDRAWN_ANSWERS[0], replacement.kept})
    assert expected <= seen, expected - seen


def replace_committed(number: int, when: str) -> bool:
    """Whether the replacement's commit (write 3, its responses and markers, after the vendor
    marked pending and the links) has landed."""
    return number > 3 or (number == 3 and when == "after")


def removed_when_run_again(number: int, when: str) -> int:
    """The withdrawn answers still stored (visible, or markers) once the fault hit."""
    return 4 if number < 4 or (number == 4 and when == "before") else 0


@pytest.mark.parametrize(("name", "number", "when"), cases(("round_replace", "round_withdraw")))
def test_a_replacement_failing_at_a_write_shows_the_round_whole(store, inputs, references,
                                                                before, name, number, when):
    """ChromaDB raising just before or after each write of a replacement, in a workbench that
    had retrieved from the round first (its links, kept records and lexical index at the old
    state): it, and a fresh one, show round 2 whole, old or new; the same replacement again
    completes it and reports the answers it still had to remove."""
    after = references(name).view
    bench = workbench_at(store)
    assert_round_2_shown_whole(bench, name, committed=False)
    with injected(WriteFaults(at=number, when=when)), pytest.raises(InjectedFault):
        run_ingest(bench, SCENARIOS[name], inputs)
    committed = replace_committed(number, when)
    now = assert_interrupted_state(store, before, after)
    assert now.rounds["acme"][2] == (after if committed else before).rounds["acme"][2]
    assert_round_2_shown_whole(bench, name, committed)
    assert_round_2_shown_whole(workbench_at(store), name, committed)
    assert run_ingest(bench, SCENARIOS[name], inputs) == [{
        "indexed_count": REPLACEMENTS[name].indexed, "round_number": 2, "vendor_id": "acme",
        "removed_count": removed_when_run_again(number, when)}]
    assert_complete(observe(store), after)
    assert_round_2_shown_whole(bench, name, committed=True)


@pytest.mark.parametrize(("name", "number", "when"),
                         cases(("round_replace", "round_withdraw"), after="last"))
def test_a_replacement_killed_at_a_write_shows_the_round_whole(store, inputs, references,
                                                               before, driver, name, number,
                                                               when):
    """SIGKILL just before each write of a replacement (and just after the last), in a process
    that had retrieved from the round first, so the lexical index on disk had settled at the
    old state: the store holds round 2 as it was or as replaced, every strategy shows that
    state whole, and the same replacement again completes it."""
    scenario = SCENARIOS[name]
    after = references(name).view
    killed = run_driver(driver, {"mode": "ingest", "scenario": name, "store": str(store),
                                 "inputs": str(inputs), "at": number, "when": when,
                                 "warm": name})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert f"fault {when} write {number}: {scenario.writes[number - 1]}" in killed.stderr
    committed = replace_committed(number, when)
    now = assert_interrupted_state(store, before, after)
    assert now.rounds["acme"][2] == (after if committed else before).rounds["acme"][2]
    bench = workbench_at(store)
    assert_round_2_shown_whole(bench, name, committed)
    [report] = run_ingest(bench, scenario, inputs)
    assert report["removed_count"] == removed_when_run_again(number, when)
    assert_complete(observe(store), after)
    assert_round_2_shown_whole(bench, name, committed=True)


def test_the_driver_without_a_fault_writes_the_complete_state(store, inputs, references,
                                                              driver):
    done = run_driver(driver, {"mode": "ingest", "scenario": "docs", "store": str(store),
                               "inputs": str(inputs)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["writes"] == list(SCENARIOS["docs"].writes)
    assert_complete(observe(store), references("docs").view)


def test_evidence_ingest_killed_while_ingesting_then_run_again(store, tmp_path, inputs,
                                                               references, before, driver):
    """The CLI's own code path (`evidence ingest docs`, the fake embedder in place of the
    real model), killed by another process at whatever moment it has reached once it has
    announced its 12th write of 40; then the same command again; `evidence status` from the
    installed console script."""
    assert len(SCENARIOS["docs_cli"].writes) == 40
    after = references("docs_cli").view
    argv = ["ingest", "docs", "--vendor", "acme", str(inputs / "docs_cli")]
    spec = {"mode": "cli", "store": str(store), "argv": argv, "announce": True}
    child = subprocess.Popen([sys.executable, str(driver), json.dumps(spec)], cwd=REPO,
                             env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    announced = 0
    for line in child.stderr:  # bounded by the child's output: 40 writes at most
        announced += line.startswith("write ")
        if announced == 12:
            child.send_signal(signal.SIGKILL)
            break
    child.stderr.close()
    stdout = child.stdout.read()
    child.stdout.close()
    assert child.wait() == -signal.SIGKILL
    assert stdout == ""

    inspected = tmp_path / "inspected"  # a copy: this process keeps no client on the store
    shutil.copytree(store, inspected)
    now = assert_interrupted_state(inspected, before, after)
    assert before != now != after, "the kill did not land while the ingest was writing"

    again = run_driver(driver, {"mode": "cli", "store": str(store), "argv": argv})
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout.splitlines()[0])
    assert sorted(d["source"] for d in report["documents"]) == sorted(
        d.source for d in after.documents["acme"].values() if not d.archived)
    evidence = Path(sys.executable).parent / "evidence"
    status = subprocess.run([str(evidence), "--store", str(store), "status"],
                            env=child_env(), capture_output=True, text=True)
    assert status.returncode == 0, status.stderr
    assert [json.loads(line) for line in status.stdout.splitlines()] == list(
        after.status.values())
    assert_complete(observe(store), after)


BULK_DRIVER = '''\
"""Writes 4000 records in ONE upsert call, announcing the moment just before it."""
import sys
from pathlib import Path

from core.models import StoredRecord
from tests.test_faults import workbench_at

workbench = workbench_at(Path(sys.argv[1]))
vendor = workbench.store.open_vendor("bulk", create=True, embedding_model="fake-bag-of-words")
records = [StoredRecord(id=f"r{i}", text=f"record {i} about key rotation {i % 97}",
                        metadata={"n": i}) for i in range(4000)]
vectors = workbench.embedder.embed([r.text for r in records])
assert workbench.store.max_batch_size() >= len(records)
print("writing", flush=True)
workbench.store.upsert(vendor, records, vectors)
print("written", flush=True)
'''


@pytest.mark.parametrize("spins", [0, 4_000_000, 12_000_000])
def test_one_chromadb_write_call_is_all_or_nothing_under_sigkill(tmp_path, spins):
    """What every commit step relies on, a round above all (its up to 100 responses go in one
    call): a write call killed at any moment is absent or complete once the store is opened
    again, in the metadata and in the vector index alike. The kill lands after a
    count-bounded spin following the announcement, so the runs hit different moments."""
    script = tmp_path / "bulk_driver.py"
    script.write_text(BULK_DRIVER, encoding="utf-8")
    store = tmp_path / "store"
    child = subprocess.Popen([sys.executable, str(script), str(store)], cwd=REPO,
                             env=child_env(), stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "writing"
    for _ in range(spins):
        pass
    child.send_signal(signal.SIGKILL)
    child.stdout.close()
    assert child.wait() in (-signal.SIGKILL, 0)

    chunks = workbench_at(store).store.open_vendor("bulk").chunks
    stored = get_all(chunks, include=("metadatas",))["ids"]
    assert len(stored) in (0, 4000)
    assert chunks.count() == len(stored)
    if stored:
        query = FakeEmbedder().embed(["key rotation 5"])[0]
        found = chunks.query(query_embeddings=[np.asarray(query)], n_results=50)["ids"][0]
        assert len(found) == 50 and set(found) <= set(stored)
