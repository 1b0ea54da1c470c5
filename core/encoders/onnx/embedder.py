"""OnnxEmbedder: the model on ONNX Runtime once its export has passed the check, and torch
standing in, saying why, when it has not."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.encoders.embedding import Embedder, SentenceTransformerEmbedder, resolve_model_location
from core.encoders.onnx.cache import CachedExport, _discard, find_export
from core.encoders.onnx.check import CHECK_MIN_COSINE, CHECK_TEXTS, MODEL_FILE, CheckRecord
from core.encoders.onnx.export import _sha256, export_and_check
from core.encoders.onnx.layout import OnnxRefused, _one_line
from core.encoders.onnx.report import onnx_runtime_description, torch_runtime_description
from core.encoders.onnx.runtime import OnnxEncoder, _cosines, load_tokenizer, open_session
from core.errors import ModelUnavailableError

# The notes (which runtime embeds, and why not ONNX Runtime) go to this logger; the command
# line prints its warnings.
logger = logging.getLogger("core.encoders")


class OnnxEmbedder(Embedder):
    """The same model on ONNX Runtime, once its export has passed the check.

    Built on the torch embedder of the same model, which makes the reference vectors of the
    check and runs the model whenever the ONNX path is refused: then, unless `required`, the
    embedder falls back to torch and logs why, once; with `required` it raises
    ModelUnavailableError. `runtime` says which one runs ("onnx" or "torch")."""

    def __init__(self, torch_embedder: SentenceTransformerEmbedder, *, cache_dir: Path,
                 required: bool = False, batch_size: int | None = None,
                 threads: int = 0) -> None:
        self.name = torch_embedder.name
        self.threads = threads
        self.torch_embedder = torch_embedder
        self.cache_dir = Path(cache_dir).expanduser()
        self.required = required
        self.batch_size = batch_size or torch_embedder.batch_size
        self.notes: list[str] = []
        self.export: CachedExport | None = None
        self._encoder: OnnxEncoder | None = None
        self._counter: Any = None
        self._fallback = False
        self._ready = False
        self._lock = threading.Lock()

    # Loading ---------------------------------------------------------------------------

    def warm_up(self) -> None:
        """Open the checked export (exporting and checking it first if needed), or fall
        back to torch; either way once."""
        with self._lock:
            if self._ready:
                return
            try:
                self._encoder = self._open()
            except OnnxRefused as refused:
                reason = str(refused)
                if self.required:
                    raise ModelUnavailableError(
                        f"EVIDENCE_EMBEDDING_RUNTIME=onnx, but the embedding model "
                        f"'{self.name}' cannot run on ONNX Runtime: {reason}; set "
                        "EVIDENCE_EMBEDDING_RUNTIME=auto or torch to embed with torch."
                    ) from None
                self.torch_embedder.warm_up()
                self._fallback = True
                self._note(f"the embedding model '{self.name}' runs on torch, not ONNX "
                           f"Runtime: {reason}")
            self._ready = True

    def _open(self) -> OnnxEncoder:
        try:
            export = find_export(self.name, self.cache_dir)
        except OnnxRefused:
            # A model that is missing altogether is refused as the torch embedder refuses it.
            if not Path(resolve_model_location(self.name)).expanduser().exists():
                self.torch_embedder.warm_up()
            raise
        if export.record is not None and not export.record.passed:
            self.export = export
            raise OnnxRefused(export.record.refusal())
        if export.record is None and export.folder.exists():
            self._note(f"the cached ONNX export in {export.folder} has no readable check "
                       "record; it is exported and checked again")
            _discard(export.folder)
        elif export.record is not None:
            problem = None
            try:
                encoder = self._encoder_for(export)
                problem = self._spot_check(encoder, export.record)
            except Exception as exc:  # onnxruntime raises its own types for a bad file
                problem = _one_line(exc)
            if problem is None:
                self.export = export
                return encoder
            self._note(f"the cached ONNX model in {export.folder} was damaged ({problem}); "
                       "it is exported and checked again")
            _discard(export.folder)
        export = self._export(export)
        self.export = export
        if not export.record.passed:
            raise OnnxRefused(export.record.refusal())
        try:
            encoder = self._encoder_for(export)
        except Exception as exc:
            raise OnnxRefused(f"ONNX Runtime cannot load its export ({_one_line(exc)})"
                              ) from None
        return encoder

    def _export(self, export: CachedExport) -> CachedExport:
        try:
            self.torch_embedder.warm_up()
            record = export_and_check(export.layout, export.folder, self.torch_embedder,
                                      model_name=self.name, key=export.key,
                                      versions=export.versions)
        except ModelUnavailableError:
            raise
        except Exception as exc:
            raise OnnxRefused(f"its ONNX export failed ({_one_line(exc)})") from None
        return CachedExport(export.layout, export.folder, export.key, export.versions, record)

    def _encoder_for(self, export: CachedExport) -> OnnxEncoder:
        if not export.model_path.is_file():
            raise FileNotFoundError(f"{MODEL_FILE} is missing")
        recorded = export.record.data if export.record else {}
        size = export.model_path.stat().st_size
        if recorded.get("model_bytes") not in (None, size):
            raise ValueError(f"{MODEL_FILE} is {size:,} bytes, not {recorded['model_bytes']:,}")
        if recorded.get("model_sha256") not in (None, _sha256(export.model_path)):
            raise ValueError(f"{MODEL_FILE}'s sha256 is not the one recorded")
        return OnnxEncoder(open_session(export.model_path, self.threads),
                           load_tokenizer(export.layout, truncate=True),
                           export.layout.dimension, self.batch_size)

    @staticmethod
    def _spot_check(encoder: OnnxEncoder, record: CheckRecord) -> str | None:
        """A few check texts against the torch vectors the record keeps: the cached file
        still computes what was checked (a damaged one does not)."""
        reference = record.data.get("reference") or {}
        indices = [int(i) for i in reference]
        if not indices:
            return "its record keeps no reference vectors"
        vectors = encoder.encode([CHECK_TEXTS[i] for i in indices])
        expected = np.asarray([reference[str(i)] for i in indices], dtype=np.float32)
        worst = float(_cosines(vectors, expected).min())
        if not worst >= CHECK_MIN_COSINE:  # NaN too: a damaged weight can make one
            return f"min cosine {worst:.7f} to the recorded torch vectors"
        return None

    def _note(self, note: str) -> None:
        self.notes.append(note)
        logger.warning(note)

    # Embedding -------------------------------------------------------------------------

    @property
    def runtime(self) -> str:
        """"onnx" or "torch": what embeds (the model is loaded to know)."""
        self.warm_up()
        return "torch" if self._fallback else "onnx"

    @property
    def runtime_description(self) -> str:
        """What runs the model, for people: the runtime, the export and its check."""
        self.warm_up()
        if self._fallback or self.export is None or self.export.record is None:
            return torch_runtime_description()
        return onnx_runtime_description(self.export)

    @property
    def dimension(self) -> int:
        self.warm_up()
        if self._fallback:
            return self.torch_embedder.dimension
        return self._encoder.dimension

    @property
    def tokenizer_name(self) -> str:
        return f"{self.name} tokenizer"

    def count_tokens(self, text: str) -> int:
        self.warm_up()
        if self._fallback:
            return self.torch_embedder.count_tokens(text)
        if self._counter is None:
            self._counter = load_tokenizer(self.export.layout, truncate=False)
        return len(self._counter.encode(text, add_special_tokens=False).ids)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.warm_up()
        if self._fallback:
            return self.torch_embedder.embed(texts)
        return self._encoder.encode(texts)
