"""Who is using the dashboard, what they may see, and the record of what they did.

Without an `[auth]` section in `.streamlit/secrets.toml` the dashboard is one person's tool:
nobody logs in, every vendor is shown, nothing is recorded, and it is served on the loopback
address only (a wider address needs `EVIDENCE_ALLOW_ANONYMOUS=1`, said on purpose). With
`[auth]`, a visitor logs in through the team's identity provider (Streamlit's OpenID Connect
login); the access file turns the groups in their ID token into rights (`core.access`), every
page asks these rights before it reads the store, and what they view and do goes into the
store's audit log, once per page and selection rather than on every rerun."""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from core.access import AccessPolicy, Rights, groups_of
from core.config import Settings
from core.errors import EvidenceError
from core.store import check_vendor_id
from dashboard import resources

# The longest text the audit log keeps of each field (core/store/audit_log.py refuses more).
LIMITS = {"detail": 1000, "criterion": 2000, "page": 200, "strategy": 200}
TEAM_KEY = "_team"  # this session's Team, set by `gate` on every run
_SEEN_KEY = "_audit_seen"  # what this session has already recorded as viewed
_CONTEXT_KEY = "_context_shown"  # SHA-256 of the context the page on screen shows


@dataclass(frozen=True)
class Team:
    """The logged-in user of a team's dashboard: their verified identity and rights."""

    identity: str  # the ID token's email, else its subject
    rights: Rights


def login_configured() -> bool:
    """True when `.streamlit/secrets.toml` has an `[auth]` section."""
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets file at all, or one Streamlit cannot parse
        return False


def _loopback(address: str | None) -> bool:
    if not address:
        return False  # Streamlit listens on every interface
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


@st.cache_resource(show_spinner=False)
def _policy(path: str, mtime: float) -> AccessPolicy:
    del mtime  # a changed file is a new key: read again
    return AccessPolicy.load(Path(path))


def _refuse_to_start(sentence: str) -> None:
    st.error(sentence)
    st.stop()


def gate() -> Team | None:
    """Run before any page: None in the single-user mode; the logged-in Team otherwise. A
    visitor who has not logged in gets the login page and nothing else; a dashboard that may
    not be served as configured says why in one sentence and stops."""
    settings = Settings()  # read on every run: nothing of the store is opened before this
    if not login_configured():
        st.session_state.pop(TEAM_KEY, None)
        if settings.access_file is not None:
            _refuse_to_start(
                "EVIDENCE_ACCESS_FILE is set, but .streamlit/secrets.toml has no [auth] "
                "section, so nobody logs in to be given its rights; configure login "
                "(docs/login.md) or unset EVIDENCE_ACCESS_FILE.")
        address = st.get_option("server.address")
        if not _loopback(address) and not settings.allow_anonymous:
            _refuse_to_start(
                f"This dashboard has no login and is served on {address or 'every address'}, "
                "where anyone who reaches it would see every vendor; configure login "
                "(docs/login.md), serve it on 127.0.0.1, or set EVIDENCE_ALLOW_ANONYMOUS=1 "
                "to serve it without login on purpose.")
        return None
    if settings.access_file is None:
        _refuse_to_start("Login is configured ([auth] in .streamlit/secrets.toml), but "
                         "EVIDENCE_ACCESS_FILE names no access file, so nobody may see any "
                         "vendor; write one (docs/login.md) and set EVIDENCE_ACCESS_FILE.")
    path = Path(settings.access_file)
    try:
        policy = _policy(str(path), path.stat().st_mtime if path.exists() else 0.0)
    except EvidenceError as exc:
        _refuse_to_start(str(exc))
    if not st.user.is_logged_in:
        st.session_state.pop(TEAM_KEY, None)
        _login_page()
        st.stop()
    claims = st.user.to_dict()
    identity = str(claims.get("email") or claims.get("sub") or "")
    team = Team(identity, policy.rights(groups_of(claims, settings.groups_claim)))
    st.session_state[TEAM_KEY] = team
    if not st.session_state.get("_logged_in_recorded"):
        st.session_state["_logged_in_recorded"] = True
        record("login", detail=f"groups give {team.rights.described()}")
    return team


