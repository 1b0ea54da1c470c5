"""Asking the evidence (seeds 001 and 004) on a real ChromaDB store with the fake models:
turns, history, continuation, anchoring, the split, storage, refusals and isolation."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from core.errors import UnknownVendorError, UserInputError
from core.review.conversation.models import HistoryMessage
from core.review.conversation.store import Conversations
from core.store.conversation_file import conversation_file_path
from core.workbench import Workbench
from tests.conftest import AES_CRITERION, SAMPLE_DATA, with_acme
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support.store import get_all

ACME = SAMPLE_DATA / "vendors" / "acme"


@pytest.fixture
def acme(acme_asked: Workbench) -> Workbench:
    return acme_asked


def test_a_first_question_starts_a_conversation_with_seed_004s_split(acme):
    turn = acme.ask("acme", "How are backups protected?")
    assert turn.turn == 1 and turn.conversation_id.startswith("c-")
    assert not turn.continuation.is_continuation
    assert turn.continuation.decided_by == "first_turn"
    assert len(turn.answer_evidence) == 4 and len(turn.suggestion_evidence) == 2
    ids = [e.id for e in [*turn.answer_evidence, *turn.suggestion_evidence]]
    assert len(set(ids)) == 6
    assert turn.answered_by == "excerpts"
    assert turn.answer.startswith("No language model is configured, so nothing below was "
                                  "generated")
    for i, evidence in enumerate(turn.answer_evidence, start=1):
        assert f"[{i}] {evidence.source}" in turn.answer
        assert evidence.fused_score is not None and evidence.anchor_boost == 0.0
    assert turn.anchor_documents == [] and turn.history == []


def test_a_vague_question_continues_and_is_anchored_to_the_previous_answer(acme):
    first = acme.ask("acme", "How are backups protected?")
    second = acme.ask("acme", "Can you elaborate on that?", first.conversation_id)
    assert second.turn == 2
    assert second.continuation.is_continuation
    assert second.search_query == "Can you elaborate on that? backups protected"
    assert second.anchor_documents == first.cited_documents
    anchored = [e for e in second.answer_evidence if e.source in first.cited_documents]
    assert anchored and all(e.anchor_boost > 0 for e in anchored)
    # The last exchange is always in view, most recent first.
    assert [(m.turn, m.role) for m in second.history[:2]] == [(1, "assistant"), (1, "user")]


def test_a_continuation_embeds_its_question_and_its_search_in_one_model_call(acme):
    first = acme.ask("acme", "How are backups protected?")
    acme.forget_query_embeddings()
    calls = acme.embedder.calls
    second = acme.ask("acme", "Can you elaborate on that?", first.conversation_id)
    assert second.search_query == "Can you elaborate on that? backups protected"
    # The question and the query it searched with: one call (the answer's vector is the
    # mean of its excerpts' stored vectors, no call).
    assert acme.embedder.calls == calls + 1


def test_a_continuation_weighs_the_store_as_it_ranks_and_searches_each_vector_once(
        acme, tmp_path, monkeypatch):
    from chromadb.api.models.Collection import Collection

    # More chunks than an anchored search's window, so the store answers it whole.
    more = tmp_path / "more"
    more.mkdir()
    for i in range(60):
        (more / f"note_{i:02d}.md").write_text(
            f"Operations note {i}: backup job {i} copies volume {i} to the vault at "
            f"{i % 24:02d}:00 and checks restore sample {i}.\n", encoding="utf-8")
    acme.ingest_documents("acme", sorted(more.glob("*.md")))
    first = acme.ask("acme", "How are backups protected?")
    asked: list[bytes] = []
    query = Collection.query

    def counted(self, *args, **kwargs):
        asked.append(np.asarray(kwargs["query_embeddings"][0], dtype=np.float32).tobytes())
        return query(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "query", counted)
    second = acme.ask("acme", "Can you elaborate on that?", first.conversation_id)
    monkeypatch.setattr(Collection, "query", query)

    assert second.continuation.is_continuation
    assert asked and len(asked) == len(set(asked))  # no vector searched twice
    vector = np.asarray(acme.embedder.embed([second.search_query])[0], dtype=np.float32)
    chunks = acme.store.open_vendor("acme").chunks
    best = chunks.query(query_embeddings=[vector], n_results=1, include=["distances"])
    cited = chunks.get(ids=[e.id for e in first.answer_evidence], include=["embeddings"])
    signals = second.continuation.signals
    assert signals["store_best_cosine"] == pytest.approx(1.0 - best["distances"][0][0],
                                                         abs=1e-4)
    assert signals["previous_evidence_cosine"] == pytest.approx(
        max(float(np.asarray(v) @ vector) for v in cited["embeddings"]), abs=1e-4)


def test_a_topic_shift_is_not_anchored(acme):
    first = acme.ask("acme", "How are backups protected?")
    third = acme.ask("acme", "Now tell me about multi-factor authentication.",
                     first.conversation_id)
    assert not third.continuation.is_continuation
    assert "announces a new topic" in third.continuation.reason
    assert third.anchor_documents == []
    assert all(e.anchor_boost == 0 for e in third.answer_evidence)


def test_the_questions_linked_answers_come_first(acme):
    turn = acme.ask("acme", AES_CRITERION)
    assert [f.round_number for f in turn.followups] == [3, 4, 5]
    assert "Vendor's answer, questionnaire round 5" in turn.answer
    linked = {f.id for f in turn.followups}
    assert not linked & {e.id for e in turn.answer_evidence + turn.suggestion_evidence}


def test_turns_are_stored_and_listed_per_vendor(acme):
    first = acme.ask("acme", "How are backups protected?")
    acme.ask("acme", "How often are they tested?", first.conversation_id)
    other = acme.ask("acme", "Who approves access requests?")
    summaries = acme.conversations("acme")
    assert [(s.conversation_id, s.turns) for s in summaries] == [
        (first.conversation_id, 2), (other.conversation_id, 1)]
    turns = acme.conversation("acme", first.conversation_id)
    assert [t.question for t in turns] == ["How are backups protected?",
                                           "How often are they tested?"]
    assert turns[0].answer_evidence == first.answer_evidence


def test_a_preview_and_an_unanchored_rerun_store_nothing(acme):
    first = acme.ask("acme", "How are backups protected?")
    second = acme.ask("acme", "Can you elaborate on that?", first.conversation_id)
    again = acme.rerun("acme", second, anchored=False)
    assert again.search_query == second.search_query
    assert all(e.anchor_boost == 0 for e in again.answer_evidence)
    acme.ask("acme", "What about restores?", first.conversation_id, save=False)
    assert acme.conversations("acme")[0].turns == 2


@pytest.mark.parametrize("question, words", [
    ("", "empty"), ("   ", "empty"), ("x" * 2001, "2001 characters"), ("a\x00b", "NUL"),
])
def test_bad_questions_are_refused_in_one_sentence_and_nothing_is_written(acme, question,
                                                                          words):
    with pytest.raises(UserInputError, match=words) as refused:
        acme.ask("acme", question)
    assert "\n" not in str(refused.value)
    assert acme.conversations("acme") == []


@pytest.mark.parametrize("conversation_id", ["nope", "c-000000000000", "", 7])
def test_an_unknown_conversation_is_refused(acme, conversation_id):
    with pytest.raises(UserInputError, match="conversation|Conversation"):
        acme.ask("acme", "How are backups protected?", conversation_id)
    assert acme.conversations("acme") == []


def test_a_vendor_without_evidence_is_refused(workbench):
    with pytest.raises(UnknownVendorError, match="No evidence is stored for vendor 'globex'"):
        workbench.ask("globex", "How are backups protected?")


def test_another_vendors_conversation_is_refused_and_never_shown(acme):
    acme.ingest_documents("northwind", sorted(
        (SAMPLE_DATA / "vendors" / "northwind" / "documents").glob("*.md")))
    theirs = acme.ask("northwind", "How is stored data encrypted?")
    with pytest.raises(UserInputError, match="Vendor 'acme' has no conversation"):
        acme.ask("acme", "Can you elaborate on that?", theirs.conversation_id)
    with pytest.raises(UserInputError, match="Vendor 'acme' has no conversation"):
        acme.conversation("acme", theirs.conversation_id)
    assert acme.conversations("acme") == []
    mine = acme.ask("acme", "How are backups protected?")
    acme_ids = set(get_all(acme.store.open_vendor("acme").chunks, include=())["ids"])
    assert {e.id for e in mine.answer_evidence + mine.suggestion_evidence} <= acme_ids
    assert [s.conversation_id for s in acme.conversations("northwind")] == [
        theirs.conversation_id]


def test_every_answer_keeps_the_chunks_and_documents_that_backed_it(acme):
    """Seed 001's retrievedContextJson: read from the stored assistant message itself."""
    import json

    turn = acme.ask("acme", AES_CRITERION)
    [(text, meta)] = stored_messages(acme, f"{turn.conversation_id}-00001-assistant")
    assert json.loads(meta["chunk_ids"]) == turn.cited_ids
    assert set(json.loads(meta["chunk_ids"])) >= {f.id for f in turn.followups}
    assert json.loads(meta["documents"]) == turn.cited_documents
    assert text == turn.answer


