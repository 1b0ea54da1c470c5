"""A team's login, for real, on 127.0.0.1: an OpenID Connect provider (oidc-provider-mock) in
a thread of the test process, and a Streamlit app started with `streamlit run` whose [auth]
secrets point at it, so that Streamlit's own login routes (/auth/login, /oauth2callback,
/auth/logout) and its signed cookies do the work. Nothing of Streamlit is patched: what
st.user holds is what the provider's ID token said.

Where Streamlit finds the secrets: the `secrets.files` option, whose default is
~/.streamlit/secrets.toml, then ./.streamlit/secrets.toml of the working folder, then
.streamlit/secrets.toml beside the main script. The app here is started with
`--secrets.files` naming the one file this module writes, which replaces that whole list: the
developer's own secrets, if any, are never read, and the repository's .streamlit/config.toml
(read from the working folder) still applies.

What reaches the ID token: the provider puts every claim of a predefined user that is not a
standard OpenID claim (such as `groups`) into the ID token and the userinfo reply whatever
the scope; standard claims only with their scope (`email` with "email", `name` with
"profile"). Streamlit's default scope, "openid email profile", is therefore enough; the
provider knows no other scope and drops one it does not know (a "groups" scope would be
left out of the grant, not refused). Streamlit reads st.user from the ID token, not from
the userinfo endpoint.

In the browser, "Log in" leads to the provider's page "Authorize Client", where a predefined
user is a button named by its subject (here the user's email): `choose_user` presses it.
Streamlit's logout leads to the provider's end-session page ("End Session"), which returns
to the app once its button is pressed: `end_session` presses it."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import threading
import urllib.request
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.chroma_server import free_port

REPO = Path(__file__).resolve().parents[2]

# The team's users, by email, and the groups the provider says each belongs to (None: the
# provider sends no groups claim for that user, as providers do for a user of no group).
TEAM_USERS: Mapping[str, Sequence[str] | None] = {
    "alice@example.com": ["acme-reviewers"],
    "bob@example.com": ["northwind-viewers"],
    "carol@example.com": ["workbench-admins"],
    "dave@example.com": None,
}

# The access file mapping those groups to roles and vendors (core/access.py reads it).
TEAM_ACCESS = """\
[groups.acme-reviewers]
role = "reviewer"
vendors = ["acme"]

[groups.northwind-viewers]
role = "viewer"
vendors = ["northwind"]

[groups.workbench-admins]
role = "admin"
vendors = ["*"]
"""

# What Streamlit asks the provider for; its own default, said out loud.
SCOPES = "openid profile email"
CLIENT_ID = "evidence-workbench"
CLIENT_SECRET = "evidence-workbench-secret"
# How long a page of the login may take to come up before the test calls it hung.
WAIT_MS = 180_000


def user_claims(email: str, groups: Sequence[str] | None) -> dict[str, object]:
    """The claims the provider keeps for a user: the standard ones for the email and profile
    scopes, and `groups` when the user has a groups claim at all."""
    claims: dict[str, object] = {"email": email, "email_verified": True,
                                 "name": email.split("@")[0].title(),
                                 "preferred_username": email}
    if groups is not None:
        claims["groups"] = list(groups)
    return claims


@dataclass(frozen=True)
class Provider:
    """A running OpenID Connect provider: its base URL and the subjects it offers."""

    url: str
    users: tuple[str, ...]

    @property
    def metadata_url(self) -> str:
        return f"{self.url}/.well-known/openid-configuration"

    def metadata(self) -> dict[str, object]:
        """The provider's discovery document, as Streamlit fetches it."""
        with urllib.request.urlopen(self.metadata_url, timeout=30) as reply:
            return json.load(reply)


@contextlib.contextmanager
def oidc_provider(users: Mapping[str, Sequence[str] | None] = TEAM_USERS) -> Iterator[Provider]:
    """oidc-provider-mock on 127.0.0.1 (a free port) in a thread, offering `users` (email ->
    groups) on its authorization page; stopped when the block ends. Any client id and secret
    are accepted, and the nonce Streamlit sends is required. The package's own
    `run_server_in_thread` listens on "localhost", which may resolve to ::1; its `app` is
    served here on 127.0.0.1 instead, the address the browser and Streamlit are given."""
    import werkzeug.serving
    from authlib.deprecate import AuthlibDeprecationWarning

    with warnings.catch_warnings():  # the provider still imports authlib.jose
        warnings.simplefilter("ignore", AuthlibDeprecationWarning)
        from oidc_provider_mock import User, app

    provider_app = app(require_nonce=True,
                       user_claims=[User(sub=email, claims=user_claims(email, groups))
                                    for email, groups in users.items()])
    server = werkzeug.serving.make_server("127.0.0.1", 0, provider_app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                              name="oidc-provider", daemon=True)
    thread.start()
    try:
        yield Provider(f"http://127.0.0.1:{server.server_port}", tuple(users))
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


