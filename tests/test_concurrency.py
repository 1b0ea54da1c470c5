"""Concurrent use of one store: retrievals with every strategy and status reads while documents
and rounds are being written, on an embedded store and on a real ChromaDB server, and two
dashboard sessions at once.

Figures (every loop is bounded by a count, none by time):
- Store tests, 4 reader threads and 1 writer thread. Embedded: all five share one Workbench,
  as dashboard sessions do. Server (`chroma run` on 127.0.0.1): the readers share one
  Workbench and the writer has its own, as a CLI ingest beside a running dashboard would.
  After an initial ingest (2 documents, 1 round), the writer makes 24 writes: 10
  replacements of one document, 4 new documents, 4 new rounds and 6 re-sent rounds with
  edited answers. Each reader makes 10 to 40 iterations (at least 10, then it stops as soon
  as the writer is done), each one retrieval (the five strategies in rotation) and one
  status read: 80 to 320 reads per reader pool, nearly all of them during writes.
- Dashboard, 2 AppTest sessions in 2 threads with different vendor, criterion and strategy:
  each runs the app frame and then all 6 pages twice (13 runs per session, 26 in all). And
  on an empty store, 2 sessions in 2 threads: the first indexes the sample data, the second
  opens the app as soon as the first write of that indexing has landed (1 run each).
- Opening one embedded store: 4 threads, each with its own Workbench, open it at the same
  moment and write one round each; 5 trials, each on a new store.

What "no torn read" means here, checked against the state the single writer recorded after
each of its operations (a read that overlapped writes j+1..k may show any state j..k):
- a document's chunks in a trace all carry one version, and (for the strategies whose first
  stage takes the whole of this small collection) exactly the chunks of a version that was
  committed while the read ran, or none if the document did not exist then;
- a round's follow-ups in a trace all come from one complete write of that round: all of its
  responses, all from the same edition;
- `status` equals the status of one such committed state.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import traceback
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from core.config import Settings
from core.models import DOCUMENT_SOURCE_TYPE, FOLLOWUP_SOURCE_TYPE
from core.reports import VendorStatus
from core.retrieval.strategies import STRATEGIES
from core.workbench import Workbench
from tests.chroma_server import ChromaServer
from tests.conftest import AES_CRITERION
from tests.dashboard.test_app import PAGES
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support import payloads
from tests.support.store import get_all, read_manifest

VENDOR = "acme"
_COMPILING = threading.RLock()


@pytest.fixture(autouse=True)
def pages_compiled_one_at_a_time(monkeypatch):
    """Streamlit's server compiles each page once, under its script cache's lock; every
    AppTest has a cache of its own, so sessions in threads here compile at the same moment,
    which CPython 3.11's compiler does not survive before 3.11.8 ("AST constructor recursion
    depth mismatch", python/cpython#106905). The tests give AppTest the server's behaviour:
    one compile at a time, and one parse of a page's source into a syntax tree (Streamlit's
    "magic" parses each page before compiling it) at a time."""
    import ast

    from streamlit.runtime.scriptrunner import script_cache

    parse = ast.parse

    def compile_one_at_a_time(*args: Any, **kwargs: Any) -> Any:
        with _COMPILING:
            return compile(*args, **kwargs)

    def parse_one_at_a_time(*args: Any, **kwargs: Any) -> Any:
        with _COMPILING:
            return parse(*args, **kwargs)

    monkeypatch.setattr(script_cache, "compile", compile_one_at_a_time, raising=False)
    monkeypatch.setattr(ast, "parse", parse_one_at_a_time)
READERS = 4
MIN_ITERATIONS = 10
MAX_ITERATIONS = 40
STRATEGY_NAMES = sorted(STRATEGIES)
# Whose first stage takes the whole collection here (it holds fewer than 200 records, the
# first-stage windows `store_settings` gives, with every replaced version kept as superseded),
# so a trace shows every committed document and round; `tiered` searches a window of 10.
WHOLE_COLLECTION = {"semantic", "doc_boost", "hash_extraction", "precedence"}
LINKED_PER_ROUND = 3

# The store: documents and rounds, and what a reader can see of them -----------------------


def document_text(name: str, version: int, chunks: int) -> str:
    """`chunks` paragraphs, each longer than half a chunk, so each is a chunk of its own."""
    return "\n\n".join(
        f"{name} version {version} part {part}: the vendor encrypts data at rest using "
        f"AES-256 with keys rotated yearly, and backups are sealed the same way."
        for part in range(1, chunks + 1))


def edition_round(round_number: int, edition: int) -> dict[str, Any]:
    """Round `round_number` of the vendor as sent for the `edition`th time: every answer says
    which, so a reader can tell the editions apart."""
    linked = payloads.numbered(
        LINKED_PER_ROUND, "Question {i} on encryption of data at rest",
        "Round {round} edition {edition} answer {i}: AES-256.", criterion=AES_CRITERION, start=1,
        round=round_number, edition=edition)
    ad_hoc = payloads.response("Where are keys held?",
                               f"Round {round_number} edition {edition}: in a managed KMS.")
    return payloads.round_payload(round_number, [*linked, ad_hoc], vendor=VENDOR)


_EDITION = re.compile(r"^Round \d+ edition (\d+)")


@dataclass(frozen=True)
class StoreState:
    """What is committed: each document's (version, chunks), each round's (responses,
    edition), and the status the workbench reports for it."""

    documents: dict[str, tuple[str, int]]
    rounds: dict[int, tuple[int, int]]
    status: VendorStatus


def committed_state(bench: Workbench) -> StoreState:
    """Read only while nothing writes: the single writer calls it between its writes."""
    vendor = bench.store.open_vendor(VENDOR)
    documents = {key: (str(meta["version"]), int(meta["chunks"]))
                 for key, meta in read_manifest(vendor).items()}
    followups = get_all(vendor.chunks, where={"source_type": FOLLOWUP_SOURCE_TYPE},
                        include=("metadatas",))["metadatas"]
    editions: dict[int, set[int]] = defaultdict(set)
    sizes: dict[int, int] = defaultdict(int)
    for meta in followups:
        editions[int(meta["round_number"])].add(int(_EDITION.match(meta["answer_text"])[1]))
        sizes[int(meta["round_number"])] += 1
    assert all(len(e) == 1 for e in editions.values()), editions
    rounds = {r: (sizes[r], next(iter(e))) for r, e in editions.items()}
    [status] = bench.status(VENDOR)
    return StoreState(documents, rounds, status)


@dataclass
class Writer:
    """The only writer: its operations, and the committed state after each."""

    bench: Workbench
    folder: Path
    operations: list[Callable[[], Any]] = field(default_factory=list)
    states: list[StoreState] = field(default_factory=list)
    completed: int = 0
    done: threading.Event = field(default_factory=threading.Event)

    def document(self, name: str, version: int, chunks: int) -> Callable[[], Any]:
        def write() -> Any:
            path = self.folder / name
            path.write_text(document_text(name, version, chunks), encoding="utf-8")
            report = self.bench.ingest_documents(VENDOR, [path])
            assert [d.chunks for d in report.documents] == [chunks]
            return report
        return write

    def round(self, round_number: int, edition: int) -> Callable[[], Any]:
        return lambda: self.bench.ingest_questionnaire(edition_round(round_number, edition))

    def setup(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.document("stable.txt", 1, 4)()
        self.document("policy-a.txt", 1, 3)()
        self.round(1, 1)()
        self.states.append(committed_state(self.bench))
        document, round_ = self.document, self.round
        plan = [
            document("policy-a.txt", 2, 5), round_(2, 1), document("added-1.txt", 1, 2),
            document("policy-a.txt", 3, 4), round_(2, 2), round_(3, 1),
            document("policy-a.txt", 4, 6), document("added-2.txt", 1, 3), round_(1, 2),
            document("policy-a.txt", 5, 3), round_(4, 1), document("policy-a.txt", 6, 5),
            document("policy-a.txt", 7, 4), round_(5, 1), document("added-3.txt", 1, 2),
            document("policy-a.txt", 8, 6), round_(3, 2), round_(4, 2),
            document("policy-a.txt", 9, 3), document("added-4.txt", 1, 3), round_(5, 2),
            document("policy-a.txt", 10, 5), round_(1, 3), document("policy-a.txt", 11, 4),
        ]
        self.operations.extend(plan)

    def run(self) -> None:
        try:
            for operation in self.operations:
                operation()
                self.states.append(committed_state(self.bench))
                self.completed += 1
        finally:
            self.done.set()

    def states_during(self, before: int, after: int) -> list[StoreState]:
        """Every state a read may show that began after `before` writes and ended after
        `after` (the write in progress when it ended may already be visible)."""
        return self.states[before : min(after + 1, len(self.operations)) + 1]


@dataclass(frozen=True)
class Observation:
    reader: int
    before: int
    after: int
    what: str
    result: Any


def document_views(records: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """doc_key -> {version: chunks seen} of the document chunks in some trace stage."""
    seen: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for meta in records:
        if meta.get("source_type") == DOCUMENT_SOURCE_TYPE:
            seen[meta["doc_key"]][meta["doc_sha"]] += 1
    return seen


def round_views(followups: list[tuple[int, str]]) -> dict[int, tuple[int, set[int]]]:
    """round -> (responses seen, editions seen) from (round, answer) pairs."""
    sizes: dict[int, int] = defaultdict(int)
    editions: dict[int, set[int]] = defaultdict(set)
    for round_number, answer in followups:
        sizes[round_number] += 1
        editions[round_number].add(int(_EDITION.match(answer)[1]))
    return {r: (sizes[r], editions[r]) for r in sizes}


def contract_status(status: VendorStatus) -> dict[str, Any]:
    """The keys CONTRACT.md gives `status`; `incomplete_chunks` is left out because it counts
    the chunks of a write in progress, which a read during that write rightly sees."""
    return status.model_dump(include={"vendor_id", "documents", "chunks", "followup_responses",
                                       "rounds", "by_type"})


def torn_reads(observation: Observation, states: list[StoreState]) -> list[str]:
    """Every way one read disagrees with all the states it may show; empty when it agrees."""
    problems = []
    if observation.what == "status":
        shown = contract_status(observation.result)
        if shown not in [contract_status(s.status) for s in states]:
            problems.append(f"status {shown} is no committed state; committed meanwhile: "
                            f"{[contract_status(s.status) for s in states]}")
        return problems
    trace = observation.result
    stages = [c.metadata for c in [*trace.first_stage, *trace.reranked, *trace.evidence]]
    for doc_key, versions in document_views(stages).items():
        if len(versions) > 1:
            problems.append(f"{trace.strategy}: document {doc_key} mixes versions {versions}")
    if trace.strategy in WHOLE_COLLECTION:
        seen = document_views([c.metadata for c in trace.first_stage])
        for doc_key in {k for s in states for k in s.documents} | set(seen):
            shown = {v: n for v, n in seen.get(doc_key, {}).items()}
            possible = [dict([s.documents[doc_key]]) if doc_key in s.documents else {}
                        for s in states]
            if shown not in possible:
                problems.append(f"first stage of {trace.strategy}: document {doc_key} seen as "
                                f"{shown}; "
                                f"committed meanwhile: {possible}")
        first_stage_rounds = round_views([
            (int(c.metadata["round_number"]), c.metadata["answer_text"])
            for c in trace.first_stage if c.is_followup])
        for round_number in {r for s in states for r in s.rounds} | set(first_stage_rounds):
            shown_round = first_stage_rounds.get(round_number)
            possible_rounds = [(s.rounds[round_number][0], {s.rounds[round_number][1]})
                               if round_number in s.rounds else None for s in states]
            if shown_round not in possible_rounds:
                problems.append(f"first stage of {trace.strategy}: round {round_number} seen as "
                                f"{shown_round}; committed meanwhile: {possible_rounds}")
    linked = [*(trace.hash_path or []), *trace.followups]
    for round_number, (_, editions) in round_views(
            [(h.round_number, h.answer_text) for h in linked]).items():
        if len(editions) > 1:
            problems.append(f"{trace.strategy}: round {round_number} mixes editions {editions}")
    if trace.strategy == "precedence":
        hash_rounds = round_views([(h.round_number, h.answer_text) for h in trace.hash_path])
        for round_number in {r for s in states for r in s.rounds} | set(hash_rounds):
            shown_round = hash_rounds.get(round_number)
            possible_rounds = [(LINKED_PER_ROUND, {s.rounds[round_number][1]})
                               if round_number in s.rounds else None for s in states]
            if shown_round not in possible_rounds:
                problems.append(f"precedence hash path: round {round_number} seen as "
                                f"{shown_round}; committed meanwhile: {possible_rounds}")
    return problems


def run_readers_beside_writer(readers: list[Workbench], writer: Writer
                              ) -> list[Observation]:
    """READERS threads retrieving and reading status while the writer writes; returns every
    read with the number of writes completed before it began and after it ended."""
    start = threading.Barrier(len(readers) + 1)
    observations: list[Observation] = []
    failures: list[str] = []
    lock = threading.Lock()

    def read(index: int, bench: Workbench) -> None:
        try:
            start.wait()
            for i in range(MAX_ITERATIONS):
                if i >= MIN_ITERATIONS and writer.done.is_set():
                    break
                strategy = STRATEGY_NAMES[(index + i) % len(STRATEGY_NAMES)]
                for what, call in ((strategy, lambda s=strategy: bench.retrieve(
                        VENDOR, AES_CRITERION, s)), ("status", lambda: bench.status(VENDOR)[0])):
                    before = writer.completed
                    result = call()
                    with lock:
                        observations.append(Observation(index, before, writer.completed,
                                                        what, result))
        except Exception:
            with lock:
                failures.append(traceback.format_exc())

    def write() -> None:
        try:
            start.wait()
            writer.run()
        except Exception:
            with lock:
                failures.append(traceback.format_exc())

    threads = [threading.Thread(target=read, args=(i, bench), name=f"reader-{i}")
               for i, bench in enumerate(readers)]
    threads.append(threading.Thread(target=write, name="writer"))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, "\n".join(failures)
    return observations


def check_concurrent_run(readers: list[Workbench], writer: Writer) -> None:
    writer.setup()
    observations = run_readers_beside_writer(readers, writer)
    assert writer.completed == len(writer.operations)
    # The reads really overlapped the writes, and every strategy ran.
    assert any(o.before < len(writer.operations) for o in observations)
    assert {o.what for o in observations} == {"status", *STRATEGY_NAMES}
    found = [(o, p) for o in observations
             for p in torn_reads(o, writer.states_during(o.before, o.after))]
    problems = [f"reader {o.reader}, writes {o.before}..{o.after}: {p}" for o, p in found]
    assert not problems, "\n".join(problems[:20]) + f"\n({len(problems)} in all)"
    # Once the writer is done, the readers' workbench sees its final state.
    final = writer.states[-1]
    assert final.status.incomplete_chunks == 0
    assert readers[0].status(VENDOR)[0] == final.status


def store_settings(tmp_path: Path, **kwargs: Any) -> Settings:
    # Small chunks and wide first stages keep the whole collection (every version of the
    # document replaced ten times included) under every whole-collection first stage.
    return Settings(store=tmp_path / "store", reranker_cache_dir=tmp_path / "none",
                    chunk_size=200, chunk_overlap=0, semantic_first_stage_n=200,
                    top_first_stage_n=200, **kwargs)


def test_readers_and_a_writer_on_one_embedded_store(tmp_path):
    bench = Workbench(store_settings(tmp_path), embedder=FakeEmbedder(),
                      reranker=FakeReranker())
    writer = Writer(bench, tmp_path / "documents")
    check_concurrent_run([bench] * READERS, writer)


@pytest.mark.server
def test_readers_and_a_writer_on_a_chromadb_server(tmp_path):
    server = ChromaServer(tmp_path / "server-data")
    try:
        settings = store_settings(tmp_path, chroma_host="127.0.0.1", chroma_port=server.port)
        shared = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
        writer = Writer(Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker()),
                        tmp_path / "documents")
        check_concurrent_run([shared] * READERS, writer)
        assert not (tmp_path / "store").exists()
    finally:
        server.stop()


# A retrieval while a round is written ------------------------------------------------------

# The strategies that fetch every response linked to the criterion, and the ones whose first
# stage takes the whole (small) collection here; hybrid's vector half takes all of it too.
FETCHING_LINKED = {"precedence", "hybrid"}
WHOLE_FIRST_STAGE = WHOLE_COLLECTION | {"hybrid"}


def round_seen(trace: Any, round_number: int) -> dict[str, tuple[int, set[int]] | None]:
    """How a trace shows one round, in each place it can: (responses, editions), or None."""
    def view(pairs: list[tuple[str, int, str]]) -> tuple[int, set[int]] | None:
        unique = {i: (r, answer) for i, r, answer in pairs if r == round_number}
        return round_views(list(unique.values())).get(round_number)

    seen = {"context": view([(h.id, h.round_number, h.answer_text) for h in trace.followups])}
    if trace.strategy in FETCHING_LINKED:
        seen["linked"] = view([(h.id, h.round_number, h.answer_text)
                               for h in trace.hash_path or []])
    if trace.strategy in WHOLE_FIRST_STAGE:
        seen["first_stage"] = view([(c.id, int(c.metadata["round_number"]),
                                     c.metadata["answer_text"])
                                    for c in trace.first_stage if c.is_followup])
    return seen


def assert_round_absent_or_whole(trace: Any, round_number: int, editions: set[int]
                                 ) -> int | None:
    """The round shown nowhere, or in one edition (of `editions`) wherever it is shown:
    every linked response through the links, every response in a whole-collection first
    stage. The edition shown, or None."""
    seen = round_seen(trace, round_number)
    shown = {edition for view in seen.values() if view for edition in view[1]}
    if not shown:
        return None
    assert len(shown) == 1 and shown <= editions, (trace.strategy, seen)
    [edition] = shown
    if "linked" in seen:
        assert seen["linked"] == (LINKED_PER_ROUND, {edition}), (trace.strategy, seen)
    if "first_stage" in seen:
        assert seen["first_stage"] == (LINKED_PER_ROUND + 1, {edition}), (trace.strategy, seen)
    return edition


class PausedRoundWriter:
    """Writes one round from a thread of its own, pausing after the round's links (and new
    generation) are written, before its responses, until `resume` is set."""

    def __init__(self, bench: Workbench, payload: dict[str, Any]) -> None:
        self.links_written = threading.Event()
        self.resume = threading.Event()
        self.done = threading.Event()
        self.failure: list[str] = []
        upsert = bench.store.upsert

        def paused(collection: Any, records: Any, embeddings: Any) -> Any:
            if records[0].metadata["source_type"] == FOLLOWUP_SOURCE_TYPE:
                self.links_written.set()
                assert self.resume.wait(timeout=120), "never resumed"
            return upsert(collection, records, embeddings)

        bench.store.upsert = paused  # type: ignore[method-assign]

        def write() -> None:
            try:
                bench.ingest_questionnaire(payload)
            except Exception:
                self.failure.append(traceback.format_exc())
            finally:
                self.links_written.set()
                self.done.set()

        self.thread = threading.Thread(target=write, name="round-writer")

    def finish(self) -> None:
        self.resume.set()
        self.thread.join()
        assert not self.failure, self.failure[0]


@pytest.fixture
def two_benches(tmp_path) -> tuple[Workbench, Workbench]:
    """A reader and a writer, each its own Workbench, on one embedded store holding two
    documents and round 1 (edition 1)."""
    settings = store_settings(tmp_path)
    reader = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    folder = tmp_path / "documents"
    folder.mkdir()
    for name, chunks in (("stable.txt", 4), ("policy-a.txt", 3)):
        (folder / name).write_text(document_text(name, 1, chunks), encoding="utf-8")
    reader.ingest_documents(VENDOR, [folder])
    reader.ingest_questionnaire(edition_round(1, 1))
    writer = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    return reader, writer


@pytest.mark.parametrize(("round_number", "edition", "before"),
                         [(2, 1, None), (1, 2, 1)], ids=["new-round", "round-sent-again"])
def test_a_retrieval_between_a_rounds_links_and_its_responses_sees_it_as_before(
        two_benches, round_number, edition, before):
    """The writer stops after the round's links: every strategy shows the round as before
    (absent, or its first edition whole), although the links name the new responses."""
    reader, writer_bench = two_benches
    for strategy in STRATEGY_NAMES:  # links and lexical index read at the state before
        reader.retrieve(VENDOR, AES_CRITERION, strategy)
    writer = PausedRoundWriter(writer_bench, edition_round(round_number, edition))
    writer.thread.start()
    try:
        assert writer.links_written.wait(timeout=120)
        for strategy in STRATEGY_NAMES:
            trace = reader.retrieve(VENDOR, AES_CRITERION, strategy)
            assert assert_round_absent_or_whole(trace, round_number, {edition} | (
                {before} if before else set())) == before, strategy
    finally:
        writer.finish()
    for strategy in STRATEGY_NAMES:
        trace = reader.retrieve(VENDOR, AES_CRITERION, strategy)
        assert assert_round_absent_or_whole(trace, round_number, {edition}) == edition


@pytest.mark.parametrize("started", ["before the links", "after the links"])
@pytest.mark.parametrize(("round_number", "edition", "before"),
                         [(2, 1, None), (1, 2, 1)], ids=["new-round", "round-sent-again"])
def test_a_retrieval_during_which_a_round_is_written_sees_it_absent_or_whole(
        two_benches, monkeypatch, started, round_number, edition, before):
    """A retrieval reads its links, and then, before it fetches the linked responses and
    searches, the round is written (its links too, when the retrieval began before them).
    The trace shows the round whole or not at all, in its linked path and its first stage
    alike: a retrieval whose generation changed while it ran runs again."""
    reader, writer_bench = two_benches
    writer = PausedRoundWriter(writer_bench, edition_round(round_number, edition))
    read_links = reader.runner.read_links
    calls = []

    def round_lands_after_the_links_are_read(vendor: Any, generation: Any) -> Any:
        links = read_links(vendor, generation)
        if not calls:
            if started == "before the links":
                writer.thread.start()
            writer.resume.set()
            assert writer.done.wait(timeout=120)
        calls.append(generation)
        return links

    monkeypatch.setattr(reader.runner, "read_links", round_lands_after_the_links_are_read)
    if started == "after the links":
        writer.thread.start()
        assert writer.links_written.wait(timeout=120)
    try:
        for strategy in STRATEGY_NAMES:
            trace = reader.retrieve(VENDOR, AES_CRITERION, strategy)
            assert_round_absent_or_whole(trace, round_number,
                                         {edition} | ({before} if before else set()))
    finally:
        writer.finish()
    assert calls  # the round landed inside a retrieval
    if started == "before the links":  # that retrieval ran again on the new generation
        assert len(set(calls[:2])) == 2


# Two dashboard sessions at once -----------------------------------------------------------

PASSES_OVER_PAGES = 2


@dataclass(frozen=True)
class Session:
    vendor: str
    criterion: str
    strategy: str


@pytest.fixture
def one_server_for_two_sessions(monkeypatch):
    """Lets AppTests run at once as sessions of one Streamlit server.

    Every AppTest run builds what a server holds once for all its sessions, and some of it
    is global: it installs its own mock runtime and removes it when the run ends (pulling it
    from under a session still running), patches the config getter and restores it (two
    overlapping runs leave the wrong one in place), compiles pages in a cache of its own
    (two threads compiling at one moment can fail on CPython before 3.11.8 with "SystemError:
    AST constructor recursion depth mismatch", python/cpython#106905), and scans every
    installed package for components on a session's first run (which takes seconds, so a
    session would start long after the moment the test chose). Here, as on a server, the
    sessions share one of each: one script cache, one component registry, the config patch
    in place throughout, and the runtime installed while any session runs."""
    from streamlit import config
    from streamlit.runtime import Runtime
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test
    from streamlit.testing.v1.util import build_mock_config_get_option

    shared_cache = ScriptCache()
    components = app_test.BidiComponentManager()
    components.discover_and_register_components(start_file_watching=False)
    # Later sessions find the registry filled: the instance attribute shadows the scan.
    components.discover_and_register_components = lambda **_: None
    lock = threading.Lock()
    running = [0]

    class CountedInstall(type):
        def __setattr__(cls, name: str, value: Any) -> None:
            if name != "_instance":
                super().__setattr__(name, value)
                return
            with lock:
                running[0] += -1 if value is None else 1
                if value is not None and running[0] == 1:
                    Runtime._instance = value
                elif value is None and running[0] == 0:
                    Runtime._instance = None

    class SharedRuntime(Runtime, metaclass=CountedInstall):
        pass

    monkeypatch.setattr(app_test, "ScriptCache", lambda: shared_cache)
    monkeypatch.setattr(app_test, "BidiComponentManager", lambda: components)
    monkeypatch.setattr(app_test, "Runtime", SharedRuntime)
    monkeypatch.setattr(config, "get_option",
                        build_mock_config_get_option({"global.appTest": True}))
    monkeypatch.setattr(app_test, "patch_config_options",
                        lambda overrides: contextlib.nullcontext())
    yield
    Runtime._instance = None  # even if a session died with the runtime installed


def sample_workbench(tmp_path: Path) -> Workbench:
    from core.ingest.sample import ingest_sample
    from tests.conftest import SAMPLE_DATA

    bench = Workbench(Settings(store=tmp_path / "store", reranker_cache_dir=tmp_path / "none"),
                      embedder=FakeEmbedder(), reranker=FakeReranker())
    ingest_sample(bench, SAMPLE_DATA)
    return bench


def drive_session(session: Session, other: Session, expected: dict[str, str]) -> list[str]:
    """The app frame, then every page PASSES_OVER_PAGES times; what the session saw wrong."""
    from streamlit.testing.v1 import AppTest

    from tests.dashboard.conftest import DASHBOARD

    at = AppTest.from_file(str(DASHBOARD / "app.py"), default_timeout=300)
    at.session_state["vendor"] = session.vendor
    at.session_state["criterion"] = session.criterion
    at.session_state["strategy"] = session.strategy
    at.run()
    problems = page_problems(at, "views/overview.py", session, other, expected)
    for _ in range(PASSES_OVER_PAGES):
        for path in PAGES:
            at.switch_page(path).run()
            problems += page_problems(at, path, session, other, expected)
    return problems


def page_problems(at: Any, path: str, session: Session, other: Session,
                  expected: dict[str, str]) -> list[str]:
    where = f"{session.vendor} on {path}"
    if at.exception:
        return [f"{where}: {[e.value for e in at.exception]}"]
    problems = []
    selection = Session(at.session_state["vendor"], at.session_state["criterion"],
                        at.session_state["strategy"])
    if selection != session:
        problems.append(f"{where}: the selection became {selection}")
    if [t.value for t in at.title] != [PAGES[path]]:
        problems.append(f"{where}: titles {[t.value for t in at.title]}")
    # The page's own line naming the selection (the library lists every vendor elsewhere).
    named = [c.value for c in at.caption if "endor **" in c.value]
    for caption in named:
        if f"**{session.vendor}**" not in caption or f"**{other.vendor}**" in caption:
            problems.append(f"{where}: caption {caption!r}")
    if path != "views/library.py" and not named and path in (
            "views/overview.py", "views/context.py", "views/rankings.py"):
        problems.append(f"{where}: no caption names the vendor")
    if path == "views/overview.py":
        shown = next((m.value for m in at.metric if m.label == "Criterion hash"), None)
        if shown != expected["criterion_hash"]:
            problems.append(f"{where}: criterion hash {shown}")
    if path == "views/context.py":
        shown = [c.value for c in at.code]
        if shown != [expected["context"], expected["prompt"]]:
            problems.append(f"{where}: the context or prompt shown is not this selection's")
    return problems


def test_two_dashboard_sessions_at_once_each_see_their_own_selection(
        tmp_path, monkeypatch, one_server_for_two_sessions):
    import streamlit as st

    from core.ingest.criteria_lists import load_criteria
    from dashboard import resources

    bench = sample_workbench(tmp_path)
    monkeypatch.setattr(resources, "make_workbench", lambda: bench)
    st.cache_resource.clear()
    st.cache_data.clear()
    criteria = load_criteria(resources.CRITERIA_FILE)
    sessions = [Session("acme", criteria[0], "precedence"),
                Session("northwind", criteria[1], "tiered")]
    expected = {}
    for session in sessions:
        trace = bench.retrieve(session.vendor, session.criterion, session.strategy)
        expected[session] = {"criterion_hash": trace.criterion_hash, "context": trace.context,
                             "prompt": trace.prompt}
    assert expected[sessions[0]]["context"] != expected[sessions[1]]["context"]

    start = threading.Barrier(len(sessions))
    problems: list[str] = []

    def run(session: Session, other: Session) -> None:
        try:
            start.wait()
            found = drive_session(session, other, expected[session])
        except Exception:
            found = [traceback.format_exc()]
        problems.extend(found)

    run_sessions_together([threading.Thread(target=run, args=(sessions[i], sessions[1 - i]))
                           for i in range(len(sessions))])
    assert not problems, "\n".join(problems)


def run_sessions_together(threads: list[threading.Thread]) -> None:
    """Start every dashboard session's thread, wait for all, then drop what they cached."""
    import streamlit as st

    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        st.cache_resource.clear()
        st.cache_data.clear()


