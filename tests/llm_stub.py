"""A stub OpenAI-compatible chat-completions server on 127.0.0.1, for driving the real
`openai` client: tests `enqueue()` the replies it gives, in order, and read back every
request it received (the messages, the response format, the model).

    def test_something(llm_stub):
        llm_stub.enqueue({"verdict": "MET"})          # JSON content
        llm_stub.enqueue("Plain words.")              # text content
        llm_stub.enqueue(status=500, error="boom")    # an HTTP error
        llm_stub.enqueue("late", hang_s=5.0)          # answers only after 5 s
        client = LLMClient.from_settings(llm_stub.settings(llm_timeout_s=0.5))
        ...
        assert llm_stub.requests[0].messages == [...]

Test modules load it with `pytest_plugins = ["tests.llm_stub"]`.

A request that arrives with nothing queued is answered HTTP 500 and fails the test at
teardown, so a test never passes on a reply it did not plan."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from core.config import Settings

STUB_MODEL = "stub-model"


@dataclass(frozen=True)
class StubReply:
    """One planned answer: content (text, or JSON when given a dict or list), or an HTTP
    error, or a whole completion body; given after `hang_s` seconds."""

    content: str | None = None
    status: int = 200
    error: str | None = None
    completion: dict[str, Any] | None = None
    hang_s: float = 0.0


@dataclass(frozen=True)
class StubRequest:
    """One request the stub received."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    @property
    def response_format(self) -> dict[str, Any] | None:
        return self.body.get("response_format")

    @property
    def model(self) -> str | None:
        return self.body.get("model")


class LLMStub:
    """The server and its queue of replies; see the module's docstring."""

    def __init__(self, server: HTTPServer) -> None:
        self.server = server
        self.requests: list[StubRequest] = []
        self._replies: deque[StubReply] = deque()
        self._lock = threading.Lock()
        self._release = threading.Event()
        server.expect_request("/v1/chat/completions", method="POST").respond_with_handler(
            self._answer)

    model = STUB_MODEL

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}/v1"

    def settings(self, **overrides: Any) -> Settings:
        """Settings pointing at this stub (and the stub's model), overridable."""
        return Settings(**{"llm_base_url": self.base_url, "llm_model": self.model, **overrides})

    def enqueue(self, content: str | dict[str, Any] | list[Any] | None = None, *,
                status: int = 200, error: str | None = None,
                completion: dict[str, Any] | None = None, hang_s: float = 0.0) -> None:
        """Plan the next reply: `content` as the message (a dict or list is sent as its
        JSON text), or `status` with `error` for an HTTP error, or `completion` as the
        whole response body; `hang_s` delays it."""
        if isinstance(content, dict | list):
            content = json.dumps(content)
        with self._lock:
            self._replies.append(StubReply(content=content, status=status, error=error,
                                           completion=completion, hang_s=hang_s))

    @property
    def pending(self) -> int:
        """Replies queued and not yet given."""
        with self._lock:
            return len(self._replies)

    def release(self) -> None:
        """End every hang now (the fixture does this before the server stops)."""
        self._release.set()

    def _answer(self, request: Request) -> Response:
        try:
            body = json.loads(request.get_data(as_text=True) or "{}")
        except json.JSONDecodeError:
            body = {"unparsed": request.get_data(as_text=True)}
        with self._lock:
            self.requests.append(StubRequest(request.method, request.path,
                                             dict(request.headers), body))
            reply = self._replies.popleft() if self._replies else None
        if reply is None:
            self.server.add_assertion(f"the LLM stub received a request with no reply queued: "
                                      f"{json.dumps(body)[:300]}")
            return _json_response({"error": {"message": "no reply queued"}}, 500)
        if reply.hang_s:
            self._release.wait(reply.hang_s)
        if reply.status != 200:
            return _json_response({"error": {"message": reply.error or "stub error",
                                             "type": "server_error"}}, reply.status)
        if reply.completion is not None:
            return _json_response(reply.completion, 200)
        number = len(self.requests)
        return _json_response({
            "id": f"chatcmpl-stub-{number}", "object": "chat.completion", "created": 0,
            "model": body.get("model", STUB_MODEL),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply.content}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }, 200)


def _json_response(data: dict[str, Any], status: int) -> Response:
    return Response(json.dumps(data), status=status, content_type="application/json")


@pytest.fixture(scope="session")
def llm_stub_server() -> Iterator[HTTPServer]:
    """The server behind `llm_stub`, started once: stopping one takes half a second."""
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def llm_stub(llm_stub_server) -> Iterator[LLMStub]:
    """A stub on 127.0.0.1 with an empty queue and no requests recorded yet."""
    llm_stub_server.clear()
    stub = LLMStub(llm_stub_server)
    try:
        yield stub
    finally:
        stub.release()
    # a request with nothing queued, or an error inside the stub itself
    llm_stub_server.check()
