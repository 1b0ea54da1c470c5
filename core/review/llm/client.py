"""One optional OpenAI-compatible chat-completions client (Ollama /v1, vLLM, llama.cpp's
server), over the real `openai` client, with every failure turned into one `LLMError`."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import pydantic

from core.config import Settings
from core.errors import EvidenceError, UserInputError

Schema = TypeVar("Schema", bound=pydantic.BaseModel)
Message = Mapping[str, str]

# A language model asked for JSON sometimes wraps it in a Markdown code fence all the same.
_CODE_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(?P<body>.*?)\n?```$", re.DOTALL)
# Sent as the bearer token when no key is configured: local servers ignore it, and it keeps
# the openai client from reaching for OPENAI_API_KEY, a key meant for another service.
_NO_API_KEY = "no-key-configured"
_DETAIL_CHARS = 200
# JSON can escape a lone surrogate (\ud800); no UTF-8 writer (the store, a JSON line, the
# terminal) can carry one, so a reply's text has each replaced by U+FFFD, as vendor text has.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class LLMError(EvidenceError):
    """The language-model endpoint failed, timed out, or answered outside what was asked."""


def describe_missing(settings: Settings) -> str | None:
    """The sentence naming the EVIDENCE_* settings to set, or None when the endpoint is set."""
    missing = [name for name, value in (("EVIDENCE_LLM_BASE_URL", settings.llm_base_url),
                                        ("EVIDENCE_LLM_MODEL", settings.llm_model))
               if not (value or "").strip()]
    if not missing:
        return None
    return (f"No language model is configured; set {' and '.join(missing)} (an OpenAI-compatible "
            "endpoint such as http://127.0.0.1:11434/v1 for Ollama, and the model it serves).")


def strict_json_schema(schema: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The model's JSON schema in the `strict` form chat-completions endpoints accept: every
    object closed (no additional properties) and every property listed as required."""
    return _strictly(copy.deepcopy(schema.model_json_schema()))


def _strictly(node: Any) -> Any:
    """Walk the schema's own keywords (never a property's name) closing every object."""
    if not isinstance(node, dict):
        return node
    node = dict(node)
    for key in ("$defs", "definitions", "properties"):
        if isinstance(node.get(key), dict):
            node[key] = {name: _strictly(sub) for name, sub in node[key].items()}
    for key in ("anyOf", "allOf", "oneOf", "prefixItems"):
        if isinstance(node.get(key), list):
            node[key] = [_strictly(sub) for sub in node[key]]
    if isinstance(node.get("items"), dict):
        node["items"] = _strictly(node["items"])
    if node.get("type") == "object" or isinstance(node.get("properties"), dict):
        node.setdefault("additionalProperties", False)
        node["required"] = list(node.get("properties", {}))
    return node


