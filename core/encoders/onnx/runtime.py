"""Running the exported graph: the model's own tokenizer, an ONNX Runtime session, and the
encoder that batches, mean-pools and normalises as sentence-transformers does."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.encoders.onnx.layout import ModelLayout

# A batch holds at most this many tokens (rows x its longest row) besides at most batch_size
# rows: the attention's scores grow with the square of the length, and ONNX Runtime keeps its
# peak memory. On 2 cores, 16 rows of 256 tokens run as fast as 64 and peak 330 MB lower.
MAX_BATCH_TOKENS = 4096


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), not the machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def load_tokenizer(layout: ModelLayout, *, truncate: bool) -> Any:
    """The model's own fast tokenizer, set up as sentence-transformers sets it: truncated at
    max_seq_length, lower-cased first when the model asks for it; no padding (the batches
    pad themselves)."""
    from tokenizers import Tokenizer, normalizers

    tokenizer = Tokenizer.from_file(str(layout.folder / "tokenizer.json"))
    tokenizer.no_padding()
    if truncate:
        tokenizer.enable_truncation(max_length=layout.max_seq_length)
    else:
        tokenizer.no_truncation()
    if layout.do_lower_case:
        present = tokenizer.normalizer
        tokenizer.normalizer = (normalizers.Lowercase() if present is None
                                else normalizers.Sequence([normalizers.Lowercase(), present]))
    return tokenizer


def open_session(path: Path, threads: int = 0) -> Any:
    """An ONNX Runtime session on `threads` threads (0: the CPUs this process may use), every
    graph optimisation on."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or usable_cpus()
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class OnnxEncoder:
    """Tokenise, run the graph in batches of similar length, mean-pool, L2-normalise."""

    def __init__(self, session: Any, tokenizer: Any, dimension: int, batch_size: int) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self.dimension = dimension
        self.batch_size = batch_size
        self.input_names = {i.name for i in session.get_inputs()}
        padding = tokenizer.padding or {}
        self.pad_id = int(padding.get("pad_id", 0))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return vectors
        encodings = self.tokenizer.encode_batch(list(texts))
        lengths = np.array([len(e.ids) for e in encodings])
        # Longest first, as sentence-transformers orders them: a batch pads to its own longest.
        order = np.argsort(-lengths, kind="stable")
        start = 0
        while start < len(order):
            width = int(lengths[order[start]])
            size = max(1, min(self.batch_size, MAX_BATCH_TOKENS // max(1, width)))
            rows = order[start : start + size]
            start += size
            ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            types = np.zeros((len(rows), width), dtype=np.int64)
            for row, index in enumerate(rows):
                encoding = encodings[index]
                n = len(encoding.ids)
                ids[row, :n] = encoding.ids
                mask[row, :n] = 1
                types[row, :n] = encoding.type_ids
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            [hidden] = self.session.run(None, {k: v for k, v in feeds.items()
                                               if k in self.input_names})
            vectors[rows] = _mean_pooled(hidden, mask)
        return vectors


def _mean_pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling and Normalize: the masked mean of the token
    vectors, divided by its L2 norm."""
    weights = mask[..., None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two sets of vectors (normalised here, whatever they were given as)."""
    a = a / np.clip(np.linalg.norm(a, axis=1, keepdims=True), 1e-12, None)
    b = b / np.clip(np.linalg.norm(b, axis=1, keepdims=True), 1e-12, None)
    return (a * b).sum(axis=1)
