"""Evidence library: what the store holds per vendor."""

import pandas as pd
import streamlit as st

from dashboard.resources import get_workbench

workbench = get_workbench()
st.title("Evidence library")
statuses = workbench.status()
if not statuses:
    st.info("The store is empty.")
    st.stop()
st.dataframe(
    pd.DataFrame([s.model_dump() for s in statuses]).drop(columns=["by_type"]),
    hide_index=True,
)
