"""Audit log: who logged in, viewed, asked, exported, decided, judged and ingested what, and
every refused attempt, filtered by vendor, user and time; with the check of its hash chain.
An admin's page in a team's dashboard; its own viewing is recorded too."""

from __future__ import annotations

from datetime import UTC, datetime, time

import pandas as pd
import streamlit as st

from core.errors import EvidenceError
from dashboard import auth, resources, widgets

COLUMNS = ["#", "When (UTC)", "User", "Action", "Vendor", "Criterion", "Page", "Strategy",
           "Context SHA-256", "Detail"]


def entries_table(entries: list) -> pd.DataFrame:
    return pd.DataFrame([{
        "#": e.seq,
        "When (UTC)": e.at.replace("T", " ")[:19],
        "User": e.user,
        "Action": e.action,
        "Vendor": e.vendor or "",
        "Criterion": e.criterion or "",
        "Page": e.page or "",
        "Strategy": e.strategy or "",
        "Context SHA-256": (e.context_sha256 or "")[:16],
        "Detail": e.detail or "",
    } for e in reversed(entries)], columns=COLUMNS)


def render() -> None:
    widgets.header("Audit log", None)
    if not auth.refuse_action("audit", None, "The audit log needs the admin role."):
        st.stop()
    log = resources.get_workbench().store.audit_log()
    team = auth.current()
    vendors = sorted(auth.visible(resources.vendor_ids()))
    vendor_col, user_col, since_col = st.columns(3)
    vendor = vendor_col.selectbox("Vendor", ["every vendor", *vendors], key="audit_vendor")
    user = user_col.text_input("User (exact)", key="audit_user").strip()
    since = since_col.date_input("Since", value=None, key="audit_since", format="YYYY-MM-DD")
    try:
        entries = log.entries(vendor=None if vendor == "every vendor" else vendor,
                              user=user or None,
                              since=datetime.combine(since, time(0), UTC) if since else None)
    except EvidenceError as exc:
        widgets.stop_on_error(exc, "The audit log could not be read")
    # An admin of some vendors reads their entries and those of no vendor (logins).
    entries = [e for e in entries if e.vendor is None or team is None
               or team.rights.sees(e.vendor)]
    auth.record_once("audit_view", page="Audit log",
                detail=f"vendor={vendor}, user={user or 'any'}, since={since or 'the start'}")
    if st.button("Check the chain", key="audit_verify", icon=":material/verified:",
                 help="Reads every entry and checks each against the one before it."):
        check = log.verify()
        if check.ok:
            st.success(f"The chain holds: {check.count} entries, the newest hash "
                       f"{check.head[:16]}... (keep it elsewhere to prove later that "
                       "nothing before it changed).")
        else:
            st.error(f"The audit log was changed: {check.problem}")
    st.caption(f"{len(entries)} entries shown, newest first.")
    st.dataframe(entries_table(entries), hide_index=True,
                 column_config={"Detail": st.column_config.TextColumn(width="large")})


if __name__ == "__main__":
    render()
