"""The ONNX Runtime path of the embedding model: exported here from the installed weights,
checked against torch, cached, refused visibly when the check fails, and interchangeable
with torch on a store either one indexed."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import core.encoders.onnx.check as onnx_check
import core.encoders.onnx.embedder as onnx_embedder
import core.encoders.onnx.export as onnx_export
from core.cli import main
from core.config import Settings
from core.encoders.embedding import SentenceTransformerEmbedder, resolve_model_location
from core.encoders.factory import configured_embedder
from core.encoders.onnx.cache import find_export
from core.encoders.onnx.check import CHECK_TEXTS, MODEL_FILE, RECORD_FILE, read_record
from core.encoders.onnx.embedder import OnnxEmbedder
from core.encoders.onnx.layout import OnnxRefused, read_layout
from core.encoders.onnx.runtime import load_tokenizer
from core.errors import ModelUnavailableError
from core.store import chunks_collection_name
from core.workbench import Workbench
from tests.conftest import REPO, SAMPLE_DATA
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support.onnx_export import shared_onnx_cache

MODEL = "all-MiniLM-L6-v2"
ACME = SAMPLE_DATA / "vendors" / "acme"
CRITERIA = [line for line in (SAMPLE_DATA / "criteria.txt").read_text().splitlines() if line]
# No export can reach it: a check that fails, whatever the vectors.
UNREACHABLE = 2.0


def bundled_folder() -> Path:
    return Path(resolve_model_location(MODEL))


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory, real_embedder) -> Path:
    return shared_onnx_cache(tmp_path_factory, real_embedder)


@pytest.fixture
def own_cache(tmp_path, onnx_cache) -> Path:
    """A copy of the session's export this test may damage."""
    cache = tmp_path / "onnx"
    shutil.copytree(onnx_cache, cache)
    return cache


@pytest.fixture
def exports(monkeypatch, onnx_cache) -> list[Path]:
    """Every export asked for, recorded; each one puts the session's checked export in place
    instead of exporting again."""
    asked: list[Path] = []

    def export(layout, folder, torch_embedder, **kwargs):
        asked.append(folder)
        shutil.copytree(onnx_cache / folder.name, folder)
        return read_record(folder)

    monkeypatch.setattr(onnx_embedder, "export_and_check", export)
    return asked


def export_folder(cache: Path) -> Path:
    [folder] = [p for p in cache.iterdir() if not p.name.startswith(".")]
    return folder


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


# The model folder --------------------------------------------------------------------------------

def test_the_bundled_model_is_mean_pooled_and_normalised():
    layout = read_layout(bundled_folder())
    assert (layout.max_seq_length, layout.dimension, layout.do_lower_case) == (256, 384, False)
    assert layout.input_names == ("input_ids", "attention_mask", "token_type_ids")


def copy_of_the_configuration(tmp_path: Path) -> Path:
    """The bundled model's folder, its weights linked rather than copied."""
    folder = tmp_path / "model"
    shutil.copytree(bundled_folder(), folder, ignore=shutil.ignore_patterns("*.safetensors"))
    (folder / "model.safetensors").symlink_to(bundled_folder() / "model.safetensors")
    return folder


def test_a_model_the_onnx_path_cannot_reproduce_is_refused_with_the_reason(tmp_path):
    folder = copy_of_the_configuration(tmp_path)
    pooling = folder / "1_Pooling" / "config.json"
    pooling.write_text(json.dumps({**json.loads(pooling.read_text()),
                                   "pooling_mode_mean_tokens": False,
                                   "pooling_mode_cls_token": True}))
    with pytest.raises(OnnxRefused, match="^its pooling is not mean pooling$"):
        read_layout(folder)

    modules = folder / "modules.json"
    modules.write_text(json.dumps(json.loads(modules.read_text())[:2]))
    with pytest.raises(OnnxRefused, match="^its modules are Transformer \\+ Pooling, not "):
        read_layout(folder)


def test_the_cache_folder_changes_with_the_model_files(tmp_path):
    folder = copy_of_the_configuration(tmp_path)
    before = find_export(str(folder), tmp_path / "cache").folder
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": 128, "do_lower_case": False}))
    after = find_export(str(folder), tmp_path / "cache")
    assert after.folder != before
    assert after.folder.name.startswith("model-") and after.layout.max_seq_length == 128
    assert after.record is None


