"""Tiny, offline stand-in for a FlashRank cross-encoder, for tests.

FlashRank downloads its ONNX models from Hugging Face, which is impossible in
the test environment.  ``build_tiny_cross_encoder`` writes a minute model into a
FlashRank cache folder, laid out exactly like a real download
(``<cache_dir>/<model_name>/`` holding the ``.onnx`` file named in
``flashrank.Config.model_file_map`` plus ``tokenizer.json``, ``config.json``,
``tokenizer_config.json``, ``special_tokens_map.json`` and ``vocab.txt``), so
that the real ``flashrank.Ranker(model_name=..., cache_dir=...)`` finds the
folder, skips the download, and ``Ranker.rerank`` runs real onnxruntime
inference.  The model's logit is deterministic and meaningful:
``LOGIT_BIAS + LOGIT_SCALE * n`` where ``n`` is the number of query tokens
(counted with repetition) that also occur in the passage.  Only words in the
vocabulary count; anything else (including common stop words, which the default
vocabulary leaves out on purpose) becomes ``[UNK]`` and is ignored.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterable

import onnx
from onnx import TensorProto, helper
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

__all__ = [
    "build_tiny_cross_encoder",
    "DEFAULT_MODEL_NAME",
    "DEFAULT_VOCABULARY",
    "LOGIT_BIAS",
    "LOGIT_SCALE",
    "SPECIAL_TOKENS",
]

DEFAULT_MODEL_NAME = "ms-marco-TinyBERT-L-2-v2"

# Special tokens come first; ids below FIRST_WORD_ID never count as matches.
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(len(SPECIAL_TOKENS))
FIRST_WORD_ID = len(SPECIAL_TOKENS)

# logit = LOGIT_BIAS + LOGIT_SCALE * shared_tokens; flashrank applies a sigmoid.
# 0 shared -> 0.119, 1 -> 0.182, 2 -> 0.269, 3 -> 0.378, 4 -> 0.5 ... (float32 stays
# strictly increasing up to roughly 37 shared tokens).
LOGIT_BIAS = -2.0
LOGIT_SCALE = 0.5

# Lower-case content words (no stop words: those map to [UNK] and never match).
DEFAULT_VOCABULARY = (
    # security / vendor-assessment domain
    "vendor vendors supplier security policy policies data customer customers "
    "encrypt encrypted encryption encrypts rest transit tls aes ssl key keys "
    "management rotation multi factor mfa authentication authorization "
    "administrative admin access rights review reviews reviewed quarterly "
    "annually annual monthly yearly months days year years soc type ii report "
    "reports audit audits auditor logs logging log retain retention retained "
    "penetration pentest testing tested test tests incident incidents response "
    "plan plans documented procedure procedures backup backups back restore "
    "restoration recovery disaster continuity business critical high medium low "
    "vulnerability vulnerabilities remediate remediation patch patching "
    "training awareness employees staff personnel subprocessor subprocessors "
    "onboarding assessment assess risk risks compliance control controls "
    "information network firewall password passwords privacy gdpr iso hipaa "
    "certificate certified evidence questionnaire document documents "
    "requirement requirements criteria criterion least minimum "
    # generic words handy in tests
    "cat cats dog dogs mouse bird fish animal animals pet pets sat mat run runs "
    "apple apples banana orange fruit red green blue color colour car cars "
    "house city paris france london weather rain sun sky capital country "
    "python code software computer cloud server storage database search "
    "rerank reranker ranking query passage passages answer question questions "
    "hello world foo bar baz alpha beta gamma delta "
    # digits and numbers (BERT pre-tokenisation splits on punctuation)
    "0 1 2 3 4 5 6 7 8 9 10 12 24 30 60 90 256 365 2024 2025"
).split()


def _ordered_vocab(words: Iterable[str]) -> dict[str, int]:
    vocab: dict[str, int] = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for word in words:
        word = word.strip().lower()
        if word and word not in vocab:
            vocab[word] = len(vocab)
    return vocab


def _build_tokenizer(vocab: dict[str, int]) -> Tokenizer:
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", CLS_ID), ("[SEP]", SEP_ID)],
    )
    tokenizer.add_special_tokens(SPECIAL_TOKENS)
    return tokenizer


def _build_onnx_model() -> onnx.ModelProto:
    """Graph: logit[b] = BIAS + SCALE * #{i in query : ids[b,i] occurs in passage}.

    Query tokens are real words (id >= FIRST_WORD_ID) with attention_mask 1 and
    token_type_ids 0; passage tokens the same with token_type_ids 1.
    """
    f = TensorProto.FLOAT
    i64 = TensorProto.INT64
    shape = ["batch", "sequence"]
    inputs = [
        helper.make_tensor_value_info("input_ids", i64, shape),
        helper.make_tensor_value_info("attention_mask", i64, shape),
        helper.make_tensor_value_info("token_type_ids", i64, shape),
    ]
    outputs = [helper.make_tensor_value_info("logits", f, ["batch", 1])]
    inits = [
        helper.make_tensor("first_word_id_minus_1", i64, [], [FIRST_WORD_ID - 1]),
        helper.make_tensor("one", f, [], [1.0]),
        helper.make_tensor("scale", f, [], [LOGIT_SCALE]),
        helper.make_tensor("bias", f, [], [LOGIT_BIAS]),
        helper.make_tensor("axis1", i64, [1], [1]),
        helper.make_tensor("axis2", i64, [1], [2]),
    ]
    n = helper.make_node
    nodes = [
        # per-token float masks, [batch, seq]
        n("Greater", ["input_ids", "first_word_id_minus_1"], ["is_word_b"]),
        n("Cast", ["is_word_b"], ["is_word"], to=f),
        n("Cast", ["attention_mask"], ["attn"], to=f),
        n("Cast", ["token_type_ids"], ["seg_b"], to=f),
        n("Sub", ["one", "seg_b"], ["seg_a"]),
        n("Mul", ["attn", "is_word"], ["valid"]),
        n("Mul", ["valid", "seg_a"], ["mask_a"]),
        n("Mul", ["valid", "seg_b"], ["mask_b"]),
        # pairwise token equality, [batch, seq, seq]
        n("Unsqueeze", ["input_ids", "axis2"], ["ids_i"]),  # [b, s, 1]
        n("Unsqueeze", ["input_ids", "axis1"], ["ids_j"]),  # [b, 1, s]
        n("Equal", ["ids_i", "ids_j"], ["eq_b"]),
        n("Cast", ["eq_b"], ["eq"], to=f),
        n("Unsqueeze", ["mask_a", "axis2"], ["mask_a_i"]),
        n("Unsqueeze", ["mask_b", "axis1"], ["mask_b_j"]),
        n("Mul", ["eq", "mask_a_i"], ["eq_a"]),
        n("Mul", ["eq_a", "mask_b_j"], ["match"]),
        # query token i found anywhere in passage -> 1, then count per row
        n("ReduceMax", ["match"], ["hit"], axes=[2], keepdims=0),  # [b, s]
        n("ReduceSum", ["hit", "axis1"], ["shared"], keepdims=1),  # [b, 1]
        n("Mul", ["shared", "scale"], ["scaled"]),
        n("Add", ["scaled", "bias"], ["logits"]),
    ]
    graph = helper.make_graph(nodes, "tiny_cross_encoder", inputs, outputs, inits)
    model = helper.make_model(
        graph,
        producer_name="tests.support.tiny_cross_encoder",
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8  # accepted by any recent onnxruntime
    onnx.checker.check_model(model, full_check=True)
    return model


def build_tiny_cross_encoder(
    cache_dir: pathlib.Path,
    model_name: str = DEFAULT_MODEL_NAME,
    *,
    vocabulary: Iterable[str] | None = None,
) -> pathlib.Path:
    """Write a tiny FlashRank-compatible cross-encoder into ``cache_dir/model_name``.

    ``model_name`` must be a pairwise (ONNX) model known to
    ``flashrank.Config.model_file_map``; its ONNX file name is taken from there.
    ``vocabulary`` replaces :data:`DEFAULT_VOCABULARY` (words are lower-cased;
    words outside it tokenize to ``[UNK]`` and never count as shared).
    Returns the model folder.  Existing files in it are overwritten.
    """
    from flashrank.Config import listwise_rankers, model_file_map

    if model_name not in model_file_map:
        raise ValueError(f"{model_name!r} is not a FlashRank model name: {sorted(model_file_map)}")
    if model_name in listwise_rankers or not model_file_map[model_name].endswith(".onnx"):
        raise ValueError(f"{model_name!r} is not an ONNX pairwise cross-encoder")

    model_dir = pathlib.Path(cache_dir) / model_name
    model_dir.mkdir(parents=True, exist_ok=True)

    vocab = _ordered_vocab(DEFAULT_VOCABULARY if vocabulary is None else vocabulary)
    _build_tokenizer(vocab).save(str(model_dir / "tokenizer.json"))
    (model_dir / "vocab.txt").write_text(
        "".join(f"{tok}\n" for tok, _ in sorted(vocab.items(), key=lambda kv: kv[1])),
        encoding="utf-8",
    )

    def dump(name: str, obj: dict) -> None:
        (model_dir / name).write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")

    dump("config.json", {
        "architectures": ["BertForSequenceClassification"],
        "model_type": "bert",
        "num_labels": 1,
        "id2label": {"0": "LABEL_0"},
        "label2id": {"LABEL_0": 0},
        "vocab_size": len(vocab),
        "pad_token_id": PAD_ID,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "hidden_size": 1,
        "num_hidden_layers": 0,
        "_comment": "tiny deterministic test model built by tests/support/tiny_cross_encoder.py",
    })
    dump("tokenizer_config.json", {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": True,
        "model_max_length": 512,
        "unk_token": "[UNK]",
        "sep_token": "[SEP]",
        "pad_token": "[PAD]",
        "cls_token": "[CLS]",
        "mask_token": "[MASK]",
    })
    dump("special_tokens_map.json", {
        "unk_token": "[UNK]",
        "sep_token": "[SEP]",
        "pad_token": "[PAD]",
        "cls_token": "[CLS]",
        "mask_token": "[MASK]",
    })
    onnx.save_model(_build_onnx_model(), str(model_dir / model_file_map[model_name]))
    return model_dir


if __name__ == "__main__":
    import os
    import sys
    import tempfile
    import time
    from unittest import mock

    os.environ["HF_HUB_OFFLINE"] = "1"
    from flashrank import Ranker, RerankRequest

    def _no_download(self, model_name):  # pragma: no cover - must never run
        raise AssertionError(f"flashrank tried to download {model_name}")

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        model_dir = build_tiny_cross_encoder(pathlib.Path(tmp))
        built = time.perf_counter() - t0
        print(f"built {model_dir} in {built:.3f}s: {sorted(p.name for p in model_dir.iterdir())}")

        with mock.patch.object(Ranker, "_download_model_files", _no_download):
            ranker = Ranker(model_name=DEFAULT_MODEL_NAME, cache_dir=tmp)
            passages = [
                {"id": "none", "text": "The cat sat on the mat."},
                {"id": "two", "text": "Customer data is encrypted at rest."},
                {"id": "three", "text": "All customer data is encrypted at rest with AES."},
            ]
            original = passages
            results = ranker.rerank(RerankRequest(
                query="Does the vendor encrypt customer data at rest using AES-256?",
                passages=passages,
            ))

        for r in results:
            print(f"  {r['id']:>5}  score={r['score']!r}  type={type(r['score']).__name__}")
        print("same list object returned:", results is original,
              "| input dicts mutated:", all("score" in p for p in original))
        ids = [r["id"] for r in results]
        scores = [r["score"] for r in results]
        assert ids == ["three", "two", "none"], ids
        assert scores[0] > scores[1] > scores[2], scores
        sys.exit(0)