def stored_messages(bench, *ids: str) -> list[tuple[str, dict]]:
    """(text, metadata) of these messages, read from the vendor's conversation file itself."""
    import json
    import sqlite3

    path = conversation_file_path(bench.settings.store, "acme")
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = dict((i, (t, json.loads(m))) for i, t, m in db.execute(
            "SELECT id, text, metadata FROM messages"))
    return [rows[i] for i in ids if i in rows]


def _acme_with(settings, **update) -> Workbench:
    return with_acme(Workbench(settings.model_copy(update=update), embedder=FakeEmbedder(),
                               reranker=FakeReranker()))


def test_an_anchor_documents_boost_is_divided_by_its_place_in_the_questions_own_search(
        settings):
    acme = _acme_with(settings, question_as_asked_weight=0.0)
    first = acme.ask("acme", "How are backups protected?")
    second = acme.ask("acme", "Can you elaborate on that?", first.conversation_id)
    assert second.question_as_asked_weight == 0.0
    assert set(second.anchor_places) <= set(second.anchor_documents)
    assert second.anchor_places and min(second.anchor_places.values()) >= 1
    assert "best place in the question's own search" in second.anchoring
    assert second.anchoring.startswith("calibrated: +")
    for evidence in [*second.answer_evidence, *second.suggestion_evidence]:
        if evidence.source not in second.anchor_places:  # not an anchor, or not reached
            assert evidence.anchor_boost == 0.0
    boosts = {e.source: e.anchor_boost
              for e in [*second.answer_evidence, *second.suggestion_evidence] if e.anchor_boost}
    assert len(boosts) >= 2 and max(second.anchor_places[d] for d in boosts) > 1
    # Two documents with the same part in the previous answer: the one placed lower in the
    # question's own search gets the smaller boost, in the ratio of their places.
    for a in boosts:
        for b in boosts:
            wa, wb = second.anchor_weights[a], second.anchor_weights[b]
            pa, pb = second.anchor_places[a], second.anchor_places[b]
            assert boosts[a] / boosts[b] == pytest.approx((wa / pa) / (wb / pb), rel=1e-6)


