"""core.review.llm: the real `openai` client against a stub OpenAI-compatible server on 127.0.0.1 -
what is sent, what comes back, and one plain LLMError for every way it can fail."""

from __future__ import annotations

import json
import socket
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from core.config import Settings
from core.errors import EvidenceError, UserInputError
from core.review.llm import LLMClient, LLMError, describe_missing, strict_json_schema
from tests.support.sentences import assert_one_sentence

pytest_plugins = ["tests.llm_stub"]  # the llm_stub fixture

MESSAGES = [
    {"role": "system", "content": "You judge vendor evidence."},
    {"role": "user", "content": "Does the vendor encrypt data at rest using AES-256?"},
]


class Citation(BaseModel):
    round_number: int
    quote: str


class Verdict(BaseModel):
    verdict: Literal["MET", "NOT_MET", "INCONCLUSIVE"]
    reasoning: str
    cited: list[Citation] = Field(default_factory=list)


GOOD = {"verdict": "MET", "reasoning": "Round 2 says AES-256.",
        "cited": [{"round_number": 2, "quote": "Yes, AES-256."}]}


def client_for(stub, **overrides) -> LLMClient:
    client = LLMClient.from_settings(stub.settings(**overrides))
    assert client is not None
    return client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Success ---------------------------------------------------------------------------------------

def test_structured_reply_is_parsed_and_the_request_is_exactly_what_was_asked(llm_stub):
    llm_stub.enqueue(GOOD)
    client = client_for(llm_stub)

    verdict, raw = client.structured(MESSAGES, Verdict, "verdict")

    assert verdict == Verdict(verdict="MET", reasoning="Round 2 says AES-256.",
                              cited=[Citation(round_number=2, quote="Yes, AES-256.")])
    assert json.loads(raw) == GOOD
    [request] = llm_stub.requests
    assert request.path == "/v1/chat/completions"
    assert request.model == llm_stub.model
    assert request.messages == MESSAGES
    assert request.response_format == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": strict_json_schema(Verdict),
                        "strict": True},
    }


def test_the_schema_sent_is_strict_every_object_closed_and_every_field_required():
    schema = strict_json_schema(Verdict)
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["verdict", "reasoning", "cited"]
    assert schema["properties"]["verdict"]["enum"] == ["MET", "NOT_MET", "INCONCLUSIVE"]
    citation = schema["$defs"]["Citation"]
    assert citation["additionalProperties"] is False
    assert citation["required"] == ["round_number", "quote"]
    # the model's own schema is left as pydantic made it
    assert "additionalProperties" not in Verdict.model_json_schema()


def test_a_property_named_like_a_schema_keyword_is_not_mistaken_for_one():
    class Odd(BaseModel):
        properties: dict[str, int]
        type: str

    schema = strict_json_schema(Odd)
    assert schema["required"] == ["properties", "type"]
    assert set(schema["properties"]) == {"properties", "type"}
    assert schema["properties"]["properties"]["additionalProperties"] == {"type": "integer"}


def test_json_in_a_code_fence_is_still_read(llm_stub):
    llm_stub.enqueue("```json\n" + json.dumps(GOOD) + "\n```")
    verdict, raw = client_for(llm_stub).structured(MESSAGES, Verdict, "verdict")
    assert verdict.verdict == "MET"
    assert raw.startswith("```json")


def test_text_returns_the_content_and_sends_no_response_format(llm_stub):
    llm_stub.enqueue("The vendor encrypts data at rest with AES-256 [1].")
    client = client_for(llm_stub)
    assert client.text(MESSAGES) == "The vendor encrypts data at rest with AES-256 [1]."
    [request] = llm_stub.requests
    assert request.messages == MESSAGES
    assert request.response_format is None
    assert "response_format" not in request.body


def test_the_model_name_is_recorded_for_answered_by(llm_stub):
    client = client_for(llm_stub, llm_model="qwen2.5:7b-instruct")
    llm_stub.enqueue("ok")
    client.text(MESSAGES)
    assert client.model == "qwen2.5:7b-instruct"
    assert client.answered_by == "llm:qwen2.5:7b-instruct"
    assert llm_stub.requests[0].model == "qwen2.5:7b-instruct"


def test_replies_come_back_in_the_order_they_were_queued(llm_stub):
    client = client_for(llm_stub)
    llm_stub.enqueue("first")
    llm_stub.enqueue("second")
    assert [client.text(MESSAGES), client.text(MESSAGES)] == ["first", "second"]
    assert llm_stub.pending == 0