def _login_page() -> None:
    st.title("Evidence precedence workbench")
    st.markdown("Sign in with your team's identity provider to see the vendors you may "
                "review.")
    st.button("Log in", key="login", type="primary", on_click=st.login)


def log_out() -> None:
    """Record the logout, then end the session (Streamlit drops its identity cookie)."""
    record("logout")
    st.session_state.pop("_logged_in_recorded", None)
    st.logout()


def current() -> Team | None:
    """This session's logged-in user, or None in the single-user mode."""
    return st.session_state.get(TEAM_KEY)


def visible(vendor_ids: list[str]) -> list[str]:
    """The vendors this session may see (all of them in the single-user mode)."""
    team = current()
    return vendor_ids if team is None else team.rights.visible(vendor_ids)


def may(action: str, vendor_id: str | None = None) -> bool:
    """Whether this session may do `action` (always, in the single-user mode)."""
    team = current()
    return team is None or team.rights.may(action, vendor_id)


def identity() -> str | None:
    """The logged-in user's verified identity; None in the single-user mode."""
    team = current()
    return team.identity if team is not None else None


def refuse_vendor(vendor_id: str, *, page: str | None = None) -> None:
    """One sentence for a vendor this user may not see, the attempt recorded; the page
    stops, having shown nothing of the vendor."""
    team = current()
    assert team is not None
    record("refused", vendor=vendor_id, page=page,
           detail=f"may not see vendor {vendor_id!r}")
    seen = team.rights.described()
    st.error(f"You may not see vendor '{vendor_id}': your groups give you {seen}.")
    st.stop()


def refuse_action(action: str, vendor_id: str | None, sentence: str) -> bool:
    """False, with the refusal recorded and shown, when this user may not do `action`."""
    if may(action, vendor_id):
        return True
    record("refused", vendor=vendor_id, detail=f"{action}: {sentence}")
    st.error(sentence)
    return False


# The audit log ------------------------------------------------------------------------------

def record(action: str, **fields: Any) -> None:
    """One entry in the store's audit log, in a team's dashboard only. What a visitor typed
    (a vendor id in a URL, a search) is kept in its bounds: a vendor id that is none goes
    into the detail, quoted and cut short, and a long text is cut at the log's limits."""
    team = current()
    if team is None:
        return
    vendor = fields.get("vendor")
    if vendor is not None:
        try:
            check_vendor_id(vendor)
        except EvidenceError:
            fields["vendor"] = None
            fields["detail"] = f"{fields.get('detail') or action} (vendor {str(vendor)[:80]!r})"
    for name, most in LIMITS.items():
        if isinstance(fields.get(name), str):
            fields[name] = fields[name][:most]
    resources.get_workbench().store.audit_log().append(team.identity, action, **fields)


def on_download(action: str, vendor_id: str, what: str) -> Any:
    """A download button's on_click: in a team's dashboard, the download recorded (which
    reruns the page); otherwise nothing is run."""
    if current() is None:
        return "ignore"
    return lambda: record(action, vendor=vendor_id, detail=what)


def context_shown(context: str) -> None:
    """Note the context a page shows, so its view is recorded with the context's SHA-256."""
    st.session_state[_CONTEXT_KEY] = hashlib.sha256(context.encode("utf-8")).hexdigest()


def begin_page() -> None:
    st.session_state.pop(_CONTEXT_KEY, None)


def record_once(action: str, **fields: Any) -> None:
    """`record`, once per session for the same action and fields: a page drawn again for
    the same selection is not viewed again."""
    if current() is None:
        return
    key = (action, *sorted(fields.items()))
    seen: set = st.session_state.setdefault(_SEEN_KEY, set())
    if key not in seen:
        seen.add(key)
        record(action, **fields)


def record_view(page: str, vendor_id: str | None, criterion: str | None,
                strategy: str | None) -> None:
    """The page viewed, once per page and selection (and context shown) in this session."""
    if vendor_id is not None:
        record_once("view", vendor=vendor_id, criterion=criterion, page=page,
                    strategy=strategy, context_sha256=st.session_state.get(_CONTEXT_KEY))
