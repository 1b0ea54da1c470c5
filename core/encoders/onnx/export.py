"""Export and check: the transformer exported from the installed weights with torch,
optimised where that is faster and as exact, checked against the torch vectors, and
written whole into its cache folder with the record of the check."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from core.encoders.embedding import Embedder
from core.encoders.onnx.cache import _remove_stale_exports
from core.encoders.onnx.check import (
    CHECK_MIN_COSINE,
    CHECK_TEXTS,
    EXPORT_FORMAT,
    MODEL_FILE,
    OPSET,
    RECORD_FILE,
    SPOT_CHECK_TEXTS,
    CheckRecord,
    read_record,
)
from core.encoders.onnx.layout import ModelLayout, _one_line
from core.encoders.onnx.runtime import (
    OnnxEncoder,
    _cosines,
    load_tokenizer,
    open_session,
    usable_cpus,
)

# Speed is compared on the long texts: the ingest's chunks, where the encode time goes.
_TIMED_TEXTS = tuple(t for t in CHECK_TEXTS if len(t) >= 600)[:12]


def _export_graph(layout: ModelLayout, path: Path) -> None:
    """torch.onnx.export of the transformer's last hidden state (the TorchScript exporter,
    which needs neither onnxscript nor optimum), batch and sequence axes dynamic. Eager
    attention, so that onnxruntime's optimiser can fuse it."""
    import torch
    from transformers import AutoModel

    encoder = AutoModel.from_pretrained(str(layout.folder), attn_implementation="eager",
                                        local_files_only=True)
    encoder.eval()
    names = layout.input_names

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, *inputs: Any) -> Any:
            return self.encoder(**dict(zip(names, inputs, strict=True))).last_hidden_state

    # Two rows, the second padded: the mask's path through the graph is traced, not skipped.
    ids = torch.arange(1000, 1016, dtype=torch.long).repeat(2, 1)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    dummy = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    dynamic = {name: {0: "batch", 1: "sequence"} for name in (*names, "last_hidden_state")}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(LastHiddenState(), tuple(dummy[n] for n in names), str(path),
                          input_names=list(names), output_names=["last_hidden_state"],
                          dynamic_axes=dynamic, opset_version=OPSET, do_constant_folding=True,
                          dynamo=False)


def _optimize_graph(layout: ModelLayout, source: Path, target: Path) -> str:
    """onnxruntime's transformer optimiser (fused attention, layer norms, GELU); returns what
    it fused."""
    from onnxruntime.transformers.optimizer import optimize_model

    quiet = [logging.getLogger(name) for name in ("onnxruntime", "onnxruntime.transformers")]
    levels = [q.level for q in quiet]
    for q in quiet:
        q.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optimized = optimize_model(str(source), model_type="bert",
                                       num_heads=layout.num_heads,
                                       hidden_size=layout.hidden_size)
        fused = {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}
        optimized.save_model_to_file(str(target))
    finally:
        for q, level in zip(quiet, levels, strict=True):
            q.setLevel(level)
    return ", ".join(f"{name} x{count}" for name, count in sorted(fused.items())) or "nothing"


@dataclass
class _Candidate:
    label: str
    path: Path
    encoder: OnnxEncoder
    cosines: np.ndarray
    seconds: float = float("inf")


def export_and_check(layout: ModelLayout, folder: Path, torch_embedder: Embedder, *,
                     model_name: str, key: str, versions: dict[str, str]) -> CheckRecord:
    """Export, optimise where that is faster and as exact, check against torch, and write
    `folder` whole (a temporary folder renamed); when another process got there first, its
    folder is kept and read."""
    started = time.perf_counter()
    reference = torch_embedder.embed(list(CHECK_TEXTS))
    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_exports(folder.parent)
    work = Path(tempfile.mkdtemp(prefix=f".export-{folder.name}-", dir=folder.parent))
    try:
        plain = work / "plain.onnx"
        _export_graph(layout, plain)
        candidates = [_candidate("plain", plain, layout, reference)]
        optimizer = "not tried: only BERT-style encoders"
        if layout.num_heads and layout.hidden_size and layout.model_type in {
                "bert", "roberta", "xlm-roberta"}:
            try:
                optimizer = _optimize_graph(layout, plain, work / "optimized.onnx")
                candidates.append(
                    _candidate("optimized", work / "optimized.onnx", layout, reference))
            except Exception as exc:  # the optimiser is an extra; the plain graph stands
                optimizer = f"failed: {_one_line(exc)}"
        _time_candidates(candidates)
        passing = [c for c in candidates if c.cosines.min() >= CHECK_MIN_COSINE]
        chosen = (min(passing, key=lambda c: c.seconds) if passing
                  else max(candidates, key=lambda c: np.nan_to_num(c.cosines.min(), nan=-1.0)))
        os.replace(chosen.path, work / MODEL_FILE)
        for candidate in candidates:
            candidate.path.unlink(missing_ok=True)
        data = {
            "format": EXPORT_FORMAT, "model": model_name, "source": str(layout.folder),
            "key": key, "min_cosine": float(chosen.cosines.min()),
            "mean_cosine": float(chosen.cosines.mean()), "threshold": CHECK_MIN_COSINE,
            "passed": bool(chosen.cosines.min() >= CHECK_MIN_COSINE),
            "texts": len(CHECK_TEXTS), "optimized": chosen.label == "optimized",
            "optimizer": optimizer,
            "texts_per_s": {c.label: round(len(_TIMED_TEXTS) / c.seconds, 2)
                            for c in candidates},
            "timed_texts": len(_TIMED_TEXTS), "versions": versions,
            "opset": OPSET, "intra_op_threads": usable_cpus(),
            "max_seq_length": layout.max_seq_length,
            "model_bytes": (work / MODEL_FILE).stat().st_size,
            "model_sha256": _sha256(work / MODEL_FILE),
            "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "export_s": round(time.perf_counter() - started, 2),
            "reference": {str(i): [round(float(x), 8) for x in reference[i]]
                          for i in SPOT_CHECK_TEXTS},
        }
        _write_json(work / RECORD_FILE, data)
        try:
            os.rename(work, folder)
        except OSError:  # another process's export is in place: keep it, read it
            if read_record(folder) is None:
                raise
        return read_record(folder) or CheckRecord(data)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _candidate(label: str, path: Path, layout: ModelLayout,
               reference: np.ndarray) -> _Candidate:
    encoder = OnnxEncoder(open_session(path), load_tokenizer(layout, truncate=True),
                          layout.dimension, batch_size=64)
    return _Candidate(label, path, encoder, _cosines(encoder.encode(CHECK_TEXTS), reference))


def _time_candidates(candidates: list[_Candidate], rounds: int = 3) -> None:
    """Each candidate's best time on the long check texts, the candidates taking turns so a
    busy machine slows them alike."""
    for _ in range(rounds):
        for candidate in candidates:
            began = time.perf_counter()
            candidate.encoder.encode(_TIMED_TEXTS)
            candidate.seconds = min(candidate.seconds, time.perf_counter() - began)


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
