"""Seed 004's question-answering pipeline (core.retrieval.qa) on a real embedded ChromaDB
store with the fake models: first stage 10, dedupe, cap 7, rerank and sort, split [0:4]
answer and [4:6] suggestions, and the hash-linked questionnaire answers first."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import Settings
from core.encoders.rerank import fallback_status
from core.hashing import criterion_hash
from core.models import RerankerStatus
from core.retrieval.qa import QA_STAGES, QAResult, dedupe, run, split
from core.retrieval.source import Query
from core.retrieval.stages import RetrievalEnv, Timings
from core.store import committed_versions
from core.workbench import Workbench
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support import payloads
from tests.support.store import read_manifest

QUESTION = "How are encryption keys rotated and stored?"
# The first stage (bag-of-words cosine) prefers the repetitive text; the fake reranker (share
# of the question's words present) prefers the complete one, hidden among filler words.
REPETITIVE = "encryption encryption encryption keys keys keys"
COMPLETE = ("How encryption keys are rotated and stored: " +
            " ".join(f"filler{i}" for i in range(30)))


def related_text(i: int) -> str:
    """Documents sharing fewer and fewer of the question's words, each with its own filler."""
    words = ["encryption", "keys", "rotated", "stored", "how"][: 1 + i % 4]
    return " ".join(words + [f"topic{i}word{j}" for j in range(2 + i)])


