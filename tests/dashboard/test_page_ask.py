"""The Ask the evidence page, as a reviewer uses it (fake models over the sample data)."""

from __future__ import annotations

from dashboard.text import plain
from tests.dashboard.conftest import page


def ask(at, question: str):
    at.chat_input(key="ask_input").set_value(question).run()
    assert not at.exception, at.exception
    return at


def test_a_question_starts_a_conversation_and_shows_its_sources(dashboard_workbench):
    at = page("ask").run()
    assert not at.exception
    assert at.title[0].value == "Ask the evidence"
    assert at.selectbox(key="ask_conversation_acme").value == "new"
    ask(at, "How are backups protected?")
    [summary] = dashboard_workbench.conversations("acme")
    assert at.selectbox(key="ask_conversation_acme").value == summary.conversation_id
    users = [m for m in at.chat_message if m.name == "user"]
    assistants = [m for m in at.chat_message if m.name == "assistant"]
    assert len(users) == len(assistants) == 1
    assert any("Not generated" in c.value for c in at.caption)
    texts = " ".join(m.value for m in at.markdown)
    assert "It is the first question of the conversation" in texts
    assert "Searched for:" in texts
    frame = at.dataframe[0].value
    assert list(frame["#"]) == [1, 2, 3, 4]
    assert {"Vector rank", "Lexical rank", "Fused (RRF)", "Anchor boost", "Final"} <= set(
        frame.columns)


def test_a_continuation_is_anchored_and_the_toggle_shows_what_anchoring_moved(
        dashboard_workbench):
    at = page("ask").run()
    ask(at, "How are backups protected?")
    ask(at, "Can you elaborate on that?")
    [summary] = dashboard_workbench.conversations("acme")
    assert summary.turns == 2
    texts = " ".join(m.value for m in at.markdown)
    assert "A continuation" in texts and "Anchor documents" in texts
    assert "confidence" in texts and "that it continues" in texts
    # What was searched and how each anchor document's boost was scaled, as the turn has it.
    [stored] = [t for t in dashboard_workbench.conversation("acme", summary.conversation_id)
                if t.turn == 2]
    assert (f"**Searched for:** {plain(stored.search_query)} (fused with the question as "
            f"asked, weight {stored.question_as_asked_weight:g})") in texts
    assert stored.anchor_places
    for document, place in stored.anchor_places.items():
        assert (f"{plain(document)} (part {stored.anchor_weights[document]:.2f}, own search "
                f"place {place})") in texts
    parts = next(d.value for d in at.dataframe if "Part" in d.value.columns)
    assert {"Part", "Weight", "Why"} == set(parts.columns)
    assert "no subject" in set(parts["Part"]) and parts["Weight"].sum() > 0
    at.toggle(key="ask_compare").set_value(True).run()
    assert not at.exception
    moves = at.dataframe[-1].value
    assert {"Unanchored place", "Anchored place", "Move"} <= set(moves.columns)


def test_an_earlier_conversation_can_be_picked_and_a_new_one_started(dashboard_workbench):
    first = dashboard_workbench.ask("acme", "How are backups protected?")
    dashboard_workbench.ask("acme", "Who approves access requests?")
    at = page("ask").run()
    at.selectbox(key="ask_conversation_acme").set_value(first.conversation_id).run()
    assert not at.exception
    assert [m for m in at.chat_message if m.name == "user"][0].markdown[0].value == (
        "How are backups protected?")
    at.button(key="ask_new").click().run()
    assert at.selectbox(key="ask_conversation_acme").value == "new"
    assert not at.chat_message


def test_another_vendors_conversations_are_never_listed(dashboard_workbench):
    dashboard_workbench.ask("northwind", "How is stored data encrypted?")
    at = page("ask").run()
    assert at.selectbox(key="ask_conversation_acme").options == ["New conversation"]
    at = page("ask", vendor="northwind").run()
    assert len(at.selectbox(key="ask_conversation_northwind").options) == 2


def test_an_empty_question_is_refused_in_one_sentence(dashboard_workbench):
    at = page("ask").run()
    ask(at, "   ")
    assert "The question is empty" in at.error[0].value
    assert dashboard_workbench.conversations("acme") == []
