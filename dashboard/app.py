"""The reviewer dashboard: `streamlit run dashboard/app.py`."""

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any folder

from dashboard.resources import ensure_sample_data, get_workbench  # noqa: E402

st.set_page_config(page_title="Evidence precedence workbench", layout="wide")
ensure_sample_data(get_workbench())
page = st.navigation([st.Page("views/library.py", title="Evidence library", default=True)])
page.run()
