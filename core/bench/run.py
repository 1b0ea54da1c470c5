"""`evidence bench`: build a throw-away store from the generated corpus and measure, in one
run, raw encoding against ingest, every strategy and a conversation turn against the floor
(the query embedding plus one bare ChromaDB query).

sentence-transformers' own encode (torch) is the reference every run is measured against;
the configured embedding runtime's encode, the ingest and the retrieval run on that runtime.
The ingest and the retrieval each run in a fresh process, so that each one's peak memory is
what a process that only ingests (`evidence ingest`) or only retrieves (the dashboard,
`evidence retrieve`) needs, not what the step before it left behind.

The store holds what adds lookups to every retrieval (`core/bench/corpus.py`): documents in
versions, answers keyed by controls, and the criteria's controls kept as accepted mappings.
The result says how many of each the retrieval ran with, and per strategy how often a
context held an answer linked through a control and an excerpt of a superseded document."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from core.bench.corpus import DEFAULT_SEED, MAX_QUERIES, Corpus, generate_corpus
from core.config import Settings
from core.errors import EvidenceError, UserInputError
from core.outputs.quality import ids_in_context, percentile
from core.reports import Progress

if TYPE_CHECKING:
    from core.encoders.embedding import Embedder
    from core.workbench import Workbench

FLOOR = "floor"
# A conversation's first turn asking the criterion, and the turn after it that continues it;
# neither with a language model (the answer is the excerpts).
ASK, ASK_CONTINUATION = "ask", "ask_continuation"
CONTINUATION_QUESTION = "Can you elaborate on that?"
TORCH = "torch"
MIN_CHUNKS, MAX_CHUNKS = 100, 1_000_000
# The floor's window: the first-stage search of seed 000 asks for the 100 nearest.
FLOOR_N_RESULTS = 100
# Raw encode is timed on at most this many chunk texts: a throughput needs no more, and at
# 100k chunks encoding them all would double a run that the model's speed already bounds.
ENCODE_SAMPLE = 10_000
# Texts per timed encode call (and per progress step).
ENCODE_STEP = 2048
WARM_UP_CRITERION = "Does the vendor publish a security contact for vulnerability reports?"
# The name the criteria's controls are kept under, as `evidence criteria map` keeps a list's.
CRITERIA_LIST = "evidence bench criteria"


class BenchResult(BaseModel):
    """One `evidence bench` run; the JSON line holds every field."""

    chunks: int
    queries: int
    followup_responses: int
    seed: int
    # Corpus.criteria_digest(): equal at every size of one seed and query count.
    criteria_digest: str | None = None
    embedding_model: str
    reranker: dict[str, Any]
    # sentence-transformers' own encode (torch); encode_per_s_torch is the same figure.
    encode_per_s: float
    encode_per_s_torch: float | None = None
    # The configured embedding runtime, which ingest and retrieval ran on, and its encode.
    runtime: str | None = None
    encode_per_s_runtime: float | None = None
    encode_texts: int
    ingest_per_s: float
    ingest_texts: int
    ingest_vs_encode: float  # ingest_per_s over the torch encode_per_s
    floor_ms_p50: float
    floor_ms_p95: float
    # Per strategy, and for ASK and ASK_CONTINUATION (one `ask` turn each).
    retrieve_ms_p50: dict[str, float]
    retrieve_ms_p95: dict[str, float]
    # p50 of each query's retrieve time less its reranker model time, over the floor p50.
    ratio_to_floor: dict[str, float]
    stage_ms_p50: dict[str, dict[str, float]]
    stage_ms_p95: dict[str, dict[str, float]]
    # Per strategy and for ASK; a continuation asks no criterion, so it has no figure here.
    linked_in_context: dict[str, float]
    linked_reached: dict[str, int]
    linked_expected: int
    # What the store held that adds lookups to every retrieval (None in a result recorded
    # before the corpus held it): document versions a newer one superseded (in how many
    # series), answers keyed by a control, and criteria asked that are mapped to a control.
    superseded_documents: int | None = None
    versioned_series: int | None = None
    control_keyed_answers: int | None = None
    mapped_criteria: int | None = None
    # Per strategy and ask turn, over every criterion: the contexts that held an answer
    # linked through a mapped control; the excerpts of superseded documents in the contexts
    # (for a turn, its answer's and suggestions' excerpts), how many of those were labelled
    # superseded, and how many had an excerpt of their series' current version beside them
    # (which `precedence`, `hybrid` and `ask` bring in).
    control_linked_contexts: dict[str, int] = Field(default_factory=dict)
    superseded_excerpts: dict[str, int] = Field(default_factory=dict)
    superseded_marked: dict[str, int] = Field(default_factory=dict)
    superseded_with_current: dict[str, int] = Field(default_factory=dict)
    peak_rss_mb: float  # the retrieving process
    ingest_peak_rss_mb: float  # the ingesting process, from its model loaded to its commit
    store_mb: float
    phase_s: dict[str, float]
    machine: dict[str, Any]
    date: str


def check_bench_arguments(chunks: int, queries: int) -> None:
    if not MIN_CHUNKS <= chunks <= MAX_CHUNKS:
        raise UserInputError(
            f"--chunks must be between {MIN_CHUNKS:,} and {MAX_CHUNKS:,}, not {chunks:,}.")
    if not 1 <= queries <= MAX_QUERIES:
        raise UserInputError(
            f"--queries must be between 1 and {MAX_QUERIES} (the criteria the benchmark "
            f"vocabulary can ask), not {queries}.")


def run_bench(chunks: int = 10_000, queries: int = 50, *, seed: int = DEFAULT_SEED,
              settings: Settings | None = None, progress: Progress | None = None,
              workdir: Path | None = None) -> BenchResult:
    """Generate, encode, ingest and retrieve; the throw-away store is removed afterwards."""
    from core.encoders.embedding import SentenceTransformerEmbedder
    from core.retrieval.strategies import STRATEGIES

    check_bench_arguments(chunks, queries)
    base = settings or Settings()
    report = progress or (lambda stage, done, total: None)
    root = Path(tempfile.mkdtemp(prefix="evidence-bench-", dir=workdir))
    phases: dict[str, float] = {}
    try:
        # Everything the run writes stays under root, and no language model is asked.
        settings = base.model_copy(update={
            "store": root / "store", "chroma_host": None, "lexical_dir": None,
            "llm_base_url": None, "llm_model": None})
        started = time.perf_counter()
        corpus = generate_corpus(chunks, queries, seed)
        folders = corpus.write_documents(root / "corpus")
        texts = corpus.texts()
        phases["generate"] = time.perf_counter() - started
        report("generating", 1, 1)

        torch_embedder = SentenceTransformerEmbedder(
            settings.embedding_model, batch_size=settings.embed_batch_size,
            allow_downloads=settings.allow_model_downloads,
            download_timeout_s=settings.model_download_timeout_s)
        torch_embedder.embed(["warm up the model before anything is timed"])
        sample = encode_sample(texts)
        encode_s = _time_raw_encode(torch_embedder, sample, settings.embed_batch_size, report)
        phases["encode"] = encode_s
        del torch_embedder  # the model is the workers' to load from here on

        ingested = _run_worker({
            "kind": "ingest", "settings": settings.model_dump(mode="json"),
            "vendor_id": corpus.vendor_id,
            "folders": [[doc_type, round_number, str(folder)]
                        for (doc_type, round_number), folder in folders.items()],
            "payloads": corpus.payloads, "texts": len(texts), "sample": sample,
            "expected": [corpus.chunks, corpus.followup_responses],
            "criteria_controls": corpus.criteria_controls(),
        }, report)
        if ingested["encode_s"] is not None:
            phases["encode_runtime"] = ingested["encode_s"]
        phases["ingest"] = ingested["ingest_s"]

        started = time.perf_counter()
        measured = _run_worker({
            "kind": "retrieve", "settings": settings.model_dump(mode="json"),
            "vendor_id": corpus.vendor_id, "strategies": list(STRATEGIES),
            "queries": [[q.criterion, q.expected_ids(settings.max_followup_rounds)]
                        for q in corpus.queries],
        }, report)
        phases["retrieve"] = time.perf_counter() - started
        store_mb = sum(f.stat().st_size for f in (root / "store").rglob("*")
                       if f.is_file()) / 2**20
        return _summarise(corpus, len(sample), len(texts), encode_s, ingested, measured,
                          store_mb, phases)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def runtime_embedder(settings: Settings) -> Embedder:
    """The embedder of the configured runtime (`embedding_runtime`), the one the ingest and
    the retrieval run on."""
    from core.encoders.factory import configured_embedder

    return configured_embedder(settings)


def runtime_name(embedder: Embedder) -> str:
    """The runtime that embeds ("onnx", "torch"); loads the model to know."""
    return str(embedder.runtime or TORCH)


def encode_sample(texts: list[str]) -> list[str]:
    """The texts the raw encode is timed on: all of them up to ENCODE_SAMPLE, else an even
    spread (every k-th), which has the same mix of lengths and kinds as the whole."""
    if len(texts) <= ENCODE_SAMPLE:
        return texts
    step = len(texts) / ENCODE_SAMPLE
    return [texts[int(i * step)] for i in range(ENCODE_SAMPLE)]


def _time_raw_encode(embedder: Any, texts: list[str], batch_size: int,
                     report: Progress) -> float:
    """sentence-transformers' own encode on every text, the way the ingest embeds them."""
    model = embedder.model
    elapsed = 0.0
    for start in range(0, len(texts), ENCODE_STEP):
        part = texts[start : start + ENCODE_STEP]
        began = time.perf_counter()
        model.encode(part, batch_size=batch_size, normalize_embeddings=True,
                     convert_to_numpy=True, show_progress_bar=False)
        elapsed += time.perf_counter() - began
        report("torch encode", min(start + ENCODE_STEP, len(texts)), len(texts))
    return elapsed


