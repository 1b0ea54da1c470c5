"""First start: the store is empty, so the bundled sample data is indexed in the background
while this page shows what is happening; the pages open by themselves when it is done."""

from __future__ import annotations

import streamlit as st

from dashboard import first_start, resources
from dashboard.first_start import IndexingStatus
from dashboard.text import plain

# How often the progress is redrawn, and so the longest wait for the pages once it is done.
REFRESH_S = 0.5

workbench = resources.get_workbench()


def show(status: IndexingStatus) -> None:
    """The current step, how far the steps are, the time taken, and the steps done."""
    where = f"Step {min(status.done + 1, status.total)} of {status.total}: " if status.total else ""
    st.progress(status.fraction, text=plain(f"{where}{status.step}"))
    st.markdown(plain(" · ".join(filter(None, [status.detail,
                                               f"{status.elapsed_s:.0f} s elapsed"]))))
    for label, seconds in status.finished_steps:
        st.caption(plain(f"Done: {label} ({seconds:.1f} s)"))


@st.fragment(run_every=REFRESH_S)
def progress() -> None:
    status = first_start.sample_indexing(workbench)
    if status is None or status.state == "failed":
        st.rerun()  # the whole app: the pages, or the failure
    show(status)


# One container holds the whole page: the first page drawn after it replaces it whole, so no
# line of the progress lingers while that page is drawn.
with st.container():
    st.title("Indexing the sample data")
    st.caption(plain(
        "The store is empty, so the workbench indexes the two sample vendors of sample_data/ "
        "once. The pages open by themselves when it is done; a later start opens them at "
        "once."))
    status = first_start.sample_indexing(workbench)
    if status is None:
        st.rerun()
    elif status.state == "failed":
        st.error(status.error)
        if st.button("Try again", help="Index the sample data again; what is stored is kept."):
            first_start.retry_sample_indexing(workbench)
            st.rerun()
    else:
        progress()
