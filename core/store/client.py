"""Connecting to ChromaDB: an embedded store on disk, or a server (TLS, a CA bundle, a token,
and a timeout on every request), with every problem of a server turned into one sentence that
names it and the setting to look at, never the token."""

from __future__ import annotations

import contextlib
import functools
import sqlite3
from typing import Any

from core.config import Settings
from core.errors import StoreError, UserInputError
from core.store.lookups import DATABASE, index_lookups


def chromadb_version() -> str:
    """The installed ChromaDB's version, as benchmarks record it."""
    import chromadb

    return str(chromadb.__version__)


def connect(settings: Settings, location: str) -> Any:
    """A ChromaDB client of the store `settings` name (`location` names it in sentences)."""
    import chromadb

    try:
        if settings.chroma_host:
            return _ServerCalls(_server_client(settings), _ServerProblems(settings, location))
        store = settings.store  # checked by the caller (core/store/paths.py)
        store.mkdir(parents=True, exist_ok=True)
        from core.store.bindings import bound_open_indexes

        bound_open_indexes(settings.store_open_indexes)
        # A copy: PersistentClient writes the store's path into the settings it is given.
        client = chromadb.PersistentClient(path=str(store),
                                           settings=_embedded_settings().model_copy())
        # The lookup indexes ChromaDB's schema lacks (core/store/lookups.py). A file that
        # cannot take them now (read-only, or a writer holding it past the wait) is read
        # without them: they make lookups faster and change nothing else.
        with contextlib.suppress(sqlite3.Error):
            index_lookups(store / DATABASE)
        return client
    except (UserInputError, StoreError):
        raise
    except Exception as exc:  # chromadb raises plain exceptions for connection failures
        problems = _ServerProblems(settings, location)
        sentence = problems.sentence(exc, connecting=True) if settings.chroma_host else None
        raise StoreError(sentence or problems.redacted(
            f"Cannot open the {location}: {_one_line(exc)}")) from exc


@functools.cache
def _embedded_settings() -> Any:
    """ChromaDB's settings of an embedded store, built once per process: building them reads
    and validates every CHROMA_ environment setting, several milliseconds each time."""
    from chromadb.config import Settings as ChromaSettings

    return ChromaSettings(anonymized_telemetry=False)


class _ServerCalls:
    """A ChromaDB HttpClient (or one of its collections) whose calls turn a server that went
    away, hangs, refuses the token or is not trusted into one StoreError naming it, instead
    of the HTTP library's own exception."""

    def __init__(self, target: Any, problems: _ServerProblems) -> None:
        self._target = target
        self._problems = problems

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                result = value(*args, **kwargs)
            except Exception as exc:
                sentence = self._problems.sentence(exc, connecting=False)
                if sentence is None:
                    raise
                raise StoreError(sentence) from exc
            if type(result).__name__ == "Collection":
                return _ServerCalls(result, self._problems)
            return result

        return call


class _ServerProblems:
    """What went wrong between this process and a ChromaDB server, as one sentence that
    names the server and the setting to look at, and never shows the token."""

    # What a TLS port answers to plain HTTP: nginx, and Go's servers (Caddy, Traefik).
    _PLAIN_HTTP_TO_TLS = ("plain http request was sent to https port",
                          "http request to an https server")

    def __init__(self, settings: Settings, location: str) -> None:
        self._where = f"The {location}"
        self._location = location
        self._timeout_s = settings.chroma_timeout_s
        token = settings.chroma_token
        self._token = token.get_secret_value() if token is not None else None

    def redacted(self, text: str) -> str:
        return text.replace(self._token, "[token]") if self._token else text

    def sentence(self, exc: BaseException, *, connecting: bool) -> str | None:
        """The sentence for a problem of the connection to the server, or None for any
        other error (ChromaDB's own errors pass through unchanged)."""
        import ssl

        import httpx

        causes = _causes(exc)
        where = self._where
        for cause in causes:
            if isinstance(cause, httpx.TimeoutException):
                then = ("check that it is running and not overloaded" if connecting else
                        "what was written before is complete, so try again once it answers")
                return (f"{where} did not answer within {self._timeout_s:g} s "
                        f"(EVIDENCE_CHROMA_TIMEOUT_S); {then}.")
        for cause in causes:
            if isinstance(cause, ssl.SSLCertVerificationError):
                why = cause.verify_message or cause.reason or "not verified"
                if cause.verify_code == _X509_HOSTNAME_MISMATCH:
                    return (f"The certificate of the {self._location} does not name that host "
                            f"({why}); connect with a host name the certificate names.")
                return (f"The certificate of the {self._location} is not trusted ({why}); "
                        "set EVIDENCE_CHROMA_CA_BUNDLE to the PEM file of the CA that signed "
                        "it.")
        for cause in causes:
            if isinstance(cause, ssl.SSLError):
                why = cause.reason or _one_line(cause)
                return (f"The TLS handshake with the {self._location} failed ({why}); if the "
                        "server is not behind TLS, unset EVIDENCE_CHROMA_SSL.")
        for cause in causes:
            if isinstance(cause, httpx.HTTPStatusError):
                sentence = self._status_sentence(cause.response)
                if sentence is not None:
                    return sentence
        if not connecting:
            for cause in causes:
                if isinstance(cause, httpx.TransportError):
                    return self.redacted(
                        f"{where} stopped answering ({_one_line(cause)}); what was written "
                        "before is complete, so run the command again once it is back.")
        return None

    def _status_sentence(self, response: Any) -> str | None:
        status = response.status_code
        if status in (401, 403):
            if self._token:
                return (f"{self._where} refused the token (HTTP {status}); check "
                        "EVIDENCE_CHROMA_TOKEN.")
            return f"{self._where} asks for a token (HTTP {status}); set EVIDENCE_CHROMA_TOKEN."
        if status == 400:
            try:
                body = response.text.lower()
            except Exception:  # an undecodable body says nothing either way
                body = ""
            if any(phrase in body for phrase in self._PLAIN_HTTP_TO_TLS):
                return (f"{self._where} is served over TLS and refused plain HTTP (HTTP 400); "
                        "set EVIDENCE_CHROMA_SSL=true.")
        if status in (502, 503, 504):
            return (f"{self._where} answered HTTP {status}: the proxy in front of it could not "
                    "reach ChromaDB in time; check the ChromaDB server behind the proxy.")
        return None


# OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH.
_X509_HOSTNAME_MISMATCH = 62


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception and every exception it was raised from or while handling, outermost
    first: ChromaDB wraps the HTTP library's errors in plain ones."""
    found: list[BaseException] = []
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop(0)
        if current is None or any(current is seen for seen in found):
            continue
        found.append(current)
        pending += [current.__cause__, current.__context__]
    return found


def _server_client(settings: Settings) -> Any:
    """A ChromaDB client of the server `settings` name, as chromadb.HttpClient makes it, with
    TLS, the CA bundle and the token as set, and every HTTP request bounded by
    chroma_timeout_s."""
    from chromadb.config import Settings as ChromaSettings

    token = settings.chroma_token
    chroma_settings = ChromaSettings(
        anonymized_telemetry=False,
        chroma_api_impl="chromadb.api.fastapi.FastAPI",
        chroma_server_host=settings.chroma_host,
        chroma_server_http_port=settings.chroma_port,
        chroma_server_ssl_enabled=settings.chroma_ssl,
        chroma_server_ssl_verify=(str(settings.chroma_ca_bundle)
                                  if settings.chroma_ca_bundle is not None else None),
        chroma_server_headers=({"Authorization": f"Bearer {token.get_secret_value()}"}
                               if token is not None else None),
    )
    return _bounded_client_class()(chroma_settings, settings.chroma_timeout_s)


def _bound_session(server: Any, timeout: Any) -> None:
    import httpx

    session = getattr(server, "_session", None)
    if not isinstance(session, httpx.Client):
        raise StoreError(
            "This chromadb version keeps its HTTP session where chromadb 1.5 did not, so "
            "requests to the server cannot be given a timeout; install chromadb 1.5.")
    session.timeout = timeout


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


@functools.cache
def _bounded_client_class() -> type:
    """chromadb's Client (what chromadb.HttpClient returns), every HTTP request of which gives
    up after a timeout.

    ChromaDB 1.5 makes the httpx session of each of its server components with timeout=None
    and has no setting for it, and the client's constructor already asks the server (its
    identity through one component, then the tenant and database through a second one, the
    admin client's). So the timeout is put on each session just before its first request,
    and checked on both once the client stands."""
    import httpx
    from chromadb.api.client import Client

    class BoundedHttpClient(Client):
        def __init__(self, settings: Any, timeout_s: float) -> None:
            self._http_timeout = httpx.Timeout(timeout_s)
            super().__init__(settings=settings)
            _bound_session(self._server, self._http_timeout)
            _bound_session(self._admin_client._server, self._http_timeout)

        def get_user_identity(self) -> Any:
            _bound_session(self._server, self._http_timeout)
            return super().get_user_identity()

        def _validate_tenant_database(self, tenant: str, database: str) -> None:
            _bound_session(self._admin_client._server, self._http_timeout)
            super()._validate_tenant_database(tenant=tenant, database=database)

    return BoundedHttpClient