def signalling(write: Callable[..., Any], written: threading.Event) -> Callable[..., Any]:
    """`write`, setting `written` once it has returned."""
    def write_and_signal(*args: Any, **kwargs: Any) -> Any:
        report = write(*args, **kwargs)
        written.set()
        return report
    return write_and_signal


def test_a_session_arriving_during_first_start_indexing_waits_for_all_of_it(
        tmp_path, monkeypatch, one_server_for_two_sessions):
    """A server's first visitor finds the store empty and indexes the sample data; a second
    visitor arrives once the first write has landed. It must not take the half-indexed store
    for a ready one (losing its vendor, which is not indexed yet): it must see the store as
    one complete indexing leaves it, and the store must end up exactly so."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from dashboard import first_start, resources
    from tests.dashboard.conftest import DASHBOARD

    reference = {s.vendor_id: contract_status(s)
                 for s in sample_workbench(tmp_path / "reference").status()}
    bench = Workbench(Settings(store=tmp_path / "store", reranker_cache_dir=tmp_path / "none"),
                      embedder=FakeEmbedder(), reranker=FakeReranker())
    first_write = threading.Event()
    for name in ("ingest_documents", "ingest_questionnaire"):
        monkeypatch.setattr(bench, name, signalling(getattr(bench, name), first_write))
    monkeypatch.setattr(resources, "make_workbench", lambda: bench)
    st.cache_resource.clear()
    st.cache_data.clear()
    problems: list[str] = []
    seen: dict[str, list[str]] = {}

    def visit(vendor: str, after: threading.Event | None) -> None:
        try:
            at = AppTest.from_file(str(DASHBOARD / "app.py"), default_timeout=300)
            at.session_state["vendor"] = vendor
            if after is not None:
                after.wait()  # always set: by the first write, or when the first visit ends
            at.run()
            # While the sample data is indexed a visitor sees the indexing page and no page
            # of the store; once it ends, the pages, on the store as the indexing left it.
            while not at.exception and at.title and (
                    at.title[0].value == "Indexing the sample data"):
                if at.sidebar.selectbox:
                    problems.append(f"{vendor}: a vendor picker during the indexing")
                    return
                first_start.wait_for_sample_indexing(bench, timeout=5)
                at.run()
            if at.exception:
                problems.append(f"{vendor}: {[e.value for e in at.exception]}")
                return
            seen[vendor] = at.sidebar.selectbox(key="vendor").options
            if at.session_state["vendor"] != vendor:
                problems.append(f"{vendor}: the page opened with vendor "
                                f"{at.session_state['vendor']!r}")
        except Exception:
            problems.append(traceback.format_exc())
        finally:
            first_write.set()

    run_sessions_together([threading.Thread(target=visit, args=("acme", None)),
                           threading.Thread(target=visit, args=("northwind", first_write))])
    assert not problems, "\n".join(problems)
    every = ["acme", "lumen", "northwind"]
    assert seen == {"acme": every, "northwind": every}
    statuses = bench.status()
    assert {s.vendor_id: contract_status(s) for s in statuses} == reference
    assert all(s.incomplete_chunks == 0 for s in statuses)


# Opening one store from several threads at once --------------------------------------------

OPENING_THREADS = 4
OPENING_TRIALS = 5


def open_store_at_once(settings: Settings) -> list[str]:
    """OPENING_THREADS threads, each with its own Workbench on the same store, open it at the
    same moment, write a round for their own vendor and read it back; what went wrong."""
    start = threading.Barrier(OPENING_THREADS)
    failures: list[str] = []

    def open_and_write(index: int) -> None:
        try:
            bench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
            start.wait()
            payload = {**edition_round(1, 1), "vendor_id": f"vendor-{index}"}
            assert bench.ingest_questionnaire(payload).indexed_count == 4
            [status] = bench.status(f"vendor-{index}")
            assert status.followup_responses == 4, status
        except Exception:
            failures.append(traceback.format_exc())

    threads = [threading.Thread(target=open_and_write, args=(i,))
               for i in range(OPENING_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


def test_workbenches_opening_one_embedded_store_at_once_all_work(tmp_path):
    """ChromaDB's registry of open stores is not safe to fill from two threads at once (a
    client can come up without its tenant, or on a system another thread then replaces), so
    several Workbenches opening one store together must not reach it at the same moment."""
    for trial in range(OPENING_TRIALS):
        settings = Settings(store=tmp_path / f"store-{trial}",
                            reranker_cache_dir=tmp_path / "none")
        failures = open_store_at_once(settings)
        assert not failures, f"trial {trial}:\n" + "\n".join(failures)
        fresh = Workbench(settings, embedder=FakeEmbedder())
        assert [(s.vendor_id, s.followup_responses) for s in fresh.status()] == [
            (f"vendor-{i}", 4) for i in range(OPENING_THREADS)]


# Eight dashboard sessions against one server while rounds are ingested ---------------------

LOAD_SESSIONS = 8
LOAD_ROUNDS = 12
FIRST_LOAD_ROUND = 6  # the sample's acme rounds are 1 to 5
LOAD_ANSWER = "Load round {n}: every storage tier is encrypted with AES-256, keys rotated."
ROUND_HEADER = re.compile(r"^\[Round (\d+)\]$", re.MULTILINE)


def load_round(n: int, criterion: str) -> dict[str, Any]:
    return payloads.round_payload(
        n, [payloads.response(f"Round {n}: {criterion}", LOAD_ANSWER.format(n=n), criterion)],
        timestamp="2024-03-01T09:00:00Z")


def shown_rounds(context: str) -> list[int]:
    """The rounds of the follow-up entry at the end of a context, in order."""
    return [int(n) for n in ROUND_HEADER.findall(context)]


def test_eight_dashboard_sessions_against_one_server_while_rounds_land(
        tmp_path, monkeypatch, one_server_for_two_sessions):
    """Eight sessions of one dashboard, on a store held by a ChromaDB server, visit every
    page while another client ingests twelve rounds answering the criterion half of them
    look at. Every page runs without an error, and every LLM context a session is shown
    holds the follow-ups of exactly one committed state: the latest rounds of the store as it
    was after some k of the twelve rounds, k between the rounds finished when the page began
    and those begun when it ended, each answer whole. The other vendor's sessions never see
    an acme round. The p95 page time is printed."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from core.ingest.criteria_lists import load_criteria
    from core.ingest.sample import ingest_sample
    from dashboard import resources
    from tests.conftest import SAMPLE_DATA
    from tests.dashboard.conftest import DASHBOARD

    server = ChromaServer(tmp_path / "server-data")
    try:
        settings = Settings(store=tmp_path / "unused", chroma_host="127.0.0.1",
                            chroma_port=server.port, reranker_cache_dir=tmp_path / "none",
                            lexical_dir=tmp_path / "lexical")
        bench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
        ingest_sample(bench, SAMPLE_DATA)
        writer = Workbench(settings.model_copy(update={"lexical_dir": tmp_path / "lex-w"}),
                           embedder=FakeEmbedder(), reranker=FakeReranker())
        monkeypatch.setattr(resources, "make_workbench", lambda: bench)
        st.cache_resource.clear()
        st.cache_data.clear()
        criteria = load_criteria(resources.CRITERIA_FILE)
        watched = criteria[0]
        strategies = ("precedence", "tiered", "hash_extraction", "hybrid")
        sessions = [Session("acme", watched, s) for s in strategies] + [
            Session("northwind", criteria[i % len(criteria)], s)
            for i, s in enumerate(strategies, start=1)]
        assert len(sessions) == LOAD_SESSIONS
        # The rounds each strategy shows after k of the rounds, read by the writer itself
        # once each round has landed (and before the first).
        expected: dict[int, dict[str, list[int]]] = {}

        def read_expected(k: int) -> None:
            expected[k] = {s: shown_rounds(writer.retrieve("acme", watched, s).context)
                           for s in strategies}

        read_expected(0)

        finished, begun = [0], [0]
        start = threading.Barrier(LOAD_SESSIONS + 1)
        problems: list[str] = []
        page_ms: list[float] = []
        shown_contexts: list[tuple[Session, str, int, int]] = []

        def ingest_rounds() -> None:
            try:
                start.wait()
                for k in range(LOAD_ROUNDS):
                    begun[0] = k + 1
                    writer.ingest_questionnaire(load_round(FIRST_LOAD_ROUND + k, watched))
                    read_expected(k + 1)
                    finished[0] = k + 1
            except Exception:
                problems.append(traceback.format_exc())

        def check_context(session: Session, context: str, low: int, high: int) -> list[str]:
            where = f"{session.vendor}/{session.strategy}"
            shown = shown_rounds(context)
            if session.vendor == "northwind":
                return [f"{where}: an acme round in the context"] if "Load round" in context \
                    else []
            states = [k for k in range(low, high + 1)
                      if k in expected and expected[k][session.strategy] == shown]
            if not states:
                return [f"{where}: rounds {shown} match no state between {low} and {high}"]
            for n in shown:
                if n >= FIRST_LOAD_ROUND and LOAD_ANSWER.format(n=n) not in context:
                    return [f"{where}: round {n}'s answer is not whole"]
            return []

        def visit(session: Session) -> None:
            found: list[str] = []
            try:
                at = AppTest.from_file(str(DASHBOARD / "app.py"), default_timeout=300)
                at.session_state["vendor"] = session.vendor
                at.session_state["criterion"] = session.criterion
                at.session_state["strategy"] = session.strategy
                start.wait()
                for number, path in enumerate(["views/overview.py", *PAGES]):
                    low = finished[0]
                    began = time.perf_counter()
                    (at.run() if number == 0 else at.switch_page(path).run())
                    page_ms.append((time.perf_counter() - began) * 1000.0)
                    high = begun[0]
                    if at.exception:
                        found.append(f"{session} on {path}: {[e.value for e in at.exception]}")
                    elif path == "views/context.py":
                        shown_contexts.append((session, at.code[0].value, low, high))
            except Exception:
                found.append(traceback.format_exc())
            problems.extend(found)

        run_sessions_together([threading.Thread(target=ingest_rounds)] + [
            threading.Thread(target=visit, args=(s,)) for s in sessions])
        for session, context, low, high in shown_contexts:
            problems += check_context(session, context, low, high)
        assert len(shown_contexts) == LOAD_SESSIONS
        assert not problems, "\n".join(problems)
        assert finished[0] == LOAD_ROUNDS
        ordered = sorted(page_ms)
        p95 = ordered[max(0, int(round(0.95 * len(ordered))) - 1)]
        print(f"{LOAD_SESSIONS} sessions, {len(page_ms)} page runs while {LOAD_ROUNDS} rounds "
              f"landed: p50 {ordered[len(ordered) // 2]:.0f} ms, p95 {p95:.0f} ms")
    finally:
        server.stop()
