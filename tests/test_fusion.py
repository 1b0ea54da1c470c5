"""Reciprocal rank fusion, the hybrid first stage, and the `hybrid` strategy's trace."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from core.config import Settings
from core.retrieval.fusion import (
    HybridSearch,
    IndexedVectorSearch,
    ranks_of,
    reciprocal_rank_fusion,
)
from core.retrieval.run import StrategyRunner
from core.retrieval.source import Neighbour, Query, StoredChunk
from core.retrieval.strategies import DEFAULT_STRATEGY, STRATEGIES
from core.workbench import Workbench
from tests.fakes import FakeEmbedder, FakeReranker

PARTS = ("vector_rank", "vector_score", "lexical_rank", "lexical_score", "fused_score")
CVE_CRITERION = "Is the vendor patched against CVE-2024-3094 in its build systems?"


# reciprocal_rank_fusion ---------------------------------------------------------------------

def test_rrf_adds_one_over_k_plus_rank_for_each_list():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]], k=60)
    assert list(fused.items()) == [
        ("a", 1 / (60 + 1) + 1 / (60 + 2)),
        ("c", 1 / (60 + 3) + 1 / (60 + 1)),
        ("b", 1 / (60 + 2)),
    ]


def test_rrf_of_rank_one_and_rank_three():
    fused = reciprocal_rank_fusion([["x", "y", "z"], ["z", "x"]], 60)
    assert fused == {"x": 1 / (60 + 1) + 1 / (60 + 2), "z": 1 / (60 + 3) + 1 / (60 + 1),
                     "y": 1 / (60 + 2)}


def test_rrf_best_possible_score_with_two_lists_is_two_over_61():
    fused = reciprocal_rank_fusion([["a"], ["a"]], k=60)
    assert fused == {"a": 2 / 61}
    assert fused["a"] == pytest.approx(0.0328, abs=1e-4)


def test_rrf_honours_k():
    fused = reciprocal_rank_fusion([["a", "b"], ["b"]], k=2)
    assert list(fused.items()) == [("b", 1 / 4 + 1 / 3), ("a", 1 / 3)]
    assert list(reciprocal_rank_fusion([["a", "b"]], k=0).values()) == [1.0, 0.5]


def test_rrf_ties_go_to_the_better_single_rank_then_to_the_first_list():
    fused = reciprocal_rank_fusion([["a", "b"], ["c", "d"]], k=60)
    assert list(fused) == ["a", "c", "b", "d"]
    assert fused["a"] == fused["c"]
    # k=0: p (ranks 6 and 2) and q (3 and 3) both score 2/3; p's rank 2 is the better one,
    # though q comes first in the first list
    fused = reciprocal_rank_fusion([["x1", "x2", "q", "x4", "x5", "p"], ["w1", "p", "q"]], 0)
    assert list(fused)[:4] == ["x1", "w1", "p", "q"]
    assert fused["p"] == fused["q"] == 2 / 3


def test_rrf_orders_by_the_sum_not_by_any_single_rank():
    fused = reciprocal_rank_fusion([["x", "p", "q", "y"], ["q", "p", "y", "x"]], k=60)
    assert list(fused) == ["q", "p", "x", "y"]  # 1/63+1/61 > 2/62 > 1/61+1/64


def test_rrf_counts_a_repeated_id_at_its_best_rank_only():
    assert reciprocal_rank_fusion([["a", "b", "a"]], k=60) == {"a": 1 / 61, "b": 1 / 62}
    assert ranks_of(["a", "b", "a"]) == {"a": 1, "b": 2}


def test_rrf_of_nothing_is_nothing():
    assert reciprocal_rank_fusion([], k=60) == {}
    assert reciprocal_rank_fusion([[], []], k=60) == {}


@pytest.mark.parametrize("k", [-1, 1.5, "60", True, None])
def test_rrf_refuses_a_bad_k(k):
    with pytest.raises(ValueError, match="k must be"):
        reciprocal_rank_fusion([["a"]], k=k)


def test_rrf_is_written_once():
    """Every other module fuses through reciprocal_rank_fusion."""
    root = Path(__file__).resolve().parents[1]
    writers = [p.relative_to(root).as_posix() for folder in ("core", "dashboard")
               for p in (root / folder).rglob("*.py")
               if "def reciprocal_rank_fusion" in p.read_text(encoding="utf-8")]
    assert writers == ["core/retrieval/fusion.py"]


# HybridSearch on listed sources ---------------------------------------------------------------

class ListedSource:
    """A candidate source that answers a fixed list and records what it was asked."""

    def __init__(self, name: str, hits: list[Neighbour]) -> None:
        self.name = name
        self.hits = hits
        self.calls: list[tuple[int, dict | None]] = []

    def nearest(self, query, n, *, where=None):
        """Up to n committed hits, with the uncommitted ones ranked among them."""
        self.calls.append((n, where))
        found, committed = [], 0
        for hit in self.hits:
            if committed == n:
                break
            found.append(hit)
            committed += hit.committed
        return found


def neighbour(record_id: str, score: float, committed: bool = True) -> Neighbour:
    return Neighbour(StoredChunk(record_id, f"text of {record_id}", {"source": record_id}),
                     score, committed)


QUERY = Query(text="anything", criterion_hash="0" * 16, embedding=np.zeros(4, np.float32))


def test_hybrid_keeps_every_part_of_each_score():
    vector = ListedSource("vector", [neighbour("a", 0.9), neighbour("b", 0.8),
                                     neighbour("c", 0.7)])
    lexical = ListedSource("lexical", [neighbour("c", 12.5), neighbour("d", 7.0)])
    found = HybridSearch(vector, lexical, lexical_n=50, k=60).nearest(QUERY, 3)

    assert [n.chunk.id for n in found] == ["c", "a", "b"]
    c, a, b = found
    assert (c.vector_rank, c.vector_score, c.lexical_rank, c.lexical_score) == (3, 0.7, 1, 12.5)
    assert c.fused_score == c.score == 1 / 63 + 1 / 61
    assert (a.vector_rank, a.vector_score, a.lexical_rank, a.lexical_score) == (1, 0.9, None,
                                                                                  None)
    assert a.fused_score == 1 / 61
    assert b.score == 1 / 62
    assert all(n.committed for n in found)
    assert vector.calls == [(3, None)] and lexical.calls == [(50, None)]


def test_hybrid_returns_a_chunk_only_the_lexical_list_holds():
    vector = ListedSource("vector", [neighbour("a", 0.9)])
    lexical = ListedSource("lexical", [neighbour("d", 3.0)])
    [a, d] = HybridSearch(vector, lexical, lexical_n=5, k=60).nearest(QUERY, 5)
    assert (d.chunk.id, d.vector_rank, d.vector_score, d.lexical_rank) == ("d", None, None, 1)
    assert d.chunk.text == "text of d"
    assert a.score == d.score  # rank 1 of either list; the vector list is read first


def test_hybrid_ranks_committed_records_only_and_passes_unfinished_ones_on():
    vector = ListedSource("vector", [neighbour("new-1", 0.99, committed=False),
                                     neighbour("a", 0.9), neighbour("b", 0.8)])
    lexical = ListedSource("lexical", [neighbour("b", 4.0)])
    found = HybridSearch(vector, lexical, lexical_n=5, k=60).nearest(QUERY, 2)
    assert [(n.chunk.id, n.committed) for n in found] == [("b", True), ("a", True),
                                                         ("new-1", False)]
    assert found[1].vector_rank == 1  # the unfinished record takes no rank
    assert found[0].score == 1 / 62 + 1 / 61


def test_hybrid_passes_the_filter_to_both_sources():
    vector, lexical = ListedSource("vector", []), ListedSource("lexical", [])
    where = {"criterion_question_hash": "abc"}
    assert HybridSearch(vector, lexical, lexical_n=7, k=60).nearest(QUERY, 3, where=where) == []
    assert vector.calls == [(3, where)] and lexical.calls == [(7, where)]


class FailingSource(ListedSource):
    """A source whose search fails, after `delay` seconds (and, with `after`, only once that
    event is set)."""

    def __init__(self, name: str, error: Exception, delay: float = 0.0,
                 after: threading.Event | None = None) -> None:
        super().__init__(name, [])
        self.error, self.delay, self.after = error, delay, after
        self.started = threading.Event()

    def nearest(self, query, n, *, where=None):
        self.started.set()
        if self.after is not None:
            self.after.wait()
        time.sleep(self.delay)
        super().nearest(query, n, where=where)
        raise self.error


def test_hybrid_raises_the_vector_searchs_error_once_the_lexical_search_ended():
    lexical = FailingSource("lexical", RuntimeError("lexical failed"), delay=0.2)
    # The vector search fails once the lexical one has started (one not yet started is
    # cancelled instead): the hybrid must wait for it to end before raising.
    vector = FailingSource("vector", RuntimeError("vector failed"), after=lexical.started)
    with pytest.raises(RuntimeError, match="vector failed"):
        HybridSearch(vector, lexical, lexical_n=5, k=60).nearest(QUERY, 3)
    assert lexical.calls == [(5, None)]  # it had run to its end before the error came out


def test_hybrid_raises_the_lexical_searchs_error():
    vector = ListedSource("vector", [neighbour("a", 0.9)])
    with pytest.raises(RuntimeError, match="lexical failed"):
        HybridSearch(vector, FailingSource("lexical", RuntimeError("lexical failed")),
                     lexical_n=5, k=60).nearest(QUERY, 3)


def test_hybrid_prefers_the_stores_copy_of_a_chunk_both_lists_hold():
    stored = Neighbour(StoredChunk("a", "current text", {"v": 2}), 0.5, True)
    copied = Neighbour(StoredChunk("a", "indexed text", {"v": 1}), 2.0, True)
    [found] = HybridSearch(ListedSource("vector", [stored]), ListedSource("lexical", [copied]),
                           lexical_n=5, k=60).nearest(QUERY, 1)
    assert found.chunk.text == "current text"


@pytest.mark.parametrize(("lexical_n", "k"), [(0, 60), (5, -1)])
def test_hybrid_refuses_bad_settings(lexical_n, k):
    with pytest.raises(ValueError, match="lexical_n|k must"):
        HybridSearch(ListedSource("v", []), ListedSource("l", []), lexical_n=lexical_n, k=k)


# The strategy on a real store -----------------------------------------------------------------

FILLER_WORDS = "ledger orbit canvas meadow signal harbor quartz timber velvet summit".split()


def write_cve_corpus(folder: Path) -> None:
    """Thirty policy notes close to the criterion in words, and one advisory that names the
    CVE among sixty unrelated words: a bag-of-words vector search ranks it far down."""
    folder.mkdir(parents=True)
    for i in range(30):
        extra = " ".join(FILLER_WORDS[(i + j) % len(FILLER_WORDS)] for j in range(3))
        (folder / f"patching_{i:02d}.md").write_text(
            f"The vendor patched its build systems against supply chain attacks ({extra} {i}).",
            encoding="utf-8")
    unrelated = " ".join(f"word{j}" for j in range(60))
    (folder / "advisory.md").write_text(
        f"Advisory: CVE-2024-3094 was fixed in the xz release. {unrelated}.", encoding="utf-8")


@pytest.fixture
def cve_workbench(tmp_path) -> Workbench:
    settings = Settings(store=tmp_path / "store", reranker_cache_dir=tmp_path / "no-models",
                        top_first_stage_n=10, lexical_first_stage_n=10)
    bench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    write_cve_corpus(tmp_path / "docs")
    bench.ingest_documents("acme", [tmp_path / "docs"])
    return bench


def advisory(trace) -> list:
    return [c for c in trace.first_stage if c.source == "advisory.md"]


def test_a_term_only_the_lexical_index_finds_reaches_the_hybrid_first_stage(cve_workbench):
    vector_only = cve_workbench.retrieve("acme", CVE_CRITERION, "precedence")
    assert len(vector_only.first_stage) == 10
    assert advisory(vector_only) == []  # the vector search alone misses it

    hybrid = cve_workbench.retrieve("acme", CVE_CRITERION, "hybrid")
    [found] = advisory(hybrid)
    assert (found.vector_rank, found.vector_score, found.lexical_rank) == (None, None, 1)
    assert found.lexical_score > 0
    assert found.fused_score == found.first_stage_score == 1 / 61
    assert len(hybrid.first_stage) == 10


def test_the_hybrid_trace_json_carries_every_part(cve_workbench):
    hybrid = cve_workbench.retrieve("acme", CVE_CRITERION, "hybrid")
    cosines = {c.id: c.first_stage_score
               for c in cve_workbench.retrieve("acme", CVE_CRITERION, "precedence").first_stage}
    dumped = json.loads(json.dumps(hybrid.to_json_dict()))
    assert dumped["strategy"] == "hybrid"
    assert "lexical_sync" in dumped["timings_ms"]
    first_stage = dumped["first_stage"]
    assert [c["first_stage_rank"] for c in first_stage] == list(range(1, 11))
    scores = [c["first_stage_score"] for c in first_stage]
    assert scores == sorted(scores, reverse=True)
    in_both = 0
    for candidate in first_stage:
        assert set(PARTS) <= candidate.keys()
        assert candidate["fused_score"] == candidate["first_stage_score"]
        expected = sum(1 / (60 + candidate[rank]) for rank in ("vector_rank", "lexical_rank")
                       if candidate[rank] is not None)
        assert candidate["fused_score"] == pytest.approx(expected, rel=1e-12)
        if candidate["vector_rank"] is not None:
            # the cosine is kept beside the fused score, as the vector search gave it
            assert candidate["vector_score"] == pytest.approx(cosines[candidate["id"]])
            in_both += candidate["lexical_rank"] is not None
    assert in_both > 0
    for candidate in dumped["evidence"] + dumped["reranked"]:
        assert set(PARTS) <= candidate.keys() and candidate["fused_score"] is not None


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "hybrid"])
def test_other_strategies_leave_the_parts_empty(cve_workbench, strategy):
    dumped = cve_workbench.retrieve("acme", CVE_CRITERION, strategy).to_json_dict()
    # Only precedence reads its vector hits from the lexical index, and only once a hybrid
    # search or an ask has synced it: a retrieval of precedence writes no index. The seeds'
    # own strategies read ChromaDB's records, as designed.
    assert ("lexical_sync" in dumped["timings_ms"]) == (strategy == "precedence")
    for candidate in dumped["first_stage"] + dumped["evidence"] + dumped["reranked"]:
        assert all(candidate[part] is None for part in PARTS), candidate["id"]
    assert not (cve_workbench.settings.store / "lexical").exists()


def test_hybrid_is_registered_after_precedence_and_precedence_stays_the_default():
    names = list(STRATEGIES)
    assert names.index("hybrid") == names.index("precedence") + 1
    assert DEFAULT_STRATEGY == "precedence"
    assert STRATEGIES["hybrid"].search == "hybrid"
    assert STRATEGIES["hybrid"].run is STRATEGIES["precedence"].run
    assert STRATEGIES["precedence"].search == "vector_indexed"
    assert all(s.search == "vector" for name, s in STRATEGIES.items()
               if name not in ("hybrid", "precedence"))


def test_the_command_line_prints_the_hybrid_parts(cve_workbench, monkeypatch, capsys):
    from core.cli import main

    monkeypatch.setattr("core.workbench.SentenceTransformerEmbedder",
                        lambda *args, **kwargs: FakeEmbedder())
    monkeypatch.setenv("EVIDENCE_STORE", str(cve_workbench.settings.store))
    monkeypatch.setenv("EVIDENCE_TOP_FIRST_STAGE_N", "10")
    monkeypatch.setenv("EVIDENCE_LEXICAL_FIRST_STAGE_N", "10")
    assert main(["retrieve", "--vendor", "acme", "--criterion", CVE_CRITERION,
                 "--strategy", "hybrid"]) == 0
    trace = json.loads(capsys.readouterr().out)
    [found] = [c for c in trace["first_stage"] if c["source"] == "advisory.md"]
    assert (found["vector_rank"], found["lexical_rank"]) == (None, 1)
    assert found["fused_score"] == pytest.approx(1 / 61)

    assert main(["strategies"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed][-2:] == ["precedence", "hybrid"]


# The vector hits' records, read from the lexical index --------------------------------------

class VectorReadInFull:
    """The vector search as a filtered search runs it: records read from ChromaDB."""

    name = "vector"

    def __init__(self, evidence) -> None:
        self.evidence = evidence

    def nearest(self, query, n, *, where=None):
        return self.evidence.nearest(query, n, where=where)


def hybrid_of(bench: Workbench) -> tuple[HybridSearch, HybridSearch, list]:
    """The runner's hybrid search, the same with the vector records read in full, and the
    calls the first made to the vector search's full read."""
    vendor = bench.store.open_vendor("acme")
    generation, versions = bench.runner.committed_state(vendor)
    evidence = bench.runner.evidence(vendor, versions)
    full = VectorReadInFull(bench.runner.evidence(vendor, versions))
    read_in_full: list = []
    read = evidence.nearest
    evidence.nearest = lambda *a, **k: (read_in_full.append(a), read(*a, **k))[1]
    hybrid = bench.runner.hybrid(vendor, versions, evidence, generation)
    return (hybrid, HybridSearch(full, hybrid.lexical, lexical_n=hybrid.lexical_n, k=hybrid.k),
            read_in_full)


