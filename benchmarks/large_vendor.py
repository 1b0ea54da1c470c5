"""One vendor of many chunks, embedded and on a `chroma run` server, timed on the store's
work alone: the corpus of `evidence bench` is written through the library with the words
embedder of `core/bench/words.py` (no model time, so a 100,000-chunk store builds in under
two minutes), then every strategy and the two `ask` turns are timed as `evidence bench`
times them, the words embedder embedding each query. With no model time in the floor either,
the ratios to the floor are stricter than `evidence bench`'s (its floor holds the model's
query embedding, about 4.6 ms here). With `--model-queries` the configured embedding model
embeds the queries, as `evidence bench` does (the store is then written under the model's
name, so the vendor accepts its queries): the times are the store's work and the model's,
the ratios `evidence bench`'s; what the vector search finds is not what the model would find
in a store it wrote (every hash-linked answer is still found by its hash).

    python benchmarks/large_vendor.py --chunks 100000            # an embedded store
    python benchmarks/large_vendor.py --chunks 100000 --server   # on a `chroma run` server
    python benchmarks/large_vendor.py --chunks 100000 --server --model-queries

The server is set up as `benchmarks/programme.py` sets it up (lookup indexes, 256 open
vector indexes). It prints one JSON line and writes it to
`benchmarks/results/large-vendor-<kind>-<N>.json`."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from programme import Server  # noqa: E402

import core.bench.run as bench_run  # noqa: E402
from core.bench.corpus import generate_corpus  # noqa: E402
from core.bench.run import (  # noqa: E402
    DEFAULT_SEED,
    FLOOR,
    _time_ingest,
    keep_criteria_controls,
    retrieve_all,
)
from core.bench.words import HashedWordsEmbedder  # noqa: E402
from core.config import BENCHMARK_RESULTS_DIR, Settings  # noqa: E402
from core.retrieval.strategies import STRATEGIES  # noqa: E402
from core.workbench import Workbench  # noqa: E402

DIMENSIONS = 384  # as all-MiniLM-L6-v2's


def measure(chunks: int, queries: int, server: Server | None, root: Path,
            model_queries: bool) -> dict:
    settings_data = {"store": str(root / "store"), "lexical_dir": str(root / "lexical"),
                     "reranker_cache_dir": str(root / "no-models"),
                     "llm_base_url": None, "llm_model": None}
    if server is not None:
        settings_data.update({"chroma_host": "127.0.0.1", "chroma_port": server.port})
    settings = Settings(**settings_data)
    corpus = generate_corpus(chunks, queries, DEFAULT_SEED)
    folders = corpus.write_documents(root / "corpus")
    writer = HashedWordsEmbedder(DIMENSIONS)
    if model_queries:
        writer.name = settings.embedding_model  # the vendor then takes the model's queries
    workbench = Workbench(settings, embedder=writer)
    began = time.perf_counter()
    _time_ingest(workbench, corpus.vendor_id,
                 [(doc_type, number, folder) for (doc_type, number), folder in folders.items()],
                 corpus.payloads, 0, lambda *_: None)
    build_s = time.perf_counter() - began
    keep_criteria_controls(workbench, corpus.criteria_controls())  # as `evidence bench` does
    if not model_queries:
        # The retrieval embeds each query with the words embedder the store was written with.
        bench_run.runtime_embedder = lambda _settings: HashedWordsEmbedder(DIMENSIONS)
    measured = retrieve_all(settings.model_dump(mode="json"), corpus.vendor_id,
                            [[q.criterion, q.expected_ids(settings.max_followup_rounds)]
                             for q in corpus.queries], list(STRATEGIES), lambda *_: None)
    runs = measured["runs"]
    floor = statistics.median(run["ms"] for run in runs[FLOOR])
    result = {"benchmark": "large_vendor", "store": "server" if server else "embedded",
              "queries_embedded_by": settings.embedding_model if model_queries else writer.name,
              "chunks": chunks, "queries": queries, "build_s": round(build_s, 1),
              "floor_ms_p50": round(floor, 2), "retrieve_ms_p50": {}, "ratio_to_floor": {},
              "linked_in_context": {}}
    for name, timed in runs.items():
        if name == FLOOR:
            continue
        p50 = statistics.median(run["ms"] for run in timed)
        result["retrieve_ms_p50"][name] = round(p50, 2)
        result["ratio_to_floor"][name] = round(p50 / floor, 3)
        if timed and timed[0].get("expected") is not None:
            result["linked_in_context"][name] = (
                f"{sum(r['reached'] for r in timed)}/{sum(r['expected'] for r in timed)}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--server", action="store_true",
                        help="measure on a `chroma run` server instead of an embedded store")
    parser.add_argument("--model-queries", action="store_true",
                        help="embed the queries with the configured model, as evidence bench")
    args = parser.parse_args(argv)
    bench_run.check_bench_arguments(args.chunks, args.queries)
    root = Path(tempfile.mkdtemp(prefix="evidence-large-vendor-"))
    server = Server(root / "chroma", open_indexes=256) if args.server else None
    try:
        result = measure(args.chunks, args.queries, server, root, args.model_queries)
        if server is not None:
            result["server_rss_mb"] = round(server.rss_mb())
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
    result["date"] = time.strftime("%Y-%m-%d")
    line = json.dumps(result)
    print(line)
    model = "-model-queries" if args.model_queries else ""
    out = BENCHMARK_RESULTS_DIR / f"large-vendor-{result['store']}-{args.chunks}{model}.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
