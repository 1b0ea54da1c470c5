"""The "LLM context" page: the exact context and prompt, downloads, the index map, sizes."""

from __future__ import annotations

import hashlib
import re

import streamlit as st

from core.ingest.rounds.payload import parse_payload
from core.review.llm.client import describe_missing
from core.review.verdicts import NO_VERDICT, STALE_REASON
from core.trace.analysis import kind_label
from dashboard import resources
from tests.conftest import AES_CRITERION
from tests.dashboard.conftest import page
from tests.support import payloads
from tests.support.sentences import one_sentence

pytest_plugins = ["tests.llm_stub"]


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_code_blocks_are_the_exact_context_and_prompt(dashboard_workbench):
    trace = dashboard_workbench.retrieve("acme", AES_CRITERION, "precedence")

    at = page("context").run()

    assert not at.exception
    assert at.title[0].value == "LLM context"
    assert "acme" in at.caption[0].value and AES_CRITERION in at.caption[0].value
    context, prompt = at.code
    assert context.language == "xml"
    assert context.value == trace.context
    assert prompt.value == trace.prompt
    assert "<source>kms_key_configuration.md \u00a7 " in context.value  # its section follows
    assert "(Multiple Rounds)" in context.value
    assert "Source 1: Direct Vendor Responses" in prompt.value