def query_of(bench: Workbench, text: str) -> Query:
    return Query(text=text, criterion_hash="h", embedding=bench.embedder.embed([text])[0])


def test_hybrid_takes_the_vector_hits_records_from_the_lexical_index_and_ranks_the_same(
        cve_workbench):
    hybrid, in_full, read_in_full = hybrid_of(cve_workbench)
    for text in (CVE_CRITERION, "supply chain attacks on build systems", "xz release"):
        query = query_of(cve_workbench, text)
        found = hybrid.nearest(query, 10)
        assert found == in_full.nearest(query, 10)  # ids, texts, metadata, every score part
        assert len(found) == 10 and all(h.committed for h in found)
    assert read_in_full == []  # no vector record was read from ChromaDB


def test_a_vector_hit_the_lexical_index_does_not_hold_sends_hybrid_to_the_full_read(
        cve_workbench):
    """A chunk of an unfinished ingest (a version no manifest names) among the vector hits:
    the index does not hold it as committed, so the records come from ChromaDB, and the chunk
    is passed on after the fused list as it is without the lexical index's records."""
    vendor = cve_workbench.store.open_vendor("acme")
    [kept] = vendor.chunks.get(limit=1, include=["metadatas"])["metadatas"]
    query = query_of(cve_workbench, CVE_CRITERION)
    vendor.chunks.upsert(ids=["acme-unfinished-0"], embeddings=[query.embedding],
                         documents=["CVE-2024-3094 patched in a version still being written."],
                         metadatas=[{**kept, "doc_sha": "not-committed"}])
    hybrid, in_full, read_in_full = hybrid_of(cve_workbench)
    found = hybrid.nearest(query, 10)
    assert found == in_full.nearest(query, 10)
    assert [h.chunk.id for h in found if not h.committed] == ["acme-unfinished-0"]
    assert len(read_in_full) == 1