def _time_runtime_encode(embedder: Embedder, texts: list[str], report: Progress) -> float:
    """The runtime embedder's own `embed` on every text, in the raw encode's slices."""
    elapsed = 0.0
    for start in range(0, len(texts), ENCODE_STEP):
        part = texts[start : start + ENCODE_STEP]
        began = time.perf_counter()
        embedder.embed(part)
        elapsed += time.perf_counter() - began
        report("runtime encode", min(start + ENCODE_STEP, len(texts)), len(texts))
    return elapsed


def _time_ingest(workbench: Workbench, vendor_id: str, folders: list[tuple[str, int | None, Path]],
                 payloads: list[dict], total: int, report: Progress) -> float:
    """The project's ingest: documents (read, chunk, embed, write, commit), then rounds."""
    done = 0

    def track(stage: str, finished: int, of: int) -> None:
        if stage == "embedding":
            report("ingesting", min(done + finished, total), total)

    began = time.perf_counter()
    for doc_type, round_number, folder in folders:
        result = workbench.ingest_documents(vendor_id, [folder], doc_type=doc_type,
                                            round_number=round_number, progress=track)
        done += result.chunks_written
    for payload in payloads:
        done += workbench.ingest_questionnaire(payload, progress=track).indexed_count
    elapsed = time.perf_counter() - began
    report("ingesting", total, total)
    return elapsed


