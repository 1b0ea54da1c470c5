"""LLM context: the language model's verdict on the prompt, the exact XML context and
seed-003 prompt, where each entry came from, and their size."""

from __future__ import annotations

from typing import Literal

import pandas as pd
import streamlit as st

from core.errors import EvidenceError
from core.models import RetrievalTrace
from core.review.llm.client import LLMError
from core.review.verdicts import NO_VERDICT, Verdict, VerdictStatus
from core.trace.analysis import ContextEntry, context_map, kind_label
from dashboard import actions, auth, resources, widgets
from dashboard.selection import Selection, selection
from dashboard.text import minute_utc, plain, rounds_label

VERDICT_COLORS: dict[str, Literal["green", "red", "gray"]] = {
    "MET": "green", "NOT_MET": "red", "INCONCLUSIVE": "gray"}
SOURCE_KIND_LABELS = {"attested": "independently attested",
                      "vendor_statement": "the vendor's own statement"}
NOT_CHECKED = ("Quotes not checked: this verdict was given before verdicts quoted their "
               "sources, so it counts as the model gave it.")

MAP_COLUMNS = ["Index", "Kind", "Source", "Pages", "Rounds", "Ids", "Type"]


def map_rows(entries: list[ContextEntry], trace: RetrievalTrace | None = None
             ) -> pd.DataFrame:
    """One row per entry of the context: its kind and where it came from, the types in
    words; the <current_answer> first where the strategy's context leads with it."""
    rows = []
    current = trace.current_answer if trace is not None else None
    if current is not None and trace.context.startswith("<current_answer>"):
        rows.append({"Index": "<current_answer>", "Kind": "the current answer",
                     "Source": current.source, "Pages": "",
                     "Rounds": str(current.round_number), "Ids": current.id,
                     "Type": kind_label(f"followup_response:{current.round_number}")})
    rows += [{
        "Index": f"<index_{e.index}>",
        "Kind": e.kind,
        "Source": e.source,
        "Pages": ", ".join(map(str, e.pages)),
        "Rounds": ", ".join(map(str, e.rounds)),
        "Ids": ", ".join(e.ids),
        "Type": ", ".join(dict.fromkeys(kind_label(t, r) for t, r in zip(
            e.types, e.rounds or (None,) * len(e.types), strict=False))),
    } for e in entries]
    return pd.DataFrame(rows, columns=MAP_COLUMNS)


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


def outcome_text(verdict: Verdict) -> str:
    """Whether the verdict was asked for just now or read back from the store."""
    if verdict.cached:
        return (f"Read back from the store: {verdict.model} already answered this exact prompt, "
                "so it was not sent again.")
    return f"Sent to {verdict.model}; its verdict is stored with the vendor's evidence."


def one_quote(text: str) -> str:
    """A quote on one line, between curly quotes, every markdown character escaped."""
    return f"\u201c{plain(' '.join(text.split()))}\u201d"


def quote_lines(verdict: Verdict) -> list[str]:
    """One markdown list item per quote: verified or not, its source and the source's kind,
    and the quote, every vendor or model word escaped."""
    lines = []
    for q in verdict.quotes:
        mark = "verified" if q.verified else "not verified"
        kind = SOURCE_KIND_LABELS[q.source_kind] if q.source_kind else "no such source"
        lines.append(f"- {mark} · {plain(q.source_label or q.source)} ({kind}): "
                     f"{one_quote(q.quote)}")
    return lines


def unverified_lines(verdict: Verdict) -> list[str]:
    """One markdown list item per quote that does not hold or is missing, and why."""
    return [f"- {plain(u.source or 'the verdict')}"
            + (f" {one_quote(u.quote)}" if u.quote else "") + f": {plain(u.reason)}"
            for u in verdict.unverified_quotes]


def rests_on_text(verdict: Verdict) -> str:
    """What the verified quotes rest on, in words."""
    if not verdict.rests_on:
        return "no verified quote"
    return " and ".join(SOURCE_KIND_LABELS[kind] for kind in verdict.rests_on)


