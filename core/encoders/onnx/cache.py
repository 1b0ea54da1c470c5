"""The cache of exports: a folder per model, library versions and export format, named by
a digest of them; finding a model's folder and its check, and removing exports left
damaged or half made."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from core.encoders.embedding import resolve_model_location
from core.encoders.onnx.check import (
    CHECK_TEXTS,
    EXPORT_FORMAT,
    MODEL_FILE,
    OPSET,
    CheckRecord,
    read_record,
)
from core.encoders.onnx.layout import ModelLayout, OnnxRefused, _one_line, read_layout

# The libraries whose versions shape the exported graph, its run or the torch reference.
VERSIONED_PACKAGES = ("torch", "transformers", "sentence-transformers", "tokenizers", "onnx",
                      "onnxruntime")
# A temporary export folder left by a process that died is removed after this long.
STALE_EXPORT_S = 3600.0


def _package_versions() -> dict[str, str]:
    versions = {}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def cache_key(layout: ModelLayout, versions: dict[str, str]) -> str:
    """A digest of the model's files (the folder's own and its modules'), the versions and
    the export format: any change gives a new export, checked anew."""
    digest = hashlib.sha256(json.dumps(
        {"format": EXPORT_FORMAT, "opset": OPSET, "versions": versions,
         "check_texts": hashlib.sha256("\n\0".join(CHECK_TEXTS).encode()).hexdigest()},
        sort_keys=True).encode())
    files = [p for p in layout.folder.iterdir() if p.is_file()]
    for module in layout.module_paths:  # a module with nothing to configure has no folder
        if (layout.folder / module).is_dir():
            files += [p for p in (layout.folder / module).iterdir() if p.is_file()]
    for path in sorted(files):
        if path.name.startswith("."):
            continue
        digest.update(str(path.relative_to(layout.folder)).encode() + b"\0")
        with path.open("rb") as handle:
            digest.update(hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()[:16]


def cache_folder(cache_dir: Path, model_name: str, key: str) -> Path:
    """`<cache_dir>/<model name>-<key>`; a model given as a path is named by its last part."""
    shown = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(model_name).name or "model").strip("-.")
    return cache_dir / f"{shown[:60] or 'model'}-{key}"


@dataclass(frozen=True)
class CachedExport:
    """Where the export of a model lives (or will), and its check if it has been made."""

    layout: ModelLayout
    folder: Path
    key: str
    versions: dict[str, str]
    record: CheckRecord | None

    @property
    def model_path(self) -> Path:
        return self.folder / MODEL_FILE


def find_export(model_name: str, cache_dir: Path) -> CachedExport:
    """The model's layout and its cache folder, read from disk; nothing is loaded. Refused
    (OnnxRefused) when the model is not a local sentence-transformers folder the ONNX path
    can reproduce."""
    location = Path(resolve_model_location(model_name)).expanduser()
    if not location.is_dir():
        raise OnnxRefused("the ONNX export reads the model from a local folder, and "
                          f"'{model_name}' is not one")
    layout = read_layout(location)
    versions = _package_versions()
    for needed in ("onnxruntime", "tokenizers"):
        if versions[needed] == "absent":
            raise OnnxRefused(f"{needed} is not installed")
    try:
        key = cache_key(layout, versions)
    except OSError as exc:
        raise OnnxRefused(f"the model's files cannot be read ({_one_line(exc)})") from None
    folder = cache_folder(cache_dir, model_name, key)
    return CachedExport(layout, folder, key, versions, read_record(folder))


def _remove_stale_exports(cache_dir: Path) -> None:
    """Temporary folders of exports whose process died (a live export is never this old)."""
    now = time.time()
    for leftover in cache_dir.glob(".export-*"):
        try:
            if now - leftover.stat().st_mtime > STALE_EXPORT_S:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            continue


def _discard(folder: Path) -> None:
    """Remove a damaged export: renamed away first, so no reader finds it half deleted."""
    trash = folder.with_name(f".export-{folder.name}-damaged-{os.getpid()}")
    try:
        os.rename(folder, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)