def test_download_buttons(dashboard_workbench, monkeypatch):
    trace = dashboard_workbench.retrieve("acme", AES_CRITERION, "precedence")
    offered: dict[str, tuple[str, str]] = {}
    real = st.download_button

    def recording(label, data, file_name=None, *args, **kwargs):
        offered[label] = (file_name, data)
        return real(label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", recording)
    at = page("context").run()

    assert not at.exception
    assert [b.label for b in at.get("download_button")] == [
        "Download the context (.xml)", "Download the prompt (.txt)"]
    stem = f"acme_{trace.criterion_hash}_precedence"
    assert offered["Download the context (.xml)"] == (f"context_{stem}.xml", trace.context)
    assert offered["Download the prompt (.txt)"] == (f"prompt_{stem}.txt", trace.prompt)


def test_map_has_one_row_per_entry_the_current_answer_first(dashboard_workbench):
    trace = dashboard_workbench.retrieve("acme", AES_CRITERION, "precedence")
    indexes = re.findall(r"<(index_\d+)>", trace.context)

    at = page("context").run()

    rows = next(d.value for d in at.dataframe if "Index" in d.value.columns)
    assert [f"index_{i}" for i in range(1, len(indexes) + 1)] == indexes
    assert list(rows["Index"]) == ["<current_answer>", *(f"<{i}>" for i in indexes)]
    current = rows.iloc[0]
    assert (current["Kind"], current["Rounds"], current["Ids"], current["Type"]) == (
        "the current answer", "5", trace.current_answer.id, "round 5 answer")
    last = rows.iloc[-1]
    assert last["Kind"] == "follow-ups"
    assert last["Rounds"] == ", ".join(str(f.round_number) for f in trace.followups)
    assert last["Ids"] == ", ".join(f.id for f in trace.followups)
    first = rows.iloc[1]
    assert first["Source"] == trace.evidence[0].source
    assert first["Ids"] == trace.evidence[0].id
    assert first["Type"] == kind_label(trace.evidence[0].type, trace.evidence[0].round_number)


def test_sizes_in_tokens_and_characters(dashboard_workbench):
    trace = dashboard_workbench.retrieve("acme", AES_CRITERION, "precedence")
    at = page("context").run()

    shown = metrics(at)
    tokens = int(shown["Context: tokens"])
    assert tokens > 0
    assert tokens == dashboard_workbench.embedder.count_tokens(trace.context)
    assert int(shown["Prompt: tokens"]) > tokens
    assert int(shown["Context: characters"]) == len(trace.context)
    assert any("fake-bag-of-words" in c.value and "tokenizer" in c.value for c in at.caption)


def test_other_strategy_and_vendor(dashboard_workbench):
    trace = dashboard_workbench.retrieve("northwind", AES_CRITERION, "semantic")
    at = page("context", vendor="northwind", strategy="semantic").run()

    assert not at.exception
    assert at.code[0].value == trace.context
    rows = next(d.value for d in at.dataframe if "Index" in d.value.columns)
    assert set(rows["Kind"]) == {"excerpt"}  # semantic puts no follow-up entry last
    assert "KMS" not in trace.context  # acme's key service never shows for northwind


# The verdict: Assess with a language model, or a notice without one -------------------------

ANSWER = {"verdict": "NOT_MET",
          "reasoning": "Round 3 says the archive database is *not* encrypted yet.",
          "contradictions": ["Round 1 claims every store is encrypted; round 3 says the "
                             "archive is not."],
          "cited_rounds": [3, 5]}


def shown_text(at) -> str:
    """Every text element of the page, markdown escapes removed."""
    parts = [e.value for kind in ("markdown", "caption", "info", "success", "warning", "error")
             for e in getattr(at, kind)]
    return "\n".join(parts).replace("\\", "")


def test_without_a_language_model_the_button_is_disabled_and_says_why(dashboard_workbench):
    missing = describe_missing(dashboard_workbench.settings)
    assert missing is not None
    at = page("context").run()

    assert not at.exception and not at.error
    assert [i.value for i in at.info] == [missing]
    assert at.button(key="context_assess").disabled
    assert NO_VERDICT in shown_text(at)
    assert not any(v in shown_text(at) for v in ("NOT_MET", "INCONCLUSIVE", "Reasoning"))


def test_assess_shows_the_verdict_then_reads_it_back(dashboard_workbench_llm, llm_stub):
    trace = dashboard_workbench_llm.retrieve("acme", AES_CRITERION, "precedence")
    at = page("context").run()
    assert not at.info  # a language model is configured: no notice
    assert not at.button(key="context_assess").disabled
    assert NO_VERDICT in shown_text(at)
    assert not llm_stub.requests  # nothing is sent before the button

    llm_stub.enqueue(ANSWER)
    at.button(key="context_assess").click().run()

    assert not at.exception and not at.error
    [request] = llm_stub.requests
    assert request.messages == [{"role": "user", "content": trace.prompt}]
    text = shown_text(at)
    assert [s.value for s in at.success] == [
        "Sent to stub-model; its verdict is stored with the vendor's evidence."]
    markdown = [m.value for m in at.markdown]
    assert ":red-badge[NOT_MET]" in markdown
    assert "Current: this verdict answered the prompt below" in text
    assert ANSWER["reasoning"] in text
    assert any(r"\*not\*" in m for m in markdown)  # vendor-led text is never markup
    assert ANSWER["contradictions"][0] in text
    assert "**Cited:** rounds 3, 5 · **model** stub-model" in text
    sha = hashlib.sha256(trace.prompt.encode("utf-8")).hexdigest()
    assert f"Prompt sha256 `{sha}`" in text

    # Pressed again, the same prompt is read back from the store, not sent.
    at.button(key="context_assess").click().run()
    assert len(llm_stub.requests) == 1
    assert [s.value for s in at.success] == [
        "Read back from the store: stub-model already answered this exact prompt, so it was "
        "not sent again."]

    # Another session (a fresh page) shows the stored verdict without pressing anything.
    again = page("context").run()
    assert "NOT_MET" in shown_text(again) and not again.success
    assert len(llm_stub.requests) == 1


def test_a_changed_store_marks_the_stored_verdict_stale(dashboard_workbench_llm, llm_stub):
    llm_stub.enqueue(ANSWER)
    at = page("context").run()
    at.button(key="context_assess").click().run()
    assert "Current:" in shown_text(at)

    payload = payloads.round_payload(6, [payloads.response(
        "Is the archive encrypted now?", "Yes, since August.", AES_CRITERION)],
        timestamp="2024-09-01T09:00:00Z")
    list(dashboard_workbench_llm.ingest_questionnaires([parse_payload(payload)]))
    resources.store_changed()  # what the Evidence library page calls after an ingest
    at.run()

    assert not at.exception
    [warning] = at.warning
    assert warning.value == f"Stale: {STALE_REASON}"
    assert "NOT_MET" in shown_text(at) and "Current:" not in shown_text(at)


def test_a_failing_endpoint_is_one_sentence_and_stores_nothing(dashboard_workbench_llm,
                                                                llm_stub):
    llm_stub.enqueue(status=500, error="model crashed")
    at = page("context").run()
    at.button(key="context_assess").click().run()

    assert not at.exception
    [error] = at.error
    assert error.value.startswith("The language model at " + llm_stub.base_url)
    assert one_sentence(error.value), error.value
    assert not at.success
    assert NO_VERDICT in shown_text(at)
    status = dashboard_workbench_llm.verdicts.latest("acme", AES_CRITERION, "precedence")
    assert status.verdict is None
