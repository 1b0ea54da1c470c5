"""An optional OpenAI-compatible language model: one client, one error type."""

from core.answers.llm.client import LLMClient, LLMError, describe_missing, strict_json_schema

__all__ = ["LLMClient", "LLMError", "describe_missing", "strict_json_schema"]