def write_secrets(folder: Path, provider: Provider, port: int, *,
                  scopes: str = SCOPES) -> Path:
    """`folder/.streamlit/secrets.toml` with the [auth] section of an app served on
    127.0.0.1:`port` that logs in through `provider`; returns its path."""
    values = {
        "redirect_uri": f"http://127.0.0.1:{port}/oauth2callback",
        "cookie_secret": secrets.token_hex(32),
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "server_metadata_url": provider.metadata_url,
    }
    lines = ["[auth]", *(f"{key} = {json.dumps(value)}" for key, value in values.items()),
             "", "[auth.client_kwargs]", f"scope = {json.dumps(scopes)}", ""]
    path = folder / ".streamlit" / "secrets.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Served:
    """A Streamlit app being served: its URL, its secrets file and its log."""

    url: str
    port: int
    secrets: Path
    log: Path


@contextlib.contextmanager
def streamlit_app(script: Path, work: Path, provider: Provider, *, env: Mapping[str, str],
                  cwd: Path = REPO, scopes: str = SCOPES) -> Iterator[Served]:
    """`streamlit run SCRIPT` on 127.0.0.1 (a free port), its secrets written to
    `work/.streamlit/secrets.toml` and named with `--secrets.files`, with exactly `env`, in
    `cwd`; yields once the server answers its health check, stopped when the block ends."""
    port = free_port()
    secrets_file = write_secrets(work, provider, port, scopes=scopes)
    log_path = work / "streamlit.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [str(Path(sys.executable).with_name("streamlit")), "run", str(script),
             "--server.port", str(port), "--server.address", "127.0.0.1",
             "--server.headless", "true", "--browser.gatherUsageStats", "false",
             "--secrets.files", str(secrets_file)],
            cwd=cwd, env=dict(env), stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_until_healthy(server, url, log_path)
            yield Served(url, port, secrets_file, log_path)
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def _wait_until_healthy(server: subprocess.Popen, url: str, log: Path) -> None:
    """Until the server answers /_stcore/health; a server that exits first fails with its
    log."""
    for _ in range(3000):  # bounded by attempts: the server answers once it is up
        if server.poll() is not None:
            raise AssertionError(f"streamlit exited ({server.returncode}): "
                                 f"{log.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            threading.Event().wait(0.1)
    raise AssertionError(f"streamlit never answered on {url}: {log.read_text(errors='replace')}")


def team_environment(store: Path, access_file: Path, work: Path) -> dict[str, str]:
    """The team dashboard's environment: this process's, without any EVIDENCE_* setting but
    the model threads and without a language model, then the store, the access file and an
    empty reranker cache."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("EVIDENCE_") or k == "EVIDENCE_MODEL_THREADS"}
    env.update({"EVIDENCE_STORE": str(store), "EVIDENCE_ACCESS_FILE": str(access_file),
                "EVIDENCE_RERANKER_CACHE_DIR": str(work / "no-models")})
    return env


@dataclass(frozen=True)
class TeamDashboard:
    """The dashboard served in team mode: its URL, its store, its access file and its log."""

    url: str
    store: Path
    access_file: Path
    secrets: Path
    log: Path


@contextlib.contextmanager
def team_dashboard(work: Path, store: Path, provider: Provider, *,
                   access: str = TEAM_ACCESS) -> Iterator[TeamDashboard]:
    """dashboard/app.py served by `streamlit run` from the repository in team mode: [auth]
    secrets for `provider`, EVIDENCE_ACCESS_FILE naming `work/access.toml` (holding
    `access`), and EVIDENCE_STORE naming `store` (the test's own copy; the dashboard writes
    to it). Stopped when the block ends."""
    access_file = work / "access.toml"
    access_file.write_text(access, encoding="utf-8")
    env = team_environment(store, access_file, work)
    with streamlit_app(REPO / "dashboard" / "app.py", work, provider, env=env) as served:
        yield TeamDashboard(served.url, store, access_file, served.secrets, served.log)


def choose_user(page, provider: Provider, email: str, app_url: str) -> None:
    """On the provider's authorization page, which the browser is on or going to, sign in as
    the predefined user `email`, and wait until the browser is back on the app."""
    page.wait_for_url(f"{provider.url}/oauth2/authorize**", timeout=WAIT_MS)
    page.get_by_role("heading", name="Authorize Client").wait_for(timeout=WAIT_MS)
    page.get_by_role("button", name=email, exact=True).click()
    page.wait_for_url(_back_on(app_url), timeout=WAIT_MS)


def end_session(page, provider: Provider, app_url: str) -> None:
    """On the provider's end-session page, which the browser is on or going to after the
    app's logout, end the session and wait until the browser is back on the app."""
    page.wait_for_url(f"{provider.url}/oauth2/end_session**", timeout=WAIT_MS)
    page.get_by_role("button", name="End session").click()
    page.wait_for_url(_back_on(app_url), timeout=WAIT_MS)


def _back_on(app_url: str):
    """A URL test: on the app, past its /oauth2callback (which sets or clears the cookies
    and sends the browser on to the app's first page)."""
    return lambda url: url.startswith(app_url + "/") and "/oauth2callback" not in url