def test_the_configured_api_key_is_sent_and_never_the_openai_environment_key(llm_stub,
                                                                            monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-meant-for-another-service")
    llm_stub.enqueue("one")
    llm_stub.enqueue("two")
    client_for(llm_stub).text(MESSAGES)
    client_for(llm_stub, llm_api_key="local-secret").text(MESSAGES)
    keyless, keyed = (r.headers.get("Authorization") for r in llm_stub.requests)
    assert "sk-meant-for-another-service" not in keyless
    assert keyed == "Bearer local-secret"


# Every failure is one LLMError naming the endpoint ---------------------------------------------

def assert_one_error(error: LLMError, endpoint: str, *needles: str) -> None:
    """`error` is an EvidenceError in one plain sentence naming `endpoint` and `needles`."""
    assert isinstance(error, EvidenceError)
    assert_one_sentence(str(error), endpoint, *needles)


def test_json_that_does_not_match_the_schema(llm_stub):
    llm_stub.enqueue({"verdict": "PROBABLY", "reasoning": "unsure"})
    client = client_for(llm_stub)
    with pytest.raises(LLMError) as raised:
        client.structured(MESSAGES, Verdict, "verdict")
    assert_one_error(raised.value, client.endpoint, "does not match the schema 'verdict'",
                     "verdict")


def test_a_missing_field_is_named(llm_stub):
    llm_stub.enqueue({"verdict": "MET"})
    with pytest.raises(LLMError, match="reasoning"):
        client_for(llm_stub).structured(MESSAGES, Verdict, "verdict")


def test_content_that_is_not_json(llm_stub):
    llm_stub.enqueue("I think the vendor is compliant.")
    client = client_for(llm_stub)
    with pytest.raises(LLMError) as raised:
        client.structured(MESSAGES, Verdict, "verdict")
    assert_one_error(raised.value, client.endpoint, "not JSON",
                     "I think the vendor is compliant.")


def test_empty_content(llm_stub):
    llm_stub.enqueue("")
    client = client_for(llm_stub)
    with pytest.raises(LLMError) as raised:
        client.structured(MESSAGES, Verdict, "verdict")
    assert_one_error(raised.value, client.endpoint, "empty content")


def test_no_choices(llm_stub):
    llm_stub.enqueue(completion={"id": "x", "object": "chat.completion", "created": 0,
                                 "model": llm_stub.model, "choices": []})
    client = client_for(llm_stub)
    with pytest.raises(LLMError) as raised:
        client.text(MESSAGES)
    assert_one_error(raised.value, client.endpoint, "no choices")


def test_http_500(llm_stub):
    llm_stub.enqueue(status=500, error="model runner crashed")
    client = client_for(llm_stub)
    with pytest.raises(LLMError) as raised:
        client.structured(MESSAGES, Verdict, "verdict")
    assert_one_error(raised.value, client.endpoint, "HTTP 500", "model runner crashed")
    assert len(llm_stub.requests) == 1  # no retry hides a failing endpoint


def test_http_404_for_an_unknown_model(llm_stub):
    llm_stub.enqueue(status=404, error="model 'llama9' not found")
    client = client_for(llm_stub, llm_model="llama9")
    with pytest.raises(LLMError) as raised:
        client.text(MESSAGES)
    assert_one_error(raised.value, client.endpoint, "HTTP 404", "llama9")


def test_timeout(llm_stub):
    llm_stub.enqueue(GOOD, hang_s=10.0)
    client = client_for(llm_stub, llm_timeout_s=0.3)
    with pytest.raises(LLMError) as raised:
        client.structured(MESSAGES, Verdict, "verdict")
    assert_one_error(raised.value, client.endpoint, "did not answer within 0.3 s",
                     "EVIDENCE_LLM_TIMEOUT_S")


def test_connection_refused():
    settings = Settings(llm_base_url=f"http://127.0.0.1:{free_port()}/v1", llm_model="m")
    client = LLMClient.from_settings(settings)
    with pytest.raises(LLMError) as raised:
        client.text(MESSAGES)
    assert_one_error(raised.value, client.endpoint, "could not be reached",
                     "connection refused")


# Configuration ---------------------------------------------------------------------------------

def test_no_endpoint_configured_means_no_client():
    assert LLMClient.from_settings(Settings()) is None
    assert describe_missing(Settings()) == (
        "No language model is configured; set EVIDENCE_LLM_BASE_URL and EVIDENCE_LLM_MODEL "
        "(an OpenAI-compatible endpoint such as http://127.0.0.1:11434/v1 for Ollama, and the "
        "model it serves).")


@pytest.mark.parametrize(("base_url", "model", "missing"), [
    ("http://127.0.0.1:11434/v1", None, "set EVIDENCE_LLM_MODEL ("),
    ("http://127.0.0.1:11434/v1", "  ", "set EVIDENCE_LLM_MODEL ("),
    (None, "llama3", "set EVIDENCE_LLM_BASE_URL ("),
])
def test_half_a_configuration_names_the_missing_setting(base_url, model, missing):
    settings = Settings(llm_base_url=base_url, llm_model=model)
    assert LLMClient.from_settings(settings) is None
    assert missing in describe_missing(settings)


def test_settings_come_from_the_environment(monkeypatch, llm_stub):
    monkeypatch.setenv("EVIDENCE_LLM_BASE_URL", llm_stub.base_url)
    monkeypatch.setenv("EVIDENCE_LLM_MODEL", "env-model")
    monkeypatch.setenv("EVIDENCE_LLM_TIMEOUT_S", "7.5")
    client = LLMClient.from_settings(Settings())
    assert describe_missing(Settings()) is None
    assert (client.endpoint, client.model, client.timeout_s) == (
        f"{llm_stub.base_url}/chat/completions", "env-model", 7.5)


def test_a_base_url_that_is_not_http_is_refused_in_one_sentence():
    with pytest.raises(UserInputError, match="EVIDENCE_LLM_BASE_URL 'localhost:11434' is not"):
        LLMClient.from_settings(Settings(llm_base_url="localhost:11434", llm_model="m"))


def test_a_trailing_slash_on_the_base_url_is_harmless(llm_stub):
    llm_stub.enqueue("ok")
    client = LLMClient.from_settings(llm_stub.settings(llm_base_url=llm_stub.base_url + "/"))
    assert client.text(MESSAGES) == "ok"
    assert llm_stub.requests[0].path == "/v1/chat/completions"