# The factory -------------------------------------------------------------------------------------

def test_the_factory_gives_each_setting_its_runtime(tmp_path):
    base = Settings(store=tmp_path / "store", onnx_cache_dir=tmp_path / "onnx")
    auto = configured_embedder(base)
    assert isinstance(auto, OnnxEmbedder) and auto.required is False
    assert auto.cache_dir == tmp_path / "onnx"
    onnx = configured_embedder(base.model_copy(update={"embedding_runtime": "onnx"}))
    assert isinstance(onnx, OnnxEmbedder) and onnx.required is True
    torch = configured_embedder(base.model_copy(update={"embedding_runtime": "torch"}))
    assert type(torch) is SentenceTransformerEmbedder
    # nothing is loaded, exported or cached until the first embedding
    assert not (tmp_path / "onnx").exists()


def test_an_embedder_of_another_kind_is_used_as_it_is(tmp_path):
    settings = Settings(store=tmp_path / "store")
    fake = configured_embedder(settings, torch_embedder=lambda *a, **k: FakeEmbedder())
    assert isinstance(fake, FakeEmbedder)
    with pytest.raises(ModelUnavailableError, match="EVIDENCE_EMBEDDING_RUNTIME=onnx, but the "
                                                    "embedder 'fake-bag-of-words' is not"):
        configured_embedder(settings.model_copy(update={"embedding_runtime": "onnx"}),
                            torch_embedder=lambda *a, **k: FakeEmbedder())


def test_the_runtime_setting_is_checked(monkeypatch, capsys):
    monkeypatch.setenv("EVIDENCE_EMBEDDING_RUNTIME", "gpu")
    assert main(["status"]) == 2
    [error] = capsys.readouterr().err.splitlines()
    assert error.startswith("evidence: error: The setting EVIDENCE_EMBEDDING_RUNTIME='gpu' is "
                            "invalid: input should be 'auto', 'onnx' or 'torch'")


# The export and its check ------------------------------------------------------------------------

@pytest.mark.model
def test_the_export_passes_the_check_and_records_it(onnx_cache, real_embedder):
    folder = export_folder(onnx_cache)
    assert folder.name.startswith(f"{MODEL}-")
    assert sorted(p.name for p in folder.iterdir()) == [RECORD_FILE, MODEL_FILE]
    record = json.loads((folder / RECORD_FILE).read_text())
    assert record["passed"] is True and record["threshold"] == 0.9999
    assert record["min_cosine"] >= 0.9999 and record["texts"] == len(CHECK_TEXTS) == 64
    assert record["source"] == str(bundled_folder())
    assert set(record["versions"]) == {"torch", "transformers", "sentence-transformers",
                                       "tokenizers", "onnx", "onnxruntime"}
    assert record["model_bytes"] == (folder / MODEL_FILE).stat().st_size
    assert len(record["model_sha256"]) == 64
    assert set(record["texts_per_s"]) <= {"plain", "optimized"} and record["texts_per_s"]
    assert not [p for p in onnx_cache.iterdir() if p.name.startswith(".")]  # no leftovers

    embedder = OnnxEmbedder(real_embedder, cache_dir=onnx_cache)
    assert embedder.runtime == "onnx" and embedder.notes == []
    texts = ["Does the vendor encrypt data at rest using AES-256?", "Yes.",
             "Backups are encrypted with AES-256 and restored quarterly. " * 40]
    assert cosines(embedder.embed(texts), real_embedder.embed(texts)).min() >= 0.9999
    assert embedder.embed([]).shape == (0, 384)
    assert embedder.dimension == 384


@pytest.mark.model
def test_the_tokens_are_the_models_own(real_embedder, onnx_cache):
    """Same ids as sentence-transformers gives the model, truncation included; the same
    counts for the context's token figures."""
    layout = read_layout(bundled_folder())
    ours = [e.ids for e in load_tokenizer(layout, truncate=True).encode_batch(list(CHECK_TEXTS))]
    features = real_embedder.model[0].preprocess(list(CHECK_TEXTS))
    theirs = [[int(i) for i, m in zip(ids, mask, strict=True) if m]
              for ids, mask in zip(features["input_ids"].tolist(),
                                   features["attention_mask"].tolist(), strict=True)]
    assert ours == theirs
    assert max(len(ids) for ids in ours) == 256
    embedder = OnnxEmbedder(real_embedder, cache_dir=onnx_cache)
    for text in ("Yes.", "encrypt " * 300, CHECK_TEXTS[-1]):
        assert embedder.count_tokens(text) == real_embedder.count_tokens(text)


