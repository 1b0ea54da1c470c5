"""ONNX Runtime for a sentence-transformers model: exported here from the installed weights,
cached, and checked against the torch vectors before it embeds anything.

The export is made once per model, library versions and export format, into a folder of
its own under `onnx_cache_dir`: `model.onnx` and `check.json`, the record of the check (the
smallest cosine to the torch vectors over CHECK_TEXTS, the texts, the versions). The folder
appears whole or not at all (built under a temporary name, then renamed), so two processes
exporting at once never read half a file. A later start reads the record and does not import
torch; it encodes a few of the check texts and compares them with the torch vectors the
record keeps, so a damaged file is found and exported again. A model whose check failed is
not used: the caller embeds with torch and says why."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from core.embedding import Embedder, SentenceTransformerEmbedder, resolve_model_location
from core.errors import ModelUnavailableError

logger = logging.getLogger("core.embedding")

# Every check text's ONNX vector must be at least this close to its torch vector.
CHECK_MIN_COSINE = 0.9999
# Changed whenever the export or the check changes: older cache folders are then not read.
EXPORT_FORMAT = 1
OPSET = 17
MODEL_FILE = "model.onnx"
RECORD_FILE = "check.json"
# The libraries whose versions shape the exported graph, its run or the torch reference.
VERSIONED_PACKAGES = ("torch", "transformers", "sentence-transformers", "tokenizers", "onnx",
                      "onnxruntime")
# Check texts kept with their torch vectors in the record and encoded again at every start.
SPOT_CHECK_TEXTS = (0, 17, 33, 63)
# A batch holds at most this many tokens (rows x its longest row) besides at most batch_size
# rows: the attention's scores grow with the square of the length, and ONNX Runtime keeps its
# peak memory. On 2 cores, 16 rows of 256 tokens run as fast as 64 and peak 330 MB lower.
MAX_BATCH_TOKENS = 4096
# A temporary export folder left by a process that died is removed after this long.
STALE_EXPORT_S = 3600.0

_SHORT_TEXTS = (
    "Does the vendor encrypt data at rest using AES-256?",
    "Does the vendor enforce multi-factor authentication for administrative access?",
    "Are backups encrypted and tested for restoration at least annually?",
    "Does the vendor maintain an incident response plan that is tested annually?",
    "Is access to production systems reviewed quarterly?",
    "Does the vendor perform background checks on employees with access to customer data?",
    "Are security patches applied within 30 days of release?",
    "Does the vendor hold a current SOC 2 Type II report?",
    "Is customer data deleted within 90 days of contract termination?",
    "Are audit logs retained for at least 12 months and protected from tampering?",
    "Does the vendor use TLS 1.2 or higher for data in transit?",
    "Is there a documented business continuity plan with defined RTO and RPO?",
    "Can you confirm the encryption algorithm used for the backup media?",
    "Please describe how administrator accounts are protected.",
    "What happens to our data when the contract ends?",
    "How quickly do you notify customers after a confirmed breach?",
    "Yes.",
    "No.",
    "N/A",
    "Yes, AES-256-GCM with keys in AWS KMS.",
    "Partially: MFA is enforced for admins only.",
    "Yes — see the Cryptography Standard §4.2.",
    "Quarterly.",
    "Within 72 hours.",
    "",
    "   leading and trailing spaces   ",
    "Ünïcödé, naïve café, Straße — and “curly quotes”.",
    "数据在静态时使用 AES-256 加密。",
    "SHA-256 / TLS1.3 / ISO-27001:2022 / CVE-2024-3094 / 0x7f3a",
    "🔒 Encryption at rest: enabled ✅",
    "encrypt " * 300,
    "Can you elaborate on that?",
)

_POLICY_SENTENCES = (
    "All customer data stored in the production environment is encrypted at rest using "
    "AES-256, with keys held in a hardware security module and rotated every 12 months.",
    "Administrative access to the customer database cluster requires multi-factor "
    "authentication through the identity provider, and shared accounts are prohibited.",
    "Backups of the billing platform are taken daily, encrypted with a key separate from the "
    "production key, and a full restoration is rehearsed semi-annually.",
    "The Security Engineering team reviews access rights to the data warehouse quarterly; "
    "access no longer needed is revoked within 14 days of the review.",
    "Incident response follows the Operations Security Procedure: triage within one hour, "
    "containment within 24 hours, and customer notification within 72 hours of confirmation.",
    "Vulnerabilities rated critical are remediated within 7 days and high ones within 30 days, "
    "as tracked in the vulnerability scanner and reported to the Risk Committee monthly.",
    "Audit logs from every production host are forwarded to the central SIEM, retained for "
    "13 months, and protected against modification by write-once storage.",
    "The Data Protection Officer approves every new processing activity, and a data "
    "protection impact assessment is completed before any high-risk processing starts.",
    "Third-party integrations are assessed before onboarding against ISO/IEC 27001 Annex A, "
    "and their access tokens are scoped to the minimum set of permissions required.",
    "Corporate laptops run full-disk encryption, an endpoint detection agent and automatic "
    "screen locking after five minutes, enforced by the endpoint management console.",
    "Change requests to the CI/CD pipeline require peer review and an approved ticket in the "
    "ticketing workflow before deployment, with emergency changes reviewed within 48 hours.",
    "Customer data is deleted from primary storage within 30 days and from backups within "
    "90 days of contract termination, and a certificate of deletion is issued on request.",
    "The Business Continuity Plan sets a recovery time objective of four hours and a recovery "
    "point objective of one hour for the production environment, tested annually.",
    "Employees complete security awareness training at hiring and annually thereafter, with "
    "phishing simulations run quarterly and results reported to the Compliance Manager.",
    "Network traffic between services is encrypted with TLS 1.2 or higher; legacy protocols "
    "such as SSLv3 and TLS 1.0 are disabled at the load balancers.",
    "Physical access to the data centres is controlled by badge and biometric readers, and "
    "visitor logs are retained for 24 months.",
)


def _long_texts() -> tuple[str, ...]:
    """Policy paragraphs as the ingest chunks them (600 to 950 characters), and four that
    run past the model's sequence length, so truncation is checked too."""
    texts = []
    sentences = _POLICY_SENTENCES
    for i in range(28):
        target = 600 + (i * 53) % 350
        parts, k = [], i
        while sum(len(p) + 1 for p in parts) < target:
            parts.append(sentences[k % len(sentences)])
            k += 3
        texts.append(" ".join(parts))
    for i in range(4):
        texts.append(" ".join(sentences[(i + k) % len(sentences)] for k in range(14)))
    return tuple(texts)


