"""The "LLM context" page: the exact context and prompt, downloads, the index map, sizes."""

from __future__ import annotations

import re

import streamlit as st

from tests.conftest import AES_CRITERION
from tests.dashboard.conftest import page


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
    assert "<source>kms_key_configuration.md</source>" in context.value
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


def test_map_has_one_row_per_index(dashboard_workbench):
    trace = dashboard_workbench.retrieve("acme", AES_CRITERION, "precedence")
    indexes = re.findall(r"<(index_\d+)>", trace.context)

    at = page("context").run()

    rows = next(d.value for d in at.dataframe if "Index" in d.value.columns)
    assert [f"index_{i}" for i in range(1, len(indexes) + 1)] == indexes
    assert list(rows["Index"]) == [f"<{i}>" for i in indexes]
    last = rows.iloc[-1]
    assert last["Kind"] == "follow-ups"
    assert last["Rounds"] == ", ".join(str(f.round_number) for f in trace.followups)
    assert last["Ids"] == ", ".join(f.id for f in trace.followups)
    first = rows.iloc[0]
    assert first["Source"] == trace.evidence[0].source
    assert first["Ids"] == trace.evidence[0].id
    assert first["Type"] == trace.evidence[0].type


def test_sizes_in_tokens_and_characters(dashboard_workbench):
    trace = dashboard_workbench.retrieve("acme", AES_CRITERION, "precedence")
    at = page("context").run()

    shown = metrics(at)
    tokens = int(shown["Context: tokens"])
    assert tokens > 0
    assert tokens == dashboard_workbench.count_tokens(trace.context)
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