# precedence's vector search, its records read from the lexical index ---------------------

def indexed_of(bench: Workbench) -> tuple[IndexedVectorSearch, object, list]:
    """The runner's first stage for precedence, the vector search reading its records in
    full, and the calls the first made to that full read."""
    vendor = bench.store.open_vendor("acme")
    generation, versions = bench.runner.committed_state(vendor)
    evidence = bench.runner.evidence(vendor, versions)
    full = bench.runner.evidence(vendor, versions)
    read_in_full: list = []
    read = evidence.nearest
    evidence.nearest = lambda *a, **k: (read_in_full.append(a), read(*a, **k))[1]
    return (IndexedVectorSearch(evidence, bench.runner.lexical(vendor, versions, generation)),
            full, read_in_full)


def test_precedence_searches_vectors_and_reads_the_hits_from_the_lexical_index(cve_workbench):
    indexed, full, read_in_full = indexed_of(cve_workbench)
    for text in (CVE_CRITERION, "supply chain attacks on build systems", "xz release"):
        query = query_of(cve_workbench, text)
        found = indexed.nearest(query, 10)
        assert found == full.nearest(query, 10)  # the same ids, texts, metadata and scores
        assert len(found) == 10
    assert read_in_full == []
    # A filtered search is the vector search's own.
    query = query_of(cve_workbench, CVE_CRITERION)
    where = {"source_type": "document"}
    assert indexed.nearest(query, 5, where=where) == full.nearest(query, 5, where=where)
    assert len(read_in_full) == 1
    trace = cve_workbench.retrieve("acme", CVE_CRITERION, "precedence")
    assert "lexical_sync" in trace.timings_ms


