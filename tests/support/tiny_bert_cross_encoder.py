"""A tiny, offline sentence-transformers CrossEncoder for tests.

`build_tiny_bert_cross_encoder(folder)` writes a minute `BertForSequenceClassification`
(a couple of layers, 16 hidden units, seeded weights) and a WordPiece tokenizer over a
small vocabulary into `folder` with `save_pretrained`, laid out like any model folder on
the Hugging Face hub, so that `sentence_transformers.CrossEncoder(folder)` loads it and
runs real torch inference without a download. Its scores carry no meaning; tests compare
them with the same model run directly through transformers.

`activation` writes the activation sentence-transformers applies in `predict`: None leaves
its default (a sigmoid for one output), "identity" makes the model return raw logits, as
the ms-marco cross-encoders on the hub do."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCABULARY = (
    "vendor vendors data customer encrypt encrypted encryption rest transit aes tls key keys "
    "rotation access review quarterly annual policy policies backup backups restore tested "
    "incident response plan audit logs retention mfa training staff security report soc "
    "cat mat dog sat the a at of is with using does all 256 1 2 3 ##s ##ed ##ing"
).split()
MAX_POSITIONS = 128
_ACTIVATIONS = {"identity": "torch.nn.modules.linear.Identity",
                "sigmoid": "torch.nn.modules.activation.Sigmoid"}


def build_tiny_bert_cross_encoder(folder: Path, *, labels: int = 1,
                                  activation: Literal["identity", "sigmoid"] | None = "identity",
                                  seed: int = 7) -> Path:
    """Write the tiny model and its tokenizer into `folder` (created); return the folder."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab_file = folder / "vocab.txt"
    vocab_file.write_text("".join(f"{token}\n" for token in [*SPECIAL_TOKENS, *VOCABULARY]),
                          encoding="utf-8")
    tokenizer = BertTokenizer(vocab=str(vocab_file), do_lower_case=True,
                              model_max_length=MAX_POSITIONS)
    config = BertConfig(
        vocab_size=len(SPECIAL_TOKENS) + len(VOCABULARY), hidden_size=16, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=32, max_position_embeddings=MAX_POSITIONS,
        type_vocab_size=2, num_labels=labels, pad_token_id=0,
        initializer_range=0.5,
    )
    if activation is not None:
        config.sentence_transformers = {"activation_fn": _ACTIVATIONS[activation]}
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config).eval()
    with torch.no_grad():  # logits of several units: scores spread over 0..1, not near 0.5
        model.classifier.weight.mul_(6.0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def reference_logits(folder: Path, query: str, passages: list[str]) -> list[list[float]]:
    """The model's raw outputs for each (query, passage), computed with transformers alone."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(folder, local_files_only=True)
    model.eval()
    batch = tokenizer([query] * len(passages), passages, padding=True, truncation=True,
                      max_length=MAX_POSITIONS, return_tensors="pt")
    with torch.no_grad():
        return model(**batch).logits.tolist()
