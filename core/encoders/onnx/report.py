"""Reporting without loading: which runtime embeds, and the export and its check, read
from the model folder and the cache; nothing is loaded, exported or checked."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from core.encoders.onnx.cache import CachedExport, find_export
from core.encoders.onnx.check import CHECK_MIN_COSINE
from core.encoders.onnx.layout import OnnxRefused


def torch_runtime_description() -> str:
    return (f"sentence-transformers {_version('sentence-transformers')} on torch "
            f"{_version('torch')} (cpu)")


def onnx_runtime_description(export: CachedExport) -> str:
    runtime = f"onnxruntime {_version('onnxruntime')} (cpu)"
    record = export.record
    if record is None:
        return (f"{runtime}, to be exported from {export.layout.folder} to {export.model_path} "
                f"and checked against torch (cosine >= {CHECK_MIN_COSINE}) at first use")
    optimized = ", optimised" if record.optimized else ""
    return (f"{runtime}, exported from {export.layout.folder} to {export.model_path}"
            f"{optimized}, check: {record.summary()}")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "(not installed)"


@dataclass(frozen=True)
class RuntimeReport:
    """The embedding runtime as `evidence models` reports it: what runs, and why not ONNX
    Runtime when torch does."""

    runtime: str
    note: str | None = None


def describe_runtime(model_name: str, runtime_setting: str, cache_dir: Path) -> RuntimeReport:
    """Which runtime will embed with these settings, read from the model folder and the
    cached check; nothing is loaded, exported or checked."""
    if runtime_setting == "torch":
        return RuntimeReport(torch_runtime_description())
    try:
        export = find_export(model_name, Path(cache_dir).expanduser())
        if export.record is not None and not export.record.passed:
            raise OnnxRefused(export.record.refusal())
    except OnnxRefused as refused:
        if runtime_setting == "onnx":
            return RuntimeReport(
                "none", f"EVIDENCE_EMBEDDING_RUNTIME=onnx, but the model cannot run on ONNX "
                        f"Runtime: {refused}; nothing can be embedded until the setting is "
                        "auto or torch.")
        return RuntimeReport(torch_runtime_description(),
                             f"torch runs the model, not ONNX Runtime: {refused}.")
    return RuntimeReport(onnx_runtime_description(export))