def show_counted(verdict: Verdict) -> None:
    """How the verdict counts: its quotes verified, or unverified and counted INCONCLUSIVE, or
    never checked."""
    if verdict.verified is None:
        st.caption(NOT_CHECKED)
    elif verdict.verified:
        st.badge("Quotes verified", color="green", icon=":material/format_quote:")
    else:
        st.badge(f"Counted as {verdict.counted_as}: unverified", color="orange",
                 icon=":material/format_quote:")


def show_quotes(verdict: Verdict) -> None:
    """Each quote with its source and the source's kind, and why any does not hold."""
    if verdict.verified is None:
        return
    if verdict.verified is False:
        st.markdown(f"**Unverified:** the model said {verdict.verdict}, but its quotes do not "
                    f"hold, so it counts as {verdict.counted_as}.\n"
                    + "\n".join(unverified_lines(verdict)))
    st.markdown("**Quotes:**\n" + "\n".join(quote_lines(verdict)) if verdict.quotes
                else "**Quotes:** none")
    st.markdown(f"**Rests on:** {rests_on_text(verdict)}")


def show_verdict(status: VerdictStatus) -> None:
    """The stored verdict for the selection, marked current or stale, or that there is none."""
    verdict = status.verdict
    if verdict is None:
        st.caption(NO_VERDICT)
        return
    st.badge(verdict.verdict, color=VERDICT_COLORS[verdict.verdict])
    show_counted(verdict)
    if status.stale:
        st.warning(f"Stale: {status.stale_reason}", icon=":material/history:")
    else:
        st.caption("Current: this verdict answered the prompt below, as the store gives it now.")
    st.markdown("**Reasoning:** " + plain(verdict.reasoning))
    if verdict.contradictions:
        st.markdown("**Contradictions between rounds:**\n"
                    + "\n".join(f"- {plain(c)}" for c in verdict.contradictions))
    else:
        st.markdown("**Contradictions between rounds:** none")
    st.markdown(f"**Cited:** {rounds_label(verdict.cited_rounds)} · **model** "
                f"{plain(verdict.model)} · **assessed** "
                f"{minute_utc(verdict.assessed_at, verdict.assessed_at)}")
    show_quotes(verdict)
    st.caption(f"Prompt sha256 `{verdict.prompt_sha256}`")


def show_assessment(chosen: Selection) -> None:
    """The Assess button (disabled, with the settings to set, when no language model is
    configured), then the stored verdict for the selection."""
    st.subheader("Verdict")
    missing = actions.llm_missing()
    if missing:
        st.info(missing)
    if not auth.may("assess", chosen.vendor_id):
        st.caption("Assessing needs the reviewer role; yours may read the verdicts given.")
    elif st.button("Assess", key="context_assess", type="primary", disabled=missing is not None,
                 help="Send the prompt below to the configured language model; a prompt it "
                      "already answered is read back instead of sent again."):
        try:
            verdict = actions.assess(chosen.vendor_id, chosen.criterion, chosen.strategy)
            auth.record("assess", vendor=chosen.vendor_id, criterion=chosen.criterion,
                        strategy=chosen.strategy, detail=verdict.verdict)
            st.success(outcome_text(verdict))
        except LLMError as exc:
            st.error(str(exc))
        except EvidenceError as exc:
            widgets.show_error(exc, "The assessment failed")
    show_verdict(actions.verdict_status(chosen.vendor_id, chosen.criterion, chosen.strategy))


def render() -> None:
    """The page: the verdict, sizes, the entry map, then the context and the prompt to copy or
    download."""
    chosen = selection()
    widgets.header("LLM context", chosen, with_hash=True)
    chosen = widgets.require_selection(chosen)
    trace = actions.current_trace(chosen)
    stem = f"{trace.vendor_id}_{trace.criterion_hash}_{trace.strategy}"

    show_assessment(chosen)
    st.subheader("Size")
    show_sizes(trace)

    st.subheader("Where each entry came from")
    st.dataframe(map_rows(context_map(trace), trace), hide_index=True)

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