class LLMClient:
    """Chat completions from one configured endpoint and model.

    `structured` asks for a JSON-schema response format and validates the returned message's
    content with pydantic; `text` returns the content as it is."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 timeout_s: float = 60.0, max_retries: int = 0) -> None:
        import openai

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self._client = openai.OpenAI(base_url=self.base_url, api_key=api_key or _NO_API_KEY,
                                     timeout=timeout_s, max_retries=max_retries)

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMClient | None:
        """The configured client, or None when no endpoint or model is set (see
        `describe_missing`); a base URL that is not http(s) is refused in one sentence."""
        if describe_missing(settings) is not None:
            return None
        base_url = settings.llm_base_url.strip()
        if not re.match(r"^https?://[^/\s]+", base_url):
            raise UserInputError(
                f"EVIDENCE_LLM_BASE_URL '{base_url}' is not an http:// or https:// URL; give "
                "the endpoint's base, such as http://127.0.0.1:11434/v1.")
        return cls(base_url, settings.llm_model.strip(), api_key=settings.llm_api_key,
                   timeout_s=settings.llm_timeout_s)

    @property
    def endpoint(self) -> str:
        """The URL every request is sent to."""
        return f"{self.base_url}/chat/completions"

    @property
    def answered_by(self) -> str:
        """How an answer written by this model is labelled: `llm:MODEL`."""
        return f"llm:{self.model}"

    def structured(self, messages: Sequence[Message], schema: type[Schema], name: str
                   ) -> tuple[Schema, str]:
        """(the reply validated as `schema`, the raw content it was read from)."""
        response_format = {"type": "json_schema", "json_schema": {
            "name": name, "schema": strict_json_schema(schema), "strict": True}}
        raw = self._complete(messages, response_format=response_format)
        body = raw.strip()
        fenced = _CODE_FENCE.match(body)
        if fenced:
            body = fenced.group("body").strip()
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            raise LLMError(
                f"The language model at {self.endpoint} answered with content that is not JSON "
                f"({exc.msg} at character {exc.pos + 1}): {_short(raw)!r}.") from exc
        try:
            return schema.model_validate(_valid_unicode(data)), raw
        except pydantic.ValidationError as exc:
            raise LLMError(
                f"The language model at {self.endpoint} answered JSON that does not match the "
                f"schema '{name}': {_first_problem(exc)}.") from exc

    def text(self, messages: Sequence[Message]) -> str:
        """The reply's content as plain text."""
        return self._complete(messages)

    def _complete(self, messages: Sequence[Message], **extra: Any) -> str:
        import openai

        try:
            completion = self._client.chat.completions.create(
                model=self.model, messages=[dict(m) for m in messages], **extra)
        except openai.APITimeoutError as exc:
            raise LLMError(
                f"The language model at {self.endpoint} did not answer within "
                f"{self.timeout_s:g} s (EVIDENCE_LLM_TIMEOUT_S).") from exc
        except openai.APIConnectionError as exc:
            raise LLMError(
                f"The language model at {self.endpoint} could not be reached "
                f"({_connection_problem(exc)}).") from exc
        except openai.APIStatusError as exc:
            raise LLMError(
                f"The language model at {self.endpoint} answered HTTP {exc.status_code}"
                f"{_status_detail(exc)}.") from exc
        except openai.OpenAIError as exc:
            raise LLMError(
                f"The language model at {self.endpoint} failed: {_short(str(exc))}.") from exc
        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise LLMError(f"The language model at {self.endpoint} answered with no choices.")
        message = choices[0].message
        content = message.content if message is not None else None
        if not isinstance(content, str) or not content.strip():
            refusal = getattr(message, "refusal", None)
            why = f"; it refused: {_short(refusal)!r}" if refusal else ""
            raise LLMError(
                f"The language model at {self.endpoint} answered with empty content{why}.")
        return _LONE_SURROGATE.sub("\ufffd", content)


def _valid_unicode(data: Any) -> Any:
    """The parsed reply with every lone surrogate its JSON escaped replaced by U+FFFD: a
    model's answer holding one was otherwise accepted and then failed the turn as it was
    stored."""
    if isinstance(data, str):
        return _LONE_SURROGATE.sub("\ufffd", data)
    if isinstance(data, list):
        return [_valid_unicode(item) for item in data]
    if isinstance(data, dict):
        return {_valid_unicode(key): _valid_unicode(value) for key, value in data.items()}
    return data


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 3] + "..."


def _connection_problem(exc: BaseException) -> str:
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError) or "refused" in str(cause).lower():
            return "connection refused"
        cause = cause.__cause__ or cause.__context__
    root = exc.__cause__ or exc.__context__
    return _short(str(root or exc)) or type(root or exc).__name__


def _status_detail(exc: Any) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        detail = error.get("message") if isinstance(error, dict) else error
    else:
        detail = body
    if not detail:
        try:
            detail = exc.response.text
        except Exception:
            detail = ""
    return f": {_short(str(detail))}" if detail and str(detail).strip() else ""


def _first_problem(exc: pydantic.ValidationError) -> str:
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "the top level"
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    return f"{where}: {first['msg'].rstrip('.')}{more}"
