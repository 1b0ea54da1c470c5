"""The reviewer dashboard: `streamlit run dashboard/app.py`."""

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any folder

from core.errors import EvidenceError  # noqa: E402
from core.installation import installation_problem  # noqa: E402
from core.retrieval.strategies import DEFAULT_STRATEGY, STRATEGIES  # noqa: E402
from dashboard import auth, first_start, resources  # noqa: E402

st.set_page_config(page_title="Evidence precedence workbench", layout="wide")
if problem := installation_problem():  # another distribution's `core` beside ours
    st.error(problem)
    st.stop()
views = Path(__file__).parent / "views"
CRITERION_PAGES = {"Criterion overview", "Precedence tiers", "Boosted vs unboosted",
                   "Round progression", "LLM context"}


def read_store(read):
    """What `read` returns; a store that cannot be read (a server that does not answer, or
    refuses the token) is one error block, and the app stops there."""
    try:
        return read()
    except EvidenceError as exc:
        st.error(str(exc))
        st.stop()


team = read_store(auth.gate)  # the login page, or who is in and what they may see

if read_store(lambda: first_start.sample_indexing(resources.get_workbench())) is not None:
    # First start on an empty store: one page shows the indexing until the store is ready.
    st.navigation([st.Page(views / "first_start.py", title="Indexing the sample data",
                           icon=":material/hourglass_top:")]).run()
    st.stop()

vendors = auth.visible(read_store(resources.vendor_ids))
asked = st.query_params.get("vendor")
if asked is not None:  # a link to one vendor: /?vendor=acme
    del st.query_params["vendor"]
    if asked in vendors:
        st.session_state["vendor"] = asked
    elif team is not None:
        auth.refuse_vendor(asked, page="link")
if team is not None and st.session_state.get("vendor") not in (None, *vendors):
    auth.refuse_vendor(st.session_state.pop("vendor"), page="session")  # no longer theirs
with st.sidebar:
    st.markdown("### Evidence precedence")
    if team is not None:
        st.caption(f"Signed in as {team.identity} ({team.rights.top_role or 'no role'})")
        st.button("Log out", key="logout", on_click=auth.log_out)
    if vendors:
        st.selectbox("Vendor", vendors, key="vendor")
    elif team is not None and not team.rights.roles:
        st.info("Your groups give you no vendor: ask an admin to add one of them to the "
                "access file.")
    else:
        st.info("No vendor yet: upload evidence in the Evidence library.")
    vendor = st.session_state.get("vendor")
    # The vendor's own criteria: the lists used with it, what its rounds answer, what was
    # decided; the sample's list only while no vendor is chosen.
    criteria = ([e.text for e in read_store(lambda: resources.vendor_criteria(vendor))]
                if vendor else resources.sample_criteria())
    if "criterion" not in st.session_state and criteria:
        st.session_state["criterion"] = criteria[0]
    typed = st.session_state.get("criterion")
    # A criterion the reviewer typed (or chose for another vendor) stays in the list, so it
    # can be picked again.
    options = criteria + ([typed] if typed and typed not in criteria else [])
    st.selectbox(
        "Criterion", options, key="criterion", accept_new_options=True,
        help="The criteria used with this vendor (its criteria lists, the questions its "
             "rounds answer, the ones decided), or type your own and press Enter.",
    )
    st.selectbox(
        "Strategy", list(STRATEGIES), key="strategy",
        index=list(STRATEGIES).index(DEFAULT_STRATEGY),
        format_func=lambda name: f"{name} (seed {STRATEGIES[name].seed})",
        help="Each seed design, run on the same store.",
    )

if not st.session_state.get("reranker_told"):
    # Said once per session, on the first page shown: it holds for every page.
    st.session_state["reranker_told"] = True
    _reranker, reranker_status = resources.get_workbench().reranker()
    if not reranker_status.ran:
        st.info("No reranker model is installed here, so every page keeps the excerpts in "
                "their search order and shows no rerank score (the reason is in each "
                "criterion's retrieval details); `evidence models` says where to put one.",
                icon=":material/info:")

page = st.navigation({
    "Criterion": [
        st.Page(views / "overview.py", title="Criterion overview", icon=":material/summarize:",
                default=True),
        st.Page(views / "tiers.py", title="Precedence tiers", icon=":material/stacks:"),
        st.Page(views / "rankings.py", title="Boosted vs unboosted",
                icon=":material/swap_vert:"),
        st.Page(views / "rounds.py", title="Round progression", icon=":material/timeline:"),
        st.Page(views / "context.py", title="LLM context", icon=":material/description:"),
    ],
    "Conversation": [
        st.Page(views / "ask.py", title="Ask the evidence", icon=":material/forum:"),
    ],
    "Vendor": [
        st.Page(views / "next_round.py", title="Next round", icon=":material/forward_to_inbox:"),
        st.Page(views / "pack.py", title="Evidence pack", icon=":material/inventory_2:"),
        st.Page(views / "decisions.py", title="Decisions", icon=":material/gavel:"),
    ],
    "Quality": [
        st.Page(views / "quality.py", title="Strategy quality", icon=":material/query_stats:"),
    ],
    "Store": [
        st.Page(views / "library.py", title="Evidence library", icon=":material/folder_open:"),
        st.Page(views / "criteria.py", title="Criteria and controls",
                icon=":material/link:"),
        *([st.Page(views / "audit.py", title="Audit log", icon=":material/policy:")]
          if team is not None and auth.may("audit") else []),
    ],
}, expanded=True)  # every page listed: collapsed, the menu hides those past the tenth
auth.begin_page()
try:
    read_store(page.run)  # a page's own errors are its own; this catches what none of them do
finally:
    criterion_page = page.title in CRITERION_PAGES
    auth.record_view(page.title, st.session_state.get("vendor"),
                     st.session_state.get("criterion") if criterion_page else None,
                     st.session_state.get("strategy") if criterion_page else None)