def write_documents(folder: Path, texts: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (folder / name).write_text(text + "\n", encoding="utf-8")
    return folder


def qa_env(bench: Workbench, *, reranker=None, search=None, vendor_id: str = "acme"
           ) -> RetrievalEnv:
    """The environment the ask pipeline gives the stages: the vendor's committed store."""
    vendor = bench.store.open_vendor(vendor_id, embedding_model=bench.embedder.name)
    evidence = bench.runner.evidence(vendor, committed_versions(read_manifest(vendor)))
    status = (RerankerStatus(name=reranker.name, ran=True, reason="test reranker")
              if reranker is not None else
              fallback_status("flashrank:ms-marco-TinyBERT-L-2-v2", "no model on disk"))
    return RetrievalEnv(settings=bench.settings, vendor_id=vendor_id,
                        search=search if search is not None else evidence, records=evidence,
                        reranker=reranker, reranker_status=status,
                        read_links=lambda: bench.runner.read_links(vendor, None))


def ask(bench: Workbench, question: str = QUESTION, **env_options) -> QAResult:
    options = {"reranker": FakeReranker(), **env_options}
    query = Query(text=question, criterion_hash=criterion_hash(question),
                  embedding=bench.embed_query(question))
    return run(qa_env(bench, **options), query)


def ids(candidates) -> list[str]:
    return [c.id for c in candidates]


def bench_with(tmp_path: Path, texts: dict[str, str], **settings) -> Workbench:
    bench = Workbench(Settings(store=tmp_path / "store", **settings), embedder=FakeEmbedder())
    bench.ingest_documents("acme", [write_documents(tmp_path / "docs", texts)])
    return bench


@pytest.fixture
def twelve_documents(tmp_path) -> Workbench:
    texts = {"a_repetitive.txt": REPETITIVE, "b_complete.txt": COMPLETE}
    texts.update({f"related_{i:02d}.txt": related_text(i) for i in range(10)})
    return bench_with(tmp_path, texts)


# The seed's sizes: 10 -> 7 -> [0:4] + [4:6] ---------------------------------------------------

def test_first_stage_ten_cap_seven_four_answers_two_suggestions(twelve_documents):
    result = ask(twelve_documents)

    assert len(result.first_stage) == 10
    assert [c.first_stage_rank for c in result.first_stage] == list(range(1, 11))
    assert result.deduplicated == result.first_stage and result.duplicates == []
    assert ids(result.capped) == ids(result.first_stage)[:7]
    assert ids(result.over_cap) == ids(result.first_stage)[7:]
    assert sorted(ids(result.reranked)) == sorted(ids(result.capped))
    assert len(result.answer) == 4 and len(result.suggestions) == 2
    assert ids(result.answer) == ids(result.reranked)[:4]
    assert ids(result.suggestions) == ids(result.reranked)[4:6]


def test_candidates_are_sorted_by_the_rerank_score(twelve_documents):
    result = ask(twelve_documents)

    scores = [c.rerank_score for c in result.reranked]
    assert None not in scores
    assert scores == sorted(scores, reverse=True)
    expected = FakeReranker().score(QUESTION, [c.text for c in result.capped])
    by_score = sorted(zip(ids(result.capped), expected, strict=True), key=lambda p: -p[1])
    assert ids(result.reranked) == [i for i, _ in by_score]
    assert [c.final_score for c in result.reranked] == scores
    assert [c.rank_after_boost for c in result.reranked] == list(range(1, 8))


def test_the_reranker_changes_the_first_stage_order(twelve_documents):
    result = ask(twelve_documents)
    first = [c.source for c in result.first_stage]
    ranked = [c.source for c in result.reranked]
    assert first.index("a_repetitive.txt") < first.index("b_complete.txt")
    assert ranked[0] == "b_complete.txt"  # every word of the question: score 1.0
    assert result.reranked[0].rerank_score == 1.0
    assert ranked.index("b_complete.txt") < ranked.index("a_repetitive.txt")


def test_the_sizes_come_from_the_settings(tmp_path):
    texts = {f"related_{i:02d}.txt": related_text(i) for i in range(12)}
    bench = bench_with(tmp_path, texts, qa_first_stage_n=8, qa_candidate_cap=5, qa_answer_n=2,
                       qa_suggestion_n=3)
    result = ask(bench)
    assert (len(result.first_stage), len(result.capped), len(result.answer),
            len(result.suggestions)) == (8, 5, 2, 3)


@pytest.mark.parametrize(("documents", "answers", "suggestions"), [
    (1, 1, 0), (3, 3, 0), (4, 4, 0), (5, 4, 1), (6, 4, 2), (9, 4, 2),
])
def test_fewer_than_four_candidates_means_no_suggestions(tmp_path, documents, answers,
                                                         suggestions):
    bench = bench_with(tmp_path, {f"related_{i:02d}.txt": related_text(i)
                                  for i in range(documents)})
    result = ask(bench)
    assert len(result.first_stage) == documents
    assert (len(result.answer), len(result.suggestions)) == (answers, suggestions)
    assert ids(result.answer) + ids(result.suggestions) == ids(result.reranked)[:answers +
                                                                               suggestions]


def test_split_is_the_seeds_slices():
    assert split(list("abcdefg"), 4, 2) == (list("abcd"), list("ef"))
    assert split(list("abcde"), 4, 2) == (list("abcd"), ["e"])
    assert split(list("abc"), 4, 2) == (list("abc"), [])
    assert split([], 4, 2) == ([], [])


# Dedupe ---------------------------------------------------------------------------------------

def test_identical_text_in_two_files_is_kept_once(tmp_path):
    texts = {f"related_{i:02d}.txt": related_text(i) for i in range(8)}
    texts["copy_a.txt"] = REPETITIVE
    texts["copy_b.txt"] = "encryption  encryption encryption\nkeys keys keys"  # spacing only
    bench = bench_with(tmp_path, texts)

    result = ask(bench)

    copies = [c for c in result.first_stage if c.source in {"copy_a.txt", "copy_b.txt"}]
    assert len(copies) == 2
    kept, dropped = copies
    assert kept.id in ids(result.deduplicated)
    [duplicate] = result.duplicates
    assert duplicate.candidate.id == dropped.id
    assert duplicate.reason == f"same text as {kept.id} (first-stage rank {kept.first_stage_rank})"
    assert len(result.deduplicated) == 9
    assert dropped.id not in ids(result.reranked)


class RepeatingSource:
    """A candidate source whose list names every record twice, as a fused list can."""

    name = "repeating"

    def __init__(self, inner) -> None:
        self.inner = inner

    def nearest(self, query, n, *, where=None):
        found = self.inner.nearest(query, n, where=where)
        return [neighbour for neighbour in found for _ in (0, 1)][:n]


def test_a_record_listed_twice_is_kept_once(twelve_documents):
    plain = qa_env(twelve_documents, reranker=FakeReranker())
    result = ask(twelve_documents, search=RepeatingSource(plain.search))

    assert len(result.first_stage) == 10
    assert len(set(ids(result.first_stage))) == 5
    assert ids(result.deduplicated) == list(dict.fromkeys(ids(result.first_stage)))
    assert [d.reason for d in result.duplicates] == [
        f"same id as the candidate at first-stage rank {rank}" for rank in (1, 3, 5, 7, 9)]
    # five candidates: four answers, one suggestion
    assert (len(result.capped), len(result.answer), len(result.suggestions)) == (5, 4, 1)


def test_dedupe_drops_blank_text_and_withheld_ids():
    from core.models import Candidate

    def candidate(cid: str, text: str, rank: int) -> Candidate:
        return Candidate(id=cid, type="tc_files", source="s.txt", text=text,
                         first_stage_rank=rank)

    kept, dropped = dedupe([candidate("a", "x", 1), candidate("b", "  ", 2),
                            candidate("c", "y", 3)], withheld={"c"})
    assert ids(kept) == ["a"]
    assert [(d.candidate.id, d.reason) for d in dropped] == [
        ("b", "empty text"),
        ("c", "linked to the question's hash: returned with the linked follow-ups")]


# Linked questionnaire answers come first, on their own ---------------------------------------

def test_linked_followups_come_first_and_never_compete_for_the_answer(twelve_documents):
    bench = twelve_documents
    for round_number in (1, 2, 3, 4):
        bench.ingest_questionnaire(payloads.one_answer(
            round_number, f"Round {round_number}: keys rotate every {round_number * 30} days.",
            criterion=QUESTION, timestamp=f"2024-{round_number:02d}-10T09:00:00Z"))

    # case and spacing differences still link (seed 003's hash)
    result = ask(bench, "  how are ENCRYPTION keys rotated and   stored? ")

    assert [h.round_number for h in result.linked_followups] == [2, 3, 4]  # ascending round
    assert all(h.hash_match and h.tier == "high" for h in result.linked_followups)
    assert all("hash" in h.found_by for h in result.linked_followups)
    assert [d.followup.round_number for d in result.dropped_followups] == [1]
    linked_ids = {h.id for h in result.linked_followups} | {
        d.followup.id for d in result.dropped_followups}
    chunk_ids = set(ids(result.capped) + ids(result.answer) + ids(result.suggestions))
    assert not linked_ids & chunk_ids
    # the first stage saw them (they repeat the question); dedupe set them aside
    withheld = [d for d in result.duplicates if d.candidate.id in linked_ids]
    assert withheld and all("linked follow-ups" in d.reason for d in withheld)
    assert len(result.answer) == 4
    # the linked answers are looked up before anything is searched
    assert list(result.timings.ms)[:3] == ["hash_fetch", "control_fetch", "first_stage"]


def test_an_unlinked_questionnaire_answer_competes_as_an_ordinary_chunk(twelve_documents):
    bench = twelve_documents
    bench.ingest_questionnaire(payloads.one_answer(
        1, "Encryption keys are rotated yearly and stored in an HSM.", criterion=None,
        question="How are encryption keys rotated and stored in production?",
        timestamp="2024-01-10T09:00:00Z"))

    result = ask(bench)

    assert result.linked_followups == []
    adhoc = [c for c in result.first_stage if c.is_followup]
    assert len(adhoc) == 1
    assert adhoc[0].id in ids(result.deduplicated)


def test_a_typo_of_the_question_links_as_the_low_tier(twelve_documents):
    bench = twelve_documents
    bench.ingest_questionnaire(payloads.one_answer(
        2, "Keys rotate every 90 days.", criterion="How are encryption keys rotatd and stored?",
        question=QUESTION, timestamp="2024-02-10T09:00:00Z"))

    [hit] = ask(bench).linked_followups
    assert hit.tier == "low" and hit.hash_match is False
    assert "near_copy" in hit.found_by


# Without a reranker, and the timings -----------------------------------------------------------

def test_without_a_reranker_first_stage_order_is_kept_with_a_note(twelve_documents):
    result = ask(twelve_documents, reranker=None)

    assert result.reranker.ran is False
    assert ids(result.reranked) == ids(result.capped)
    assert all(c.rerank_score is None for c in result.reranked)
    assert [c.final_score for c in result.reranked] == [
        c.first_stage_score for c in result.capped]
    assert ids(result.answer) == ids(result.first_stage)[:4]
    assert any("No reranker ran" in note and "first-stage order" in note
               for note in result.notes)


def test_every_stage_is_timed_in_order(twelve_documents):
    timings = Timings()
    query = Query(text=QUESTION, criterion_hash=criterion_hash(QUESTION),
                  embedding=twelve_documents.embed_query(QUESTION))
    result = run(qa_env(twelve_documents, reranker=FakeReranker()), query, timings)
    assert result.timings is timings
    assert tuple(timings.ms) == QA_STAGES
    assert all(ms >= 0.0 for ms in timings.ms.values())