def keep_criteria_controls(workbench: Workbench,
                           criteria_controls: Sequence[tuple[str, Sequence[str]]]) -> int:
    """Keep each criterion's controls in the store as accepted mappings, as `evidence
    criteria map` keeps those a criteria file's `controls` column gives: every retrieval of
    the criterion then links the answers keyed by them. The criteria mapped."""
    from core.controls.mappings import CriterionMapping, parse_controls
    from core.hashing import canonical_criterion_hash

    mappings = [CriterionMapping(criterion, canonical_criterion_hash(criterion), decided=True,
                                 accepted=list(parse_controls(";".join(controls),
                                                              criterion[:60])))
                for criterion, controls in criteria_controls if controls]
    if mappings:
        workbench.controls.keep(CRITERIA_LIST, mappings)
    return len(mappings)


def store_links(workbench: Workbench, vendor_id: str, criteria: list[str]
                ) -> tuple[dict[str, int], frozenset[str]]:
    """What the vendor's store holds that adds lookups to a retrieval: its superseded
    document versions and the series they are in, its answers keyed by a known framework's
    control, and how many of the criteria are mapped to a control; with the sources of the
    superseded versions."""
    from core.retrieval.links import AnswerIndex
    from core.retrieval.versions import read_timeline
    from core.store import followup_link

    vendor = workbench.store.open_vendor(vendor_id)
    versions = read_timeline(workbench.settings, vendor).values()
    superseded = frozenset(v.source for v in versions if not v.current)
    series = {v.series for v in versions if not v.current}
    answers = AnswerIndex({i: followup_link(m) for i, m in vendor.links().items()})
    mapped = sum(bool(workbench.controls.for_query(c, None, proposable=False))
                 for c in criteria)
    return {"superseded_documents": len(superseded), "versioned_series": len(series),
            "control_keyed_answers": len(answers.control_of), "mapped_criteria": mapped
            }, superseded


