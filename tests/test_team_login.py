"""A team's dashboard in a real browser, logged in for real: an OpenID Connect provider on
127.0.0.1 (tests/support/oidc.py), the dashboard served by `streamlit run` with [auth]
secrets pointing at it and an access file mapping the provider's groups to roles, and
headless Chromium walking the login, what each user may see and do, the refusal of a vendor
reached by URL, the audit log's record of it, and the logout. Streamlit's own login routes
and cookies do the work; nothing of Streamlit is patched. Screenshots land in
tests/artifacts/team_*.png.

The first test proves the harness on a small Streamlit app of its own, before the dashboard
is involved: log in, read the ID token's claims back from st.user, log out."""

from __future__ import annotations

import contextlib
import json
import os
import shutil

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from tests.conftest import AES_CRITERION, REPO
from tests.support.cli import environment, json_lines, run_process
from tests.support.oidc import (
    TEAM_USERS,
    WAIT_MS,
    Provider,
    TeamDashboard,
    choose_user,
    end_session,
    oidc_provider,
    streamlit_app,
    team_dashboard,
)
from tests.support.streamlit_page import wait_until_idle
from tests.test_browser import ARTIFACTS

# Picking an option: tries, and how long each waits for the option to take the click.
CHOOSE_ATTEMPTS = 6
CHOOSE_WAIT_MS = 30_000

pytestmark = pytest.mark.browser

LOGIN_TEXT = "Sign in with your team's identity provider"
SAMPLE_VENDORS = ("acme", "lumen", "northwind")

# A Streamlit app of the harness's own: who is logged in and every claim st.user holds.
PROBE_APP = """\
import json

import streamlit as st

st.title("Login probe")
if st.user.is_logged_in:
    st.markdown(f"Logged in as {st.user.email}")
    st.code(json.dumps(st.user.to_dict(), sort_keys=True), language="json")
    if st.button("Log out"):
        st.logout()
else:
    st.markdown("Nobody is logged in.")
    if st.button("Log in"):
        st.login()
"""


@pytest.fixture(scope="module")
def provider():
    with oidc_provider() as running:
        yield running


@contextlib.contextmanager
def _fresh_page(browser, height: int = 1600):
    """A page in a browser context of its own: its own cookies, so its own login."""
    context = browser.new_context(viewport={"width": 1440, "height": height})
    context.set_default_timeout(WAIT_MS)  # a busy machine draws slowly; a hang still fails
    try:
        yield context.new_page()
    finally:
        context.close()


def _wait_until_idle(page) -> None:
    wait_until_idle(page, WAIT_MS)


def _wait_for_text(page, text: str, where: str = "body") -> None:
    page.wait_for_function(
        "([where, text]) => (document.querySelector(where)?.innerText ?? '').includes(text)",
        arg=[where, text], timeout=WAIT_MS)


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _identity_cookies(page) -> list[str]:
    """The names of the browser's Streamlit identity cookies (the user and the tokens)."""
    return sorted(c["name"] for c in page.context.cookies()
                  if c["name"].startswith("_streamlit_user"))


# The harness ---------------------------------------------------------------------------------