CHECK_TEXTS: tuple[str, ...] = _SHORT_TEXTS + _long_texts()
# Speed is compared on the long texts: the ingest's chunks, where the encode time goes.
_TIMED_TEXTS = tuple(t for t in CHECK_TEXTS if len(t) >= 600)[:12]


class OnnxRefused(Exception):
    """The ONNX path cannot serve this model; the message says why, as a clause."""


# The model folder ------------------------------------------------------------------------------

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


# Running the exported graph ------------------------------------------------------------------

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


def open_session(path: Path) -> Any:
    """An ONNX Runtime session on the CPUs this process may use, every graph optimisation on."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = usable_cpus()
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


# Export and check ---------------------------------------------------------------------------

@dataclass(frozen=True)
class CheckRecord:
    """The check of one export, as check.json keeps it."""

    data: dict[str, Any]

    @property
    def min_cosine(self) -> float:
        return float(self.data["min_cosine"])

    @property
    def texts(self) -> int:
        return int(self.data["texts"])

    @property
    def passed(self) -> bool:
        """Judged against today's threshold, not the one in force when it was recorded."""
        return self.min_cosine >= CHECK_MIN_COSINE

    @property
    def optimized(self) -> bool:
        return bool(self.data.get("optimized"))

    def summary(self) -> str:
        """`min cosine 0.9999999 on 64 texts`, the figure people read."""
        return f"min cosine {self.min_cosine:.7f} on {self.texts} texts"

    def refusal(self) -> str:
        return (f"its ONNX export's vectors differ from torch's ({self.summary()}, below "
                f"{CHECK_MIN_COSINE})")


def read_record(folder: Path) -> CheckRecord | None:
    """The check recorded in the folder, or None when there is none or it cannot be read."""
    try:
        data = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
        if data.get("format") != EXPORT_FORMAT:
            return None
        float(data["min_cosine"]), int(data["texts"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return CheckRecord(data)


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


def _one_line(exc: BaseException) -> str:
    return (" ".join(str(exc).split()) or type(exc).__name__)[:200].rstrip(".")


# The embedder -------------------------------------------------------------------------------

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


class OnnxEmbedder(Embedder):
    """The same model on ONNX Runtime, once its export has passed the check.

    Built on the torch embedder of the same model, which makes the reference vectors of the
    check and runs the model whenever the ONNX path is refused: then, unless `required`, the
    embedder falls back to torch and logs why, once; with `required` it raises
    ModelUnavailableError. `runtime` says which one runs ("onnx" or "torch")."""

    def __init__(self, torch_embedder: SentenceTransformerEmbedder, *, cache_dir: Path,
                 required: bool = False, batch_size: int | None = None) -> None:
        self.name = torch_embedder.name
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
        return OnnxEncoder(open_session(export.model_path),
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


# Reporting without loading ------------------------------------------------------------------

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