def test_a_hit_the_lexical_index_does_not_hold_sends_precedence_to_the_full_read(
        cve_workbench):
    vendor = cve_workbench.store.open_vendor("acme")
    [kept] = vendor.chunks.get(limit=1, include=["metadatas"])["metadatas"]
    query = query_of(cve_workbench, CVE_CRITERION)
    vendor.chunks.upsert(ids=["acme-unfinished-0"], embeddings=[query.embedding],
                         documents=["CVE-2024-3094 patched in a version still being written."],
                         metadatas=[{**kept, "doc_sha": "not-committed"}])
    indexed, full, read_in_full = indexed_of(cve_workbench)
    found = indexed.nearest(query, 10)
    assert found == full.nearest(query, 10)
    assert [h.chunk.id for h in found if not h.committed] == ["acme-unfinished-0"]
    assert len(read_in_full) == 1


class ThreadNoting(ListedSource):
    """A source that notes the thread each search ran on."""

    def __init__(self, name: str, found: list) -> None:
        super().__init__(name, found)
        self.threads: list[str] = []

    def nearest(self, query, n, *, where=None):
        self.threads.append(threading.current_thread().name)
        return super().nearest(query, n, where=where)


@pytest.mark.parametrize("beside", [True, False])
def test_hybrid_runs_the_lexical_search_beside_or_in_turn_with_the_same_answer(beside):
    vector = ThreadNoting("vector", [neighbour("a", 0.9), neighbour("b", 0.8)])
    lexical = ThreadNoting("lexical", [neighbour("b", 4.0), neighbour("c", 3.0)])
    found = HybridSearch(vector, lexical, lexical_n=5, k=60, beside=beside).nearest(QUERY, 3)
    assert [n.chunk.id for n in found] == ["b", "a", "c"]
    caller = threading.current_thread().name
    assert vector.threads == [caller]
    assert (lexical.threads[0] != caller) is beside


def test_the_runner_searches_in_turn_beside_an_embedded_store_and_at_once_beside_a_server(
        cve_workbench, tmp_path):
    vendor = cve_workbench.store.open_vendor("acme")
    generation, versions = cve_workbench.runner.committed_state(vendor)
    assert not cve_workbench.runner.hybrid(vendor, versions, generation=generation).beside
    served = StrategyRunner(cve_workbench.settings.model_copy(
        update={"chroma_host": "127.0.0.1", "lexical_dir": tmp_path / "lexical"}),
        cve_workbench.store)
    assert served.hybrid(vendor, versions, generation=generation).beside
