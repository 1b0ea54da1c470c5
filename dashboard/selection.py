"""The reviewer's selection: the vendor, criterion and strategy chosen in the sidebar, kept in
session state and shared by every page."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from core.retrieval.strategies import DEFAULT_STRATEGY


@dataclass(frozen=True)
class Selection:
    vendor_id: str
    criterion: str
    strategy: str


def selection() -> Selection | None:
    """The vendor, criterion and strategy chosen in the sidebar (shared by every page)."""
    vendor = st.session_state.get("vendor")
    criterion = (st.session_state.get("criterion") or "").strip()
    strategy = st.session_state.get("strategy") or DEFAULT_STRATEGY
    if not vendor or not criterion:
        return None
    return Selection(vendor, criterion, strategy)


def selected_vendor() -> str | None:
    """The vendor chosen in the sidebar (pages that need no criterion use this)."""
    return st.session_state.get("vendor") or None
