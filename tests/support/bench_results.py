"""Recorded `evidence bench` results for tests of the Quality page: plausible numbers, fixed
so that a page or a screenshot shows the same thing every time."""

from __future__ import annotations

from pathlib import Path

from core.bench.run import BenchResult

STRATEGIES = ["semantic", "hash_extraction", "doc_boost", "tiered", "precedence"]
# Share of linked follow-ups in the context per corpus size: precedence stays at 100%.
SHARES = {1_000: [0.9, 1.0, 0.9, 1.0, 1.0], 10_000: [0.6, 0.9, 0.7, 0.95, 1.0],
          100_000: [0.3, 0.8, 0.4, 0.9, 1.0]}


def bench_result(chunks: int, shares: list[float], date: str = "2025-03-01T10:00:00+00:00",
                 floor: float = 12.0) -> BenchResult:
    """One run; the strategies' times grow with their index in STRATEGIES."""
    expected = 150
    return BenchResult(
        chunks=chunks, queries=50, followup_responses=200, seed=7,
        embedding_model="all-MiniLM-L6-v2",
        reranker={"name": "none", "ran": False, "reason": "no FlashRank model"},
        encode_per_s=400.0, encode_texts=chunks, ingest_per_s=300.0, ingest_texts=chunks + 200,
        ingest_vs_encode=0.75, floor_ms_p50=floor, floor_ms_p95=floor * 1.5,
        retrieve_ms_p50={s: 20.0 + i for i, s in enumerate(STRATEGIES)},
        retrieve_ms_p95={s: 30.0 + i for i, s in enumerate(STRATEGIES)},
        ratio_to_floor={s: round((20.0 + i) / floor, 3) for i, s in enumerate(STRATEGIES)},
        stage_ms_p50={s: {"load_model": 0.01, "embed_query": 8.0, "first_stage": 6.0 + i,
                          "select": 1.0, "total": 20.0 + i}
                      for i, s in enumerate(STRATEGIES)},
        stage_ms_p95={s: {"embed_query": 9.0, "total": 30.0 + i}
                      for i, s in enumerate(STRATEGIES)},
        linked_in_context=dict(zip(STRATEGIES, shares, strict=True)),
        linked_reached={s: round(share * expected)
                        for s, share in zip(STRATEGIES, shares, strict=True)},
        linked_expected=expected, peak_rss_mb=512.0, ingest_peak_rss_mb=900.0, store_mb=64.0,
        phase_s={"generate": 1.0}, date=date,
        machine={"cpus": 2, "memory_gb": 7.7, "processor": "x86_64", "python": "3.11.2",
                 "platform": "Linux-6.1", "torch": "2.5.1", "torch_threads": 2,
                 "chromadb": "1.0.0"},
    )


def write_results(folder: Path) -> None:
    """bench-1000.json, bench-10000.json and bench-100000.json, as `evidence bench` writes."""
    folder.mkdir(parents=True, exist_ok=True)
    for chunks, shares in SHARES.items():
        (folder / f"bench-{chunks}.json").write_text(
            bench_result(chunks, shares).model_dump_json())