@pytest.mark.model
def test_a_second_start_reuses_the_export_without_importing_torch(onnx_cache, real_embedder):
    folder = export_folder(onnx_cache)
    recorded = (folder / RECORD_FILE).stat().st_mtime_ns
    script = (
        "import json, sys\n"
        "from core.config import Settings\n"
        "from core.encoders.factory import configured_embedder\n"
        "embedder = configured_embedder(Settings(onnx_cache_dir=sys.argv[1]))\n"
        "vector = embedder.embed([sys.argv[2]])[0]\n"
        "print(json.dumps({'runtime': embedder.runtime, 'torch': 'torch' in sys.modules,\n"
        "                  'vector': vector.tolist()}))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVIDENCE_")}
    text = "Does the vendor review user access rights at least quarterly?"
    result = subprocess.run([sys.executable, "-c", script, str(onnx_cache), text], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert (shown["runtime"], shown["torch"]) == ("onnx", False)
    assert cosines(np.array([shown["vector"]]), real_embedder.embed([text]))[0] >= 0.9999
    assert result.stderr == ""
    # the same export, checked once: no second folder, the record untouched
    assert export_folder(onnx_cache) == folder
    assert (folder / RECORD_FILE).stat().st_mtime_ns == recorded


@pytest.mark.model
def test_an_export_that_another_process_finished_first_gives_way(tmp_path, onnx_cache,
                                                                 real_embedder, monkeypatch):
    """Two processes exporting at once: the folder appears whole, once; the second keeps
    the first one's and leaves nothing behind."""
    cached = export_folder(onnx_cache)
    export = find_export(MODEL, tmp_path / "onnx")

    def export_graph(layout, path):
        shutil.copy(cached / MODEL_FILE, path)
        shutil.copytree(cached, export.folder)  # meanwhile, the other process is done

    def optimize_graph(*args):
        raise RuntimeError("not this time")

    monkeypatch.setattr(onnx_export, "_export_graph", export_graph)
    monkeypatch.setattr(onnx_export, "_optimize_graph", optimize_graph)
    record = onnx_export.export_and_check(export.layout, export.folder, real_embedder,
                                          model_name=MODEL, key=export.key,
                                          versions=export.versions)
    assert record.data == read_record(cached).data
    assert [p.name for p in (tmp_path / "onnx").iterdir()] == [cached.name]
    assert sorted(p.name for p in export.folder.iterdir()) == [RECORD_FILE, MODEL_FILE]


@pytest.mark.model
def test_a_valid_cache_is_never_exported_again(onnx_cache, real_embedder, exports):
    embedder = OnnxEmbedder(real_embedder, cache_dir=onnx_cache)
    assert embedder.runtime == "onnx"
    assert exports == []


# Refused, damaged, visible -----------------------------------------------------------------------

@pytest.mark.model
def test_a_failing_check_falls_back_to_torch_with_the_figure(onnx_cache, real_embedder,
                                                              monkeypatch, exports, caplog):
    monkeypatch.setattr(onnx_check, "CHECK_MIN_COSINE", UNREACHABLE)
    record = read_record(export_folder(onnx_cache))
    embedder = OnnxEmbedder(real_embedder, cache_dir=onnx_cache)

    with caplog.at_level(logging.WARNING, logger="core.encoders"):
        vectors = embedder.embed(["Yes.", "No."])
        embedder.embed(["Quarterly."])

    assert embedder.runtime == "torch"
    assert np.array_equal(vectors, real_embedder.embed(["Yes.", "No."]))
    expected = (f"the embedding model '{MODEL}' runs on torch, not ONNX Runtime: its ONNX "
                f"export's vectors differ from torch's (min cosine {record.min_cosine:.7f} on "
                f"64 texts, below {UNREACHABLE})")
    assert embedder.notes == [expected]
    assert [r.getMessage() for r in caplog.records] == [expected]  # said once
    assert exports == []  # the recorded check decided; torch was not asked again


@pytest.mark.model
def test_onnx_required_with_a_failing_check_is_one_sentence(onnx_cache, real_embedder,
                                                             monkeypatch):
    monkeypatch.setattr(onnx_check, "CHECK_MIN_COSINE", UNREACHABLE)
    embedder = OnnxEmbedder(real_embedder, cache_dir=onnx_cache, required=True)
    with pytest.raises(ModelUnavailableError) as raised:
        embedder.embed(["Yes."])
    message = str(raised.value)
    assert message.startswith(f"EVIDENCE_EMBEDDING_RUNTIME=onnx, but the embedding model "
                              f"'{MODEL}' cannot run on ONNX Runtime: its ONNX export's vectors "
                              "differ from torch's (min cosine 0.99999")
    assert message.endswith("; set EVIDENCE_EMBEDDING_RUNTIME=auto or torch to embed with "
                            "torch.")
    assert "\n" not in message


def damage(folder: Path, how: str) -> None:
    model = folder / MODEL_FILE
    if how == "truncated":
        with model.open("r+b") as handle:
            handle.truncate(model.stat().st_size // 2)
    elif how == "overwritten":  # same size: the weights in the middle of the file
        with model.open("r+b") as handle:
            handle.seek(model.stat().st_size // 2)
            handle.write(np.random.default_rng(7).bytes(2_000_000))
    elif how == "record":
        (folder / RECORD_FILE).write_text('{"format": 1, "min_cos')


@pytest.mark.model
@pytest.mark.parametrize("how", ["truncated", "overwritten", "record"])
def test_a_damaged_export_is_found_and_made_again(own_cache, real_embedder, exports, how,
                                                  caplog):
    folder = export_folder(own_cache)
    damage(folder, how)
    embedder = OnnxEmbedder(real_embedder, cache_dir=own_cache)
    with caplog.at_level(logging.WARNING, logger="core.encoders"):
        vectors = embedder.embed(CHECK_TEXTS[:4])
    assert exports == [folder]
    assert embedder.runtime == "onnx"
    assert cosines(vectors, real_embedder.embed(CHECK_TEXTS[:4])).min() >= 0.9999
    [note] = embedder.notes
    assert note.startswith(f"the cached ONNX {'export' if how == 'record' else 'model'} in "
                           f"{folder} ")
    assert note.endswith("; it is exported and checked again")
    assert [r.getMessage() for r in caplog.records] == [note]
    assert export_folder(own_cache) == folder
    assert not [p for p in own_cache.iterdir() if p.name.startswith(".")]


@pytest.mark.model
def test_a_damaged_export_that_cannot_be_made_again_leaves_torch(own_cache, real_embedder,
                                                                 monkeypatch):
    def export(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(onnx_embedder, "export_and_check", export)
    damage(export_folder(own_cache), "truncated")
    embedder = OnnxEmbedder(real_embedder, cache_dir=own_cache)
    assert np.array_equal(embedder.embed(["Yes."]), real_embedder.embed(["Yes."]))
    assert embedder.runtime == "torch"
    damaged, fallback = embedder.notes
    assert "was damaged" in damaged
    assert fallback == (f"the embedding model '{MODEL}' runs on torch, not ONNX Runtime: its "
                        "ONNX export failed ([Errno 28] No space left on device)")


@pytest.mark.model
def test_a_model_that_cannot_be_exported_runs_on_torch_with_the_reason(tmp_path, caplog):
    folder = copy_of_the_configuration(tmp_path)
    pooling = folder / "1_Pooling" / "config.json"
    pooling.write_text(json.dumps({**json.loads(pooling.read_text()),
                                   "pooling_mode_mean_tokens": False,
                                   "pooling_mode_cls_token": True}))
    settings = Settings(store=tmp_path / "store", embedding_model=str(folder),
                        onnx_cache_dir=tmp_path / "onnx")
    embedder = configured_embedder(settings)
    with caplog.at_level(logging.WARNING, logger="core.encoders"):
        embedder.embed(["Yes."])
    assert embedder.runtime == "torch"
    assert embedder.notes == [f"the embedding model '{folder}' runs on torch, not ONNX Runtime: "
                              "its pooling is not mean pooling"]
    assert not (tmp_path / "onnx").exists()


# The command line --------------------------------------------------------------------------------

@pytest.fixture
def cli_env(monkeypatch, tmp_path, onnx_cache) -> Path:
    store = tmp_path / "store"
    monkeypatch.setenv("EVIDENCE_STORE", str(store))
    monkeypatch.setenv("EVIDENCE_LEXICAL_DIR", str(tmp_path / "lexical"))
    monkeypatch.setenv("EVIDENCE_ONNX_CACHE_DIR", str(onnx_cache))
    return store


def stored_runtime(store: Path, vendor: str) -> dict:
    metadata = Workbench(Settings(store=store)).store.client.get_collection(
        chunks_collection_name(vendor), embedding_function=None).metadata
    return {k: metadata.get(k) for k in ("embedding_model", "embedding_runtime")}


@pytest.mark.model
def test_the_command_says_once_when_torch_stands_in(cli_env, monkeypatch, capsys):
    monkeypatch.setattr(onnx_check, "CHECK_MIN_COSINE", UNREACHABLE)
    rounds = [str(ACME / "questionnaires" / f"round_{n}.json") for n in (1, 2)]
    assert main(["ingest", "questionnaire", *rounds]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2
    [note] = captured.err.splitlines()
    assert note.startswith(f"evidence: note: the embedding model '{MODEL}' runs on torch, not "
                           "ONNX Runtime: its ONNX export's vectors differ from torch's (min "
                           "cosine 0.99999")
    assert note.endswith(f"below {UNREACHABLE}).")
    assert stored_runtime(cli_env, "acme") == {"embedding_model": MODEL,
                                               "embedding_runtime": "torch"}


@pytest.mark.model
def test_the_command_with_onnx_required_and_a_failing_check_exits_1(cli_env, monkeypatch,
                                                                   capsys):
    monkeypatch.setattr(onnx_check, "CHECK_MIN_COSINE", UNREACHABLE)
    monkeypatch.setenv("EVIDENCE_EMBEDDING_RUNTIME", "onnx")
    code = main(["ingest", "questionnaire", str(ACME / "questionnaires" / "round_1.json")])
    captured = capsys.readouterr()
    assert code == 1 and captured.out == ""
    [error] = captured.err.splitlines()
    assert error.startswith("evidence: error: EVIDENCE_EMBEDDING_RUNTIME=onnx, but the "
                            f"embedding model '{MODEL}' cannot run on ONNX Runtime: ")
    assert main(["status"]) == 0
    assert capsys.readouterr().out == ""  # nothing was written


@pytest.mark.model
def test_the_command_embeds_with_onnx_and_the_store_records_it(cli_env, capsys):
    assert main(["ingest", "questionnaire", str(ACME / "questionnaires" / "round_1.json")]) == 0
    assert capsys.readouterr().err == ""
    assert stored_runtime(cli_env, "acme") == {"embedding_model": MODEL,
                                               "embedding_runtime": "onnx"}


# Either runtime reads what the other indexed -----------------------------------------------------

@pytest.mark.model
@pytest.mark.parametrize("indexer, reader", [("torch", "onnx"), ("onnx", "torch")])
def test_either_runtime_queries_what_the_other_indexed(tmp_path, onnx_cache, real_embedder,
                                                       indexer, reader):
    embedders = {"torch": real_embedder,
                 "onnx": OnnxEmbedder(real_embedder, cache_dir=onnx_cache, required=True)}
    settings = Settings(store=tmp_path / "store", lexical_dir=tmp_path / "lexical")

    def workbench(runtime: str) -> Workbench:
        return Workbench(settings, embedder=embedders[runtime], reranker=FakeReranker())

    documents = sorted((ACME / "documents").glob("*.md"))
    workbench(indexer).ingest_documents("acme", documents[:-1])
    assert stored_runtime(settings.store, "acme") == {"embedding_model": MODEL,
                                                      "embedding_runtime": indexer}

    for criterion in CRITERIA[:6]:
        same = workbench(indexer).retrieve("acme", criterion, "semantic").first_stage[:5]
        other = workbench(reader).retrieve("acme", criterion, "semantic").first_stage[:5]
        assert [c.id for c in other] == [c.id for c in same], criterion
        assert np.allclose([c.first_stage_score for c in other],
                           [c.first_stage_score for c in same], atol=1e-4)

    # the other runtime may write to the vendor too, and is then the one recorded
    workbench(reader).ingest_documents("acme", documents[-1:])
    assert stored_runtime(settings.store, "acme") == {"embedding_model": MODEL,
                                                      "embedding_runtime": reader}
