"""The model folder: what a sentence-transformers folder says about the model, as far as
the ONNX path needs, and the refusal when the ONNX path cannot serve the model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class OnnxRefused(Exception):
    """The ONNX path cannot serve this model; the message says why, as a clause."""


@dataclass(frozen=True)
class ModelLayout:
    """What a sentence-transformers folder says about the model, as far as the ONNX path needs."""

    folder: Path
    max_seq_length: int
    dimension: int
    do_lower_case: bool
    model_type: str
    num_heads: int
    hidden_size: int
    input_names: tuple[str, ...]
    module_paths: tuple[str, ...]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OnnxRefused(f"the model folder has no {path.name}") from None
    except (OSError, ValueError) as exc:
        raise OnnxRefused(f"{path.name} cannot be read ({_one_line(exc)})") from None


def read_layout(folder: Path) -> ModelLayout:
    """The layout of a local sentence-transformers folder, refused unless the model is a
    transformer, mean pooling and normalisation: what the ONNX path reproduces."""
    try:
        return _read_layout(folder)
    except (AttributeError, TypeError, ValueError, IndexError):
        raise OnnxRefused("its configuration files are not as sentence-transformers writes "
                          "them") from None


def _read_layout(folder: Path) -> ModelLayout:
    modules = _read_json(folder / "modules.json")
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if kinds != ["Transformer", "Pooling", "Normalize"]:
        raise OnnxRefused(f"its modules are {' + '.join(kinds) or 'none'}, not Transformer + "
                          "Pooling + Normalize")
    if modules[0].get("path", "") != "":
        raise OnnxRefused("its transformer is not in the model folder itself")
    pooling_path = str(modules[1].get("path", ""))
    pooling = _read_json(folder / pooling_path / "config.json")
    modes = {k.removeprefix("pooling_mode_"): bool(v) for k, v in pooling.items()
             if k.startswith("pooling_mode_")}
    mean_only = (pooling.get("pooling_mode") == "mean" if "pooling_mode" in pooling
                 else modes.get("mean_tokens") and not any(
                     on for mode, on in modes.items() if mode != "mean_tokens"))
    if not mean_only:
        raise OnnxRefused("its pooling is not mean pooling")
    settings = _read_json(folder / "config_sentence_transformers.json") if (
        folder / "config_sentence_transformers.json").exists() else {}
    if settings.get("prompts") and any(settings["prompts"].values()) and settings.get(
            "default_prompt_name"):
        raise OnnxRefused("it prepends a default prompt")
    config = _read_json(folder / "config.json")
    if not (folder / "tokenizer.json").exists():
        raise OnnxRefused("the model folder has no tokenizer.json (a fast tokenizer)")
    sbert = _read_json(folder / "sentence_bert_config.json") if (
        folder / "sentence_bert_config.json").exists() else {}
    # As sentence-transformers takes it: its own setting, else the tokenizer's, never more
    # than the model's positions.
    declared = sbert.get("max_seq_length") or _tokenizer_max_length(folder)
    limits = [n for n in (declared, config.get("max_position_embeddings"))
              if isinstance(n, int) and n > 0]
    if not limits:
        raise OnnxRefused("its maximum sequence length is not recorded")
    inputs = ("input_ids", "attention_mask") + (
        ("token_type_ids",) if config.get("type_vocab_size") else ())
    return ModelLayout(
        folder=folder, max_seq_length=min(limits),
        dimension=int(pooling.get("word_embedding_dimension") or config.get("hidden_size", 0)),
        do_lower_case=bool(sbert.get("do_lower_case", False)),
        model_type=str(config.get("model_type", "")),
        num_heads=int(config.get("num_attention_heads", 0)),
        hidden_size=int(config.get("hidden_size", 0)), input_names=inputs,
        module_paths=tuple(str(m.get("path", "")) for m in modules if m.get("path")))


def _tokenizer_max_length(folder: Path) -> int | None:
    path = folder / "tokenizer_config.json"
    if not path.exists():
        return None
    value = _read_json(path).get("model_max_length")
    return value if isinstance(value, int) and value < 1_000_000 else None


def _one_line(exc: BaseException) -> str:
    return (" ".join(str(exc).split()) or type(exc).__name__)[:200].rstrip(".")