def links_shown(followups: list[Any], excerpts: list[Any], superseded: frozenset[str]
                ) -> dict[str, Any]:
    """What one context shows of the links: whether an answer linked through a control is
    among its follow-ups; its excerpts of superseded documents, those of them labelled
    superseded, and those with an excerpt of their series' current version beside them."""
    old = [e for e in excerpts if e.source in superseded]
    sources = {e.source for e in excerpts}
    return {"control_linked": any(f.tier == "control" for f in followups),
            "superseded": len(old), "marked": sum(e.later_version is not None for e in old),
            "with_current": sum(e.later_version is not None and e.later_version.source in sources
                                for e in old)}


def _peak_rss_mb() -> float:
    """This process's peak resident memory. Linux's VmHWM starts afresh when a process
    execs; ru_maxrss would also count the memory of the parent this process was forked from."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _restart_peak_rss() -> None:
    """Start the peak anew from the memory in use now (Linux: /proc/self/clear_refs), so
    that what follows is measured with the model loaded but not what loading it cost once
    (an export, say). Where that cannot be done the peak keeps counting from the start."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _run_worker(job: dict[str, Any], report: Progress) -> dict[str, Any]:
    """Run `python -m core.bench.worker` on the store: the job goes in on stdin as JSON,
    progress and the result come back as JSON lines on stdout."""
    with tempfile.TemporaryFile("w+") as errors:
        worker = subprocess.Popen([sys.executable, "-m", "core.bench.worker"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                                  text=True, cwd=Path(__file__).resolve().parents[2])
        try:
            worker.stdin.write(json.dumps(job))
            worker.stdin.close()
            result = None
            for line in worker.stdout:
                message = json.loads(line)
                if message["kind"] == "progress":
                    report(message["stage"], message["done"], message["total"])
                elif message["kind"] == "error":
                    raise EvidenceError(f"The {job['kind']} measurement failed: "
                                        f"{message['error']}")
                else:
                    result = message["result"]
            code = worker.wait()
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        if result is None:
            errors.seek(0)
            last = (errors.read().strip().splitlines() or ["no output"])[-1]
            raise EvidenceError(f"The {job['kind']} measurement process ended with exit code "
                                f"{code} before reporting: {last[:200]}")
        return result


def ingest_all(settings_data: dict[str, Any], vendor_id: str,
               folders: list[tuple[str, int | None, str]], payloads: list[dict], texts: int,
               sample: list[str], expected: tuple[int, int], progress: Progress,
               criteria_controls: Sequence[tuple[str, list[str]]] = ()) -> dict[str, Any]:
    """Time the runtime's encode (unless it is torch, which the parent timed) and the ingest
    on the configured runtime, then keep the criteria's controls (untimed); runs in the
    worker process."""
    from core.ingest.documents import make_splitter
    from core.workbench import Workbench

    settings = Settings(**settings_data)
    embedder = runtime_embedder(settings)
    embedder.embed(["warm up the model before anything is timed"])
    runtime = runtime_name(embedder)
    encode_s = _time_runtime_encode(embedder, sample, progress) if runtime != TORCH else None

    workbench = Workbench(settings, embedder=embedder)
    # One-off costs of a first ingest (importing ChromaDB and the splitter, opening the
    # store) are paid before the clock starts: the figure is the steady throughput.
    workbench.store.client  # noqa: B018
    make_splitter(settings.chunk_size, settings.chunk_overlap, ".txt")
    _restart_peak_rss()
    ingest_s = _time_ingest(workbench, vendor_id,
                            [(doc_type, round_number, Path(folder))
                             for doc_type, round_number, folder in folders],
                            payloads, texts, progress)
    peak = _peak_rss_mb()
    [status] = workbench.status(vendor_id)
    if (status.chunks, status.followup_responses) != tuple(expected):
        raise EvidenceError(
            f"The benchmark store holds {status.chunks} chunks and "
            f"{status.followup_responses} responses, not the {expected[0]} and "
            f"{expected[1]} generated.")
    keep_criteria_controls(workbench, criteria_controls)
    return {"ingest_s": ingest_s, "encode_s": encode_s, "runtime": runtime,
            "embedding_model": embedder.name, "peak_rss_mb": peak}


def retrieve_all(settings_data: dict[str, Any], vendor_id: str,
                 queries: list[tuple[str, list[str]]], strategies: list[str],
                 progress: Progress) -> dict[str, Any]:
    """Time the floor, every strategy and the two `ask` turns on each query; runs in the
    worker process."""
    from core.workbench import Workbench

    settings = Settings(**settings_data)
    workbench = Workbench(settings, embedder=runtime_embedder(settings))
    vendor = workbench.store.open_vendor(vendor_id)
    links, superseded = store_links(workbench, vendor_id, [c for c, _ in queries])

    def floor(criterion: str) -> float:
        began = time.perf_counter()
        vector = workbench.embedder.embed([criterion])[0]
        vendor.bare_query(vector, FLOOR_N_RESULTS)
        return (time.perf_counter() - began) * 1000.0

    # Model load, index load and first-call costs are paid here, outside every figure.
    floor(WARM_UP_CRITERION)
    for name in strategies:
        workbench.retrieve(vendor_id, WARM_UP_CRITERION, name)
    _ask_turns(workbench, vendor_id, WARM_UP_CRITERION)
    reranked = workbench.reranker()[1].ran

    runs: dict[str, list[dict[str, Any]]] = {
        name: [] for name in [FLOOR, *strategies, ASK, ASK_CONTINUATION]}
    reranker: dict[str, Any] = {}
    order = [FLOOR, *strategies, ASK]
    for index, (criterion, expected) in enumerate(queries):
        turn = index % len(order)  # rotate, so no strategy always runs on warmer caches
        for name in order[turn:] + order[:turn]:
            if name == FLOOR:
                runs[FLOOR].append({"ms": floor(criterion)})
            elif name == ASK:
                first, continued = _ask_turns(workbench, vendor_id, criterion)
                runs[ASK].append(_ask_run(first, expected, reranked, superseded))
                runs[ASK_CONTINUATION].append(_ask_run(continued, None, reranked, superseded))
            else:
                workbench.forget_query_embeddings()  # every strategy embeds the query itself
                began = time.perf_counter()
                trace = workbench.retrieve(vendor_id, criterion, name)
                elapsed = (time.perf_counter() - began) * 1000.0
                in_context = ids_in_context(trace)
                reranker = trace.reranker.model_dump()
                runs[name].append({
                    "ms": elapsed, "stages": trace.timings_ms,
                    "reached": len(set(expected) & in_context), "expected": len(expected),
                    "rerank_model_ms": trace.timings_ms.get("rerank", 0.0)
                    if trace.reranker.ran else 0.0,
                    **links_shown(trace.followups, trace.evidence, superseded),
                })
        progress("retrieving", index + 1, len(queries))
    return {"runs": runs, "reranker": reranker, "peak_rss_mb": _peak_rss_mb(),
            "store": links}


def _ask_turns(workbench: Workbench, vendor_id: str, criterion: str
               ) -> tuple[tuple[Any, float], tuple[Any, float]]:
    """A new conversation asking the criterion, then CONTINUATION_QUESTION in it: each turn
    from a cold query-embedding cache and timed whole, storing the turn included, as
    `evidence ask` runs it."""
    turns = []
    conversation_id = None
    for question in (criterion, CONTINUATION_QUESTION):
        workbench.forget_query_embeddings()
        began = time.perf_counter()
        turn = workbench.ask(vendor_id, question, conversation_id)
        turns.append((turn, (time.perf_counter() - began) * 1000.0))
        conversation_id = turn.conversation_id
    return turns[0], turns[1]


def _ask_run(timed: tuple[Any, float], expected: list[str] | None,
             reranked: bool, superseded: frozenset[str] = frozenset()) -> dict[str, Any]:
    """One ask turn as a run: its stages with the turn's storing as `save`, what it shows
    of the links, and, for a turn that asks the criterion, the expected follow-ups its
    answer cites."""
    turn, elapsed = timed
    stages = {**turn.timings_ms, "save": max(0.0, elapsed - turn.timings_ms.get("total", 0.0))}
    run: dict[str, Any] = {
        "ms": elapsed, "stages": stages,
        "rerank_model_ms": turn.timings_ms.get("rerank", 0.0) if reranked else 0.0,
        **links_shown(turn.followups, [*turn.answer_evidence, *turn.suggestion_evidence],
                      superseded)}
    if expected is not None:
        run["reached"] = len(set(expected) & set(turn.cited_ids))
        run["expected"] = len(expected)
    return run


def _summarise(corpus: Corpus, encoded: int, texts: int, encode_s: float,
               ingested: dict[str, Any], measured: dict[str, Any], store_mb: float,
               phases: dict[str, float]) -> BenchResult:
    runs = measured["runs"]
    floor_ms = [r["ms"] for r in runs[FLOOR]]
    floor_p50 = percentile(floor_ms, 50)
    names = [name for name in runs if name != FLOOR]
    p50 = {s: round(percentile([r["ms"] for r in runs[s]], 50), 2) for s in names}
    p95 = {s: round(percentile([r["ms"] for r in runs[s]], 95), 2) for s in names}
    ratio = {s: round(percentile([r["ms"] - r["rerank_model_ms"] for r in runs[s]], 50)
                      / floor_p50, 3) for s in names}
    stage_p50: dict[str, dict[str, float]] = {}
    stage_p95: dict[str, dict[str, float]] = {}
    for s in names:
        stages = list(dict.fromkeys(k for r in runs[s] for k in r["stages"]))
        stage_p50[s] = {k: round(percentile([r["stages"].get(k, 0.0) for r in runs[s]], 50), 3)
                        for k in stages}
        stage_p95[s] = {k: round(percentile([r["stages"].get(k, 0.0) for r in runs[s]], 95), 3)
                        for k in stages}
    linked = [s for s in names if all("reached" in r for r in runs[s])]
    expected = sum(r["expected"] for r in runs[linked[0]])
    reached = {s: sum(r["reached"] for r in runs[s]) for s in linked}
    encode_rate = encoded / encode_s
    runtime_rate = (encoded / ingested["encode_s"] if ingested["encode_s"] is not None
                    else encode_rate)
    ingest_rate = texts / ingested["ingest_s"]
    store = measured.get("store") or {}
    return BenchResult(
        chunks=corpus.chunks, queries=len(corpus.queries),
        followup_responses=corpus.followup_responses, seed=corpus.seed,
        criteria_digest=corpus.criteria_digest(), embedding_model=ingested["embedding_model"],
        reranker=measured["reranker"],
        encode_per_s=round(encode_rate, 1), encode_per_s_torch=round(encode_rate, 1),
        runtime=ingested["runtime"], encode_per_s_runtime=round(runtime_rate, 1),
        encode_texts=encoded, ingest_texts=texts, ingest_per_s=round(ingest_rate, 1),
        ingest_vs_encode=round(ingest_rate / encode_rate, 3),
        floor_ms_p50=round(floor_p50, 2), floor_ms_p95=round(percentile(floor_ms, 95), 2),
        retrieve_ms_p50=p50, retrieve_ms_p95=p95, ratio_to_floor=ratio,
        stage_ms_p50=stage_p50, stage_ms_p95=stage_p95,
        linked_in_context={s: round(reached[s] / expected, 4) if expected else 1.0
                           for s in linked},
        linked_reached=reached, linked_expected=expected,
        superseded_documents=store.get("superseded_documents"),
        versioned_series=store.get("versioned_series"),
        control_keyed_answers=store.get("control_keyed_answers"),
        mapped_criteria=store.get("mapped_criteria"),
        control_linked_contexts={s: sum(bool(r.get("control_linked")) for r in runs[s])
                                 for s in names},
        superseded_excerpts={s: sum(r.get("superseded", 0) for r in runs[s]) for s in names},
        superseded_marked={s: sum(r.get("marked", 0) for r in runs[s]) for s in names},
        superseded_with_current={s: sum(r.get("with_current", 0) for r in runs[s])
                                 for s in names},
        peak_rss_mb=round(measured["peak_rss_mb"], 1),
        ingest_peak_rss_mb=round(ingested["peak_rss_mb"], 1),
        store_mb=round(store_mb, 1), phase_s={k: round(v, 1) for k, v in phases.items()},
        machine=machine_description(), date=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def machine_description() -> dict[str, Any]:
    import torch

    from core.store import chromadb_version

    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpus": os.cpu_count(), "memory_gb": round(memory_gb, 1),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(), "platform": platform.platform(terse=True),
        "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
        "chromadb": chromadb_version(),
    }


def format_table(result: BenchResult) -> str:
    """The result for people: the run, then one row per strategy and ask turn against the
    floor."""
    r = result
    reranker = f"ran: {r.reranker.get('name')}" if r.reranker.get("ran") else "none ran"
    torch_rate = r.encode_per_s_torch if r.encode_per_s_torch is not None else r.encode_per_s
    runs_on = "the configured runtime, which ingest and retrieval ran on"
    lines = [
        f"evidence bench: {r.chunks:,} chunks, {r.followup_responses} follow-up responses, "
        f"{r.queries} criteria (seed {r.seed}), {r.embedding_model}",
        f"  {'encode (torch)':<16}{torch_rate:8.1f} texts/s  (sentence-transformers' own encode"
        + (f"; {runs_on})" if r.runtime == TORCH else ")"),
    ]
    if r.runtime not in (None, TORCH) and r.encode_per_s_runtime is not None:
        lines.append(f"  {f'encode ({r.runtime})':<16}{r.encode_per_s_runtime:8.1f} texts/s  "
                     f"({runs_on})")
    lines += [
        f"  {'ingest':<16}{r.ingest_per_s:8.1f} texts/s  ({r.ingest_vs_encode:.2f}x the torch "
        "encode)",
        f"  {'floor':<16}{r.floor_ms_p50:8.1f} ms p50  {r.floor_ms_p95:8.1f} ms p95  "
        f"(query embedding + one collection.query(n_results={FLOOR_N_RESULTS}))",
        f"  {'reranker':<16}{reranker}",
        "",
        f"  {'strategy':<18}{'p50 ms':>9}{'p95 ms':>9}{'x floor':>9}   "
        "linked follow-ups in context",
    ]
    for name in r.retrieve_ms_p50:
        linked = (f"{r.linked_reached[name]}/{r.linked_expected} "
                  f"({r.linked_in_context[name]:.0%})" if name in r.linked_reached else "-")
        lines.append(
            f"  {name:<18}{r.retrieve_ms_p50[name]:9.1f}{r.retrieve_ms_p95[name]:9.1f}"
            f"{r.ratio_to_floor[name]:9.2f}   {linked}")
    if ASK in r.retrieve_ms_p50:
        lines += [
            "",
            f"  {ASK}: a new conversation's first turn asking the criterion, no language "
            "model, stored;",
            f"  {ASK_CONTINUATION}: \"{CONTINUATION_QUESTION}\" next in that conversation.",
        ]
    if r.superseded_documents is not None:
        lines += [
            "",
            f"  {'in the store':<16}{r.superseded_documents} superseded documents in "
            f"{r.versioned_series} series, {r.control_keyed_answers} answers keyed by a "
            "control,",
            f"  {'':<16}{r.mapped_criteria} of the {r.queries} criteria mapped to controls",
            "",
            f"  {'strategy':<18}{'control-linked':>16}{'superseded':>12}{'marked':>8}"
            f"{'with current':>14}",
        ]
        for name in r.retrieve_ms_p50:
            linked = f"{r.control_linked_contexts.get(name, 0)}/{r.queries}"
            lines.append(f"  {name:<18}{linked:>16}{r.superseded_excerpts.get(name, 0):>12}"
                         f"{r.superseded_marked.get(name, 0):>8}"
                         f"{r.superseded_with_current.get(name, 0):>14}")
        lines += [
            "",
            "  control-linked: contexts holding an answer linked through a mapped control;",
            "  superseded: excerpts of superseded documents in the contexts, marked: those",
            "  labelled superseded, with current: those with their series' current version",
            "  in the same context.",
        ]
    lines += [
        "",
        f"  {'peak memory':<16}{r.peak_rss_mb:.0f} MB retrieving, {r.ingest_peak_rss_mb:.0f} MB "
        f"ingesting (each a fresh process); store {r.store_mb:.0f} MB on disk",
    ]
    return "\n".join(lines)