def test_the_harness_logs_in_and_out_of_a_streamlit_app(tmp_path, browser, provider):
    """Streamlit finds the written [auth] secrets through --secrets.files, the provider's
    authorization page signs a predefined user in, the groups reach st.user through the ID
    token (with the standard scopes only), a user without groups has no groups claim, and
    the logout passes through the provider's end-session page and drops the cookies."""
    metadata = provider.metadata()
    assert metadata["issuer"] == provider.url
    assert metadata["end_session_endpoint"] == f"{provider.url}/oauth2/end_session"
    script = tmp_path / "probe" / "probe_app.py"
    script.parent.mkdir()
    script.write_text(PROBE_APP, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVIDENCE_")}
    with streamlit_app(script, tmp_path, provider, env=env, cwd=script.parent) as served, \
            _fresh_page(browser, 1000) as page:
        assert served.secrets == tmp_path / ".streamlit" / "secrets.toml"
        page.goto(served.url)
        _wait_for_text(page, "Nobody is logged in.")
        for email in ("alice@example.com", "dave@example.com"):
            page.get_by_role("button", name="Log in").click()
            choose_user(page, provider, email, served.url)
            _wait_for_text(page, f"Logged in as {email}")
            claims = json.loads(page.get_by_test_id("stCode").inner_text())
            assert claims["is_logged_in"] is True
            assert claims["email"] == claims["sub"] == email
            assert claims["iss"] == provider.url
            if TEAM_USERS[email] is None:
                assert "groups" not in claims, claims
            else:
                assert claims["groups"] == list(TEAM_USERS[email]), claims
            assert _identity_cookies(page)

            page.get_by_role("button", name="Log out").click()
            end_session(page, provider, served.url)
            _wait_for_text(page, "Nobody is logged in.")
            assert not _identity_cookies(page)
            page.reload()  # the logout holds: no cookie brings the user back
            _wait_for_text(page, "Nobody is logged in.")
    log = served.log.read_text(errors="replace")
    assert "Traceback" not in log, log


# The dashboard in team mode ------------------------------------------------------------------

@pytest.fixture(scope="module")
def team(tmp_path_factory, sample_store, provider):
    """The dashboard in team mode on a copy of the sample store (acme and northwind)."""
    work = tmp_path_factory.mktemp("team-dashboard")
    store = work / "store"
    shutil.copytree(sample_store, store)
    with team_dashboard(work, store, provider) as served:
        yield served


def _main_text(page) -> str:
    return page.get_by_test_id("stMain").inner_text()


def _sidebar(page):
    return page.get_by_test_id("stSidebar")


def _selectbox(scope, label: str):
    """The select box labelled `label` within `scope` (the sidebar or the main area)."""
    return scope.get_by_test_id("stSelectbox").filter(
        has=scope.page.get_by_test_id("stWidgetLabel").get_by_text(label, exact=True))


def _options(page, box) -> list[str]:
    """What a select box offers, read from its open list, which is closed again."""
    box.click()
    listbox = page.get_by_test_id("stSelectboxVirtualDropdown")
    listbox.get_by_role("option").first.wait_for(timeout=WAIT_MS)
    offered = [text.strip() for text in listbox.get_by_role("option").all_inner_texts()]
    page.keyboard.press("Escape")
    listbox.wait_for(state="detached", timeout=WAIT_MS)
    return offered


def _choose(page, box, option: str) -> None:
    """Pick an option of a selectbox. A rerun that lands while the list is open draws the
    list again under the pointer (the option found is detached before the click): the list
    is closed and opened again, a bounded number of times."""
    for _ in range(CHOOSE_ATTEMPTS):
        box.click()
        try:
            page.get_by_test_id("stSelectboxVirtualDropdown").get_by_role(
                "option", name=option, exact=True).click(timeout=CHOOSE_WAIT_MS)
            break
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
            _wait_until_idle(page)
    else:
        pytest.fail(f"the option {option!r} could not be picked in {CHOOSE_ATTEMPTS} tries")
    _wait_until_idle(page)


def _log_in(page, team: TeamDashboard, provider: Provider, email: str, role: str) -> None:
    """From the login page to the dashboard as `email`, signed in with `role`."""
    page.goto(team.url)
    _wait_for_text(page, LOGIN_TEXT, "[data-testid='stMain']")
    page.get_by_test_id("stMain").get_by_role("button", name="Log in").click()
    choose_user(page, provider, email, team.url)
    _wait_for_text(page, f"Signed in as {email} ({role})", "[data-testid='stSidebar']")
    _sidebar(page).get_by_role("button", name="Log out").wait_for(timeout=WAIT_MS)
    page.get_by_role("heading", name="Criterion overview").first.wait_for(timeout=WAIT_MS)
    _wait_until_idle(page)


def _choose_criterion(page, criterion: str) -> None:
    """The sidebar's criterion, typed in as a reviewer does, and its overview shown."""
    _selectbox(_sidebar(page), "Criterion").click()
    page.keyboard.type(criterion)
    page.keyboard.press("Enter")
    _wait_for_text(page, f"criterion: {criterion}", "[data-testid='stMain']")
    _wait_until_idle(page)


def _evidence(*args: str) -> str:
    """`evidence ARGS` run as a user runs it; its stdout (it must succeed): one JSON object a
    line for `decisions` and `audit --format json`."""
    done = run_process(*args, env=environment(), cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.model
def test_an_anonymous_visitor_sees_the_login_page_only(team, browser):
    """Before logging in: the login page, its button, and no vendor's name in the page's text
    or in its HTML."""
    with _fresh_page(browser, 1000) as page:
        page.goto(team.url)
        _wait_for_text(page, LOGIN_TEXT, "[data-testid='stMain']")
        _wait_until_idle(page)
        button = page.get_by_test_id("stMain").get_by_role("button", name="Log in")
        button.wait_for(state="visible", timeout=WAIT_MS)  # drawn after the text, under load
        assert button.is_visible()
        shown = page.locator("body").inner_text().lower()
        html = page.content().lower()
        for vendor in SAMPLE_VENDORS:
            assert vendor not in shown, shown
            assert vendor not in html
        _shot(page, "team_login")


@pytest.mark.model
def test_a_reviewer_decides_on_her_vendor_only(team, browser, provider):
    """alice (acme-reviewers) sees acme alone, and a decision she records carries the identity
    she logged in with, not a name typed into the page."""
    with _fresh_page(browser, 2600) as page:
        _log_in(page, team, provider, "alice@example.com", "reviewer")
        assert _options(page, _selectbox(_sidebar(page), "Vendor")) == ["acme"]
        _choose_criterion(page, AES_CRITERION)
        assert "AES-256" in _main_text(page)  # acme's answers: what bob must never see

        main = page.get_by_test_id("stMain")
        assert main.get_by_role("textbox", name="Reviewer").count() == 0
        note = "Round 5 confirms AES-256 on every storage tier."
        box = main.get_by_role("textbox", name="Note")
        box.fill(note)
        box.press("Tab")  # a text area sends its value when it loses the focus
        _wait_until_idle(page)
        _choose(page, _selectbox(main, "Decision"), "Met")
        record = main.get_by_role("button", name="Record decision")
        expect(record).to_be_enabled(timeout=WAIT_MS)  # the page has run with the status
        expect(box).to_have_value(note, timeout=WAIT_MS)
        _wait_until_idle(page)
        record.click()
        _wait_until_idle(page)

        mine: list[dict] = []
        for _ in range(120):  # bounded by attempts: the page writes the decision as it reruns
            mine = [d for d in json_lines(_evidence("--store", str(team.store), "decisions",
                                                  "--vendor", "acme"))
                    if d.get("criterion") == AES_CRITERION]
            if mine:
                break
            page.wait_for_timeout(500)
        assert len(mine) == 1, mine
        decision = mine[0]
        assert decision["reviewer"] == "alice@example.com", decision
        assert decision["status"] == "met" and decision["note"] == note, decision
        assert [d["reviewer"] for d in decision["history"]] == ["alice@example.com"], decision
        _wait_until_idle(page)
        _shot(page, "team_alice_overview")


@pytest.mark.model
def test_a_viewer_reads_his_vendor_and_is_refused_another_by_url(team, browser, provider):
    """bob (northwind-viewers) sees northwind alone, may not decide, and a link to acme shows
    him one refusal and nothing of acme; the refusal is in the audit log."""
    with _fresh_page(browser, 1600) as page:
        _log_in(page, team, provider, "bob@example.com", "viewer")
        assert _options(page, _selectbox(_sidebar(page), "Vendor")) == ["northwind"]
        main = page.get_by_test_id("stMain")
        main.get_by_role("heading", name="Reviewer's decision").wait_for(timeout=WAIT_MS)
        assert main.get_by_role("button", name="Record decision").count() == 0
        assert _selectbox(main, "Decision").count() == 0
        captions = " ".join(main.get_by_test_id("stCaptionContainer").all_inner_texts())
        assert "viewer" in captions and "may read" in captions, captions  # why: no form

        page.goto(f"{team.url}/?vendor=acme")
        refusal = page.get_by_test_id("stAlertContentError").filter(
            has_text="You may not see vendor")
        refusal.first.wait_for(timeout=WAIT_MS)
        _wait_until_idle(page)
        assert refusal.count() == 1
        assert refusal.inner_text().strip().startswith("You may not see vendor 'acme'")
        shown = page.locator("body").inner_text()
        assert "AES-256" not in shown, shown
        assert "AES-256" not in page.content()
        _shot(page, "team_bob_refused")

    entries = json_lines(_evidence("--store", str(team.store), "audit", "--format", "json"))
    refused = [e for e in entries if e.get("action") == "refused"
               and e.get("user") == "bob@example.com" and e.get("vendor") == "acme"]
    assert refused, entries


@pytest.mark.model
def test_an_admin_sees_every_vendor_and_logging_out_ends_the_session(team, browser, provider):
    """carol (workbench-admins, every vendor) is offered every sample vendor; the sidebar's
    Log out passes through the provider's end-session page and leaves the login page, with
    no identity cookie left to bring her back on a reload."""
    with _fresh_page(browser, 1600) as page:
        _log_in(page, team, provider, "carol@example.com", "admin")
        assert _options(page, _selectbox(_sidebar(page), "Vendor")) == list(SAMPLE_VENDORS)

        # Her page alone: the audit log, its chain checked, bob's refusal in it.
        page.get_by_role("link", name="Audit log").click()
        _wait_for_text(page, "entries shown, newest first", "[data-testid='stMain']")
        _wait_until_idle(page)
        page.get_by_role("button", name="Check the chain").click()
        _wait_for_text(page, "The chain holds:", "[data-testid='stMain']")
        _wait_until_idle(page)
        table = page.get_by_test_id("stMain").get_by_test_id("stDataFrame")
        expect(table).to_be_visible(timeout=WAIT_MS)
        _shot(page, "team_audit_log")
        audit = json_lines(_evidence("--store", str(team.store), "audit", "--format", "json"))
        assert {"refused", "login", "view", "decide", "audit_view"} <= {
            e["action"] for e in audit}
        assert any(e["action"] == "decide" and e["user"] == "alice@example.com"
                   and e["vendor"] == "acme" and e["context_sha256"] for e in audit)
        assert json.loads(_evidence("--store", str(team.store), "audit", "--verify"))["ok"]

        _sidebar(page).get_by_role("button", name="Log out").click()
        end_session(page, provider, team.url)
        _wait_for_text(page, LOGIN_TEXT, "[data-testid='stMain']")
        assert not _identity_cookies(page)
        page.reload()  # nothing brings the session back
        _wait_for_text(page, LOGIN_TEXT, "[data-testid='stMain']")
        _wait_until_idle(page)
        assert page.get_by_role("button", name="Log out").count() == 0
        assert "Signed in as" not in page.locator("body").inner_text()
