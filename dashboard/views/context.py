"""LLM context: the exact XML context and seed-003 prompt, where each entry came from, and
their size."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.analysis import ContextEntry, context_map
from core.models import RetrievalTrace
from dashboard import resources, widgets

MAP_COLUMNS = ["Index", "Kind", "Source", "Pages", "Rounds", "Ids", "Type"]


def map_rows(entries: list[ContextEntry]) -> pd.DataFrame:
    """One row per <index_N> entry of the context: its kind and where it came from."""
    return pd.DataFrame([{
        "Index": f"<index_{e.index}>",
        "Kind": e.kind,
        "Source": e.source,
        "Pages": ", ".join(map(str, e.pages)),
        "Rounds": ", ".join(map(str, e.rounds)),
        "Ids": ", ".join(e.ids),
        "Type": ", ".join(dict.fromkeys(e.types)),
    } for e in entries], columns=MAP_COLUMNS)


def size_metrics(label: str, text: str) -> None:
    """Tokens and characters of one text, side by side."""
    tokens, chars = st.columns(2)
    tokens.metric(f"{label}: tokens", resources.count_tokens(text) if text else 0)
    chars.metric(f"{label}: characters", len(text))


def show_sizes(trace: RetrievalTrace) -> None:
    st.caption(f"Sizes: tokens are counted by the tokenizer of the embedding model "
               f"({trace.embedding_model}); an LLM's own tokenizer will count differently.")
    context_size, prompt_size = st.columns(2)
    with context_size:
        size_metrics("Context", trace.context)
    with prompt_size:
        size_metrics("Prompt", trace.prompt)


def render() -> None:
    """The page: sizes, the entry map, then the context and the prompt to copy or download."""
    chosen = resources.selection()
    widgets.header("LLM context", chosen, with_hash=True)
    trace = resources.current_trace(widgets.require_selection(chosen))
    stem = f"{trace.vendor_id}_{trace.criterion_hash}_{trace.strategy}"

    show_sizes(trace)

    st.subheader("Where each entry came from")
    st.dataframe(map_rows(context_map(trace)), hide_index=True)

    st.subheader("XML context")
    st.caption("Excerpts as <index_1>..<index_N>, the criterion's linked follow-ups last. "
               "Copy it with the button at the top right of the block.")
    if not trace.context:
        st.info("Nothing was retrieved for this criterion: the context is empty.")
    st.download_button("Download the context (.xml)", trace.context,
                       file_name=f"context_{stem}.xml", mime="text/xml",
                       key="download_context", icon=":material/download:", on_click="ignore")
    st.code(trace.context, language="xml", wrap_lines=True, height=520)

    st.subheader("Prompt (seed 003)")
    st.caption("Follow-up answers first, newest round first, then the excerpts and the "
               "criterion.")
    st.download_button("Download the prompt (.txt)", trace.prompt,
                       file_name=f"prompt_{stem}.txt", mime="text/plain",
                       key="download_prompt", icon=":material/download:", on_click="ignore")
    st.code(trace.prompt, language=None, wrap_lines=True, height=520)


# Streamlit runs a page file as __main__; importing it defines the functions above without
# drawing the page or opening a store.
if __name__ == "__main__":
    render()
