"""An optional OpenAI-compatible language model: one client, one error type, and the check of
what a model quotes against the prompt it was shown (`core.review.llm.quotes`)."""

from core.review.llm.client import LLMClient, LLMError, describe_missing, strict_json_schema

__all__ = ["LLMClient", "LLMError", "describe_missing", "strict_json_schema"]