def test_seed_anchoring_keeps_its_flat_boost_whatever_the_place(settings):
    bench = Workbench(settings.model_copy(update={"source_anchoring": "seed"}),
                      embedder=FakeEmbedder(), reranker=FakeReranker())
    bench.ingest_documents("acme", sorted((ACME / "documents").glob("*.md")))
    first = bench.ask("acme", "How are backups protected?")
    second = bench.ask("acme", "Can you elaborate on that?", first.conversation_id)
    assert second.anchor_places == {}
    boosted = {e.anchor_boost for e in second.answer_evidence
               if e.source in second.anchor_documents}
    assert boosted == {0.3}


def test_a_question_searched_with_carried_words_is_also_searched_as_asked(acme):
    first = acme.ask("acme", "How are backups protected?")
    assert first.question_as_asked_weight == 0.0  # searched as asked already
    second = acme.ask("acme", "Can you elaborate on that?", first.conversation_id)
    assert second.search_query != second.question
    assert second.question_as_asked_weight == 0.25
    again = acme.rerun("acme", second, anchored=False)
    assert again.question_as_asked_weight == 0.25


def test_seed_anchoring_searches_the_search_query_alone(settings):
    bench = _acme_with(settings, source_anchoring="seed")
    first = bench.ask("acme", "How are backups protected?")
    second = bench.ask("acme", "Can you elaborate on that?", first.conversation_id)
    assert second.search_query != second.question
    assert second.question_as_asked_weight == 0.0


