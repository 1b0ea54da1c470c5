"""Conversations beside an embedded store: each vendor's messages in a file of its own, read as
the store's collection answered, and a store of an earlier version keeping the conversations
its collection held."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from core.config import Settings
from core.review.conversation.store import Conversations
from core.store import Where, conversations_collection_name
from core.store.bindings import PERSISTED_AT_EVERY_WRITE
from core.store.conversation_file import ConversationFile, conversation_file_path
from core.store.conversations import ConversationRecords
from core.workbench import Workbench
from tests.fakes import FakeEmbedder, FakeReranker


@pytest.fixture
def acme(acme_asked: Workbench) -> Workbench:
    return acme_asked


def reopened(settings: Settings) -> Workbench:
    """The same store as another process opens it."""
    return Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())


def earlier_version_turn(bench: Workbench, question: str, conversation_id: str | None = None):
    """A turn stored as a version that kept conversations in a collection stored it."""
    collection = bench.store.client.get_or_create_collection(
        conversations_collection_name("acme"), embedding_function=None,
        metadata={"vendor_id": "acme"},
        configuration={"hnsw": {"space": "cosine", **PERSISTED_AT_EVERY_WRITE}})
    turn = bench.ask("acme", question, conversation_id, save=False)
    conversations = Conversations(bench.store, "acme")
    conversations._collection = lambda create=False: ConversationRecords(collection)
    vector = bench.embedder.embed([question])[0]
    conversations.save(turn, [vector, vector])
    return turn, collection


def test_reading_conversations_creates_nothing(acme):
    assert acme.conversations("acme") == []
    assert acme.store.conversations("acme") is None
    assert not (acme.settings.store / "conversations").exists()


def test_a_turn_is_kept_in_the_vendors_own_file(acme, tmp_path):
    northwind = tmp_path / "northwind"
    northwind.mkdir()
    (northwind / "policy.md").write_text("Backups are encrypted with AES-256.\n",
                                         encoding="utf-8")
    acme.ingest_documents("northwind", [northwind / "policy.md"])
    mine = acme.ask("acme", "How are backups protected?")
    theirs = acme.ask("northwind", "How are backups protected?")

    files = sorted(p.name for p in (acme.settings.store / "conversations").iterdir()
                   if p.suffix == ".sqlite3")
    assert files == ["acme.sqlite3", "northwind.sqlite3"]
    for vendor, turn in (("acme", mine), ("northwind", theirs)):
        stored = ConversationFile(conversation_file_path(acme.settings.store, vendor))
        messages = stored.with_vectors(Where())
        assert {m.metadata["conversation_id"] for m in messages} == {turn.conversation_id}
        assert {m.metadata["vendor_id"] for m in messages} == {vendor}
        assert [m.metadata["role"] for m in messages] == ["user", "assistant"]
        assert all(m.vector is not None and m.vector.shape == (256,) for m in messages)
    # No collection is made for conversations beside an embedded store.
    names = {c if isinstance(c, str) else c.name for c in acme.store.client.list_collections()}
    assert conversations_collection_name("acme") not in names


def test_the_file_answers_filters_as_the_collection_does(acme):
    first = acme.ask("acme", "How are backups protected?")
    acme.ask("acme", "Can you elaborate on that?", first.conversation_id)
    other = acme.ask("acme", "Who reviews access rights?")
    stored = acme.store.conversations("acme")
    assert isinstance(stored, ConversationFile)
    assert stored.count(Where.eq(conversation_id=first.conversation_id)) == 4
    assert stored.count(Where.eq(conversation_id=first.conversation_id, role="user")) == 2
    assert stored.count(Where.eq(role="assistant")) == 3
    assert stored.count(Where.ne("conversation_id", first.conversation_id)) == 2
    assert stored.count(Where.is_in("turn", [2])) == 2
    assert stored.count(Where.eq(conversation_id=other.conversation_id, turn=2)) == 0
    texts = [m.text for m in stored.messages(Where.eq(conversation_id=first.conversation_id))]
    assert texts[0] == "How are backups protected?" and texts[2] == "Can you elaborate on that?"
    assert {m.text for m in stored.messages(Where.eq(role="user"), text=False)} == {""}


def test_an_earlier_versions_conversations_are_kept_and_continue(acme):
    first, collection = earlier_version_turn(acme, "How are backups protected?")
    before = collection.count()

    later = reopened(acme.settings)
    [summary] = later.conversations("acme")
    assert (summary.conversation_id, summary.turns) == (first.conversation_id, 1)
    [shown] = later.conversation("acme", first.conversation_id)
    assert shown.answer == first.answer and shown.cited_ids == first.cited_ids
    second = later.ask("acme", "Can you elaborate on that?", first.conversation_id)
    assert second.turn == 2 and second.continuation.is_continuation
    assert [m.turn for m in second.history[:2]] == [1, 1]

    stored = ConversationFile(conversation_file_path(acme.settings.store, "acme"))
    vectors = {(m.metadata["turn"], m.metadata["role"]): m.vector
               for m in stored.with_vectors(Where())}
    assert sorted(vectors) == [(1, "assistant"), (1, "user"), (2, "assistant"), (2, "user")]
    copied = collection.get(ids=[f"{first.conversation_id}-00001-user"],
                            include=["embeddings"])["embeddings"][0]
    assert np.allclose(vectors[(1, "user")], copied)
    assert collection.count() == before  # the collection is left as it was
    # Opened again, nothing is copied twice and nothing is lost.
    again = reopened(acme.settings)
    assert [t.turn for t in again.conversation("acme", first.conversation_id)] == [1, 2]


def test_two_processes_taking_in_an_earlier_version_copy_it_once(acme):
    first, _ = earlier_version_turn(acme, "How are backups protected?")
    readers = [reopened(acme.settings) for _ in range(4)]
    with ThreadPoolExecutor(max_workers=len(readers)) as pool:  # an error is raised here
        turns = list(pool.map(
            lambda bench: [t.turn for t in bench.conversation("acme", first.conversation_id)],
            readers))
    assert turns == [[1]] * 4
    stored = ConversationFile(conversation_file_path(acme.settings.store, "acme"))
    assert stored.count(Where()) == 2