def store_search(bench, conversation_id, vector, n, exclude) -> list[HistoryMessage]:
    """The conversation's messages nearest `vector` by cosine, leaving out turns: every
    message read from the vendor's conversation file itself and ranked exactly."""
    import json
    import sqlite3

    path = conversation_file_path(bench.settings.store, "acme")
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT text, metadata, vector FROM messages").fetchall()
    scored = []
    for text, raw, blob in rows:
        meta = json.loads(raw)
        stored = np.frombuffer(blob, dtype=np.float32)
        if meta["conversation_id"] == conversation_id and int(meta["turn"]) not in exclude:
            cosine = float(stored @ vector / np.linalg.norm(stored) / np.linalg.norm(vector))
            scored.append((-cosine, HistoryMessage(turn=int(meta["turn"]), role=meta["role"],
                                                   text=text)))
    return [m for _, m in sorted(scored, key=lambda pair: pair[0])][:n]


def test_a_conversation_read_once_answers_as_the_store_does(acme):
    """A continuing turn reads its conversation once: its turns, messages and the messages
    nearest a question are what the store's own reads and an exact ranking of its stored
    messages give."""
    first = acme.ask("acme", "How are backups protected?")
    for question in ("Can you elaborate on that?", "How is stored data encrypted?",
                     "Who reviews access rights?", "And how often?"):
        acme.ask("acme", question, first.conversation_id)
    conversations = Conversations.of(acme.store, "acme")
    read = conversations.read(first.conversation_id)
    assert read.turn_count() == conversations.turn_count(first.conversation_id) == 5
    assert read.turns() == conversations.turns(first.conversation_id)
    assert read.messages(first.conversation_id) == conversations.messages(first.conversation_id)
    embedder = acme.services.embedder()
    vectors = {(r.metadata["turn"], r.metadata["role"]): r.vector for r in read.records}

    def distance(message, vector) -> float:
        stored = vectors[(message.turn, message.role)]
        return round(1.0 - float(stored @ vector / np.linalg.norm(stored)
                                 / np.linalg.norm(vector)), 5)

    for text, exclude in (("backups restored from copies", set()),
                          ("encryption keys", {5}), ("access review", {4, 5})):
        vector = embedder.embed([text])[0]
        from_store = store_search(acme, first.conversation_id, vector, 4, exclude)
        from_read = read.similar(first.conversation_id, vector, 4, exclude)
        # The same ranking; messages at the same distance may come in either order.
        assert [distance(m, vector) for m in from_read] == [
            distance(m, vector) for m in from_store]
        assert len(from_read) == 4 and not {m.turn for m in from_read} & exclude


@pytest.mark.parametrize("conversation_id", ["nope", "c-000000000000", "", 7])
def test_reading_an_unknown_conversation_is_refused_as_checking_it_is(acme, conversation_id):
    conversations = Conversations.of(acme.store, "acme")
    with pytest.raises(UserInputError) as checked:
        conversations.check_id(conversation_id)
    with pytest.raises(UserInputError) as read:
        conversations.read(conversation_id)
    assert str(read.value) == str(checked.value)
