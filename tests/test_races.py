"""Writers that race: two processes ingesting at the same moment (the same document in two
versions, the same round, or two vendors), into one embedded store and into one ChromaDB
server. Afterwards the store must equal one of the two serial orders, read record by record:
nothing lost, nothing doubled, no leftover of either version.

Each process is a real `python` child that waits at a start line (a file both poll for), and
embeds slowly in small write steps, so their writes overlap unless something makes them take
turns. The writers meet by construction: the first to hold the store's write lock keeps it
(through the store's `on_lock_held` seam) until the other is seen waiting for it, or has
finished, so no trial depends on how fast a process starts. Each child still reports whether
it had to wait for the other's write lock, and a trial counts only if one of them did. The
control without the lock interleaves by construction too: its first writer deletes the other
versions' chunks only once the second has committed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from core.config import Settings
from core.workbench import Workbench
from tests.chroma_server import ChromaServer
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support import warm
from tests.support.payloads import numbered, round_payload
from tests.support.store import get_all, read_links, read_manifest, with_texts

REPO = Path(__file__).resolve().parents[1]

CHILD = r'''
import json, sys, time
from pathlib import Path
import core.ingest.writer
from core.config import Settings
from core.workbench import Workbench
from tests.fakes import FakeEmbedder, FakeReranker

spec = json.loads(sys.argv[1])
if spec.get("unlocked"):  # the control: the same race with no write lock
    import contextlib
    from core.store import EvidenceStore
    EvidenceStore.write_lock = lambda self, on_wait=None: contextlib.nullcontext()
core.ingest.writer.WRITE_STEP = 3  # many small steps, so two writers' steps could interleave
real_commit_links = core.ingest.writer.commit_links


def slow_commit_links(*args, **kwargs):  # a round's writes take long enough to be met
    time.sleep(0.3)
    return real_commit_links(*args, **kwargs)


core.ingest.writer.commit_links = slow_commit_links

if spec.get("unlocked"):
    # The control's writers interleave by construction: the first commits its version, then
    # deletes the other versions' chunks only once the second has committed its own.
    real_commit, real_delete = core.ingest.writer.commit_document, core.ingest.writer.delete_stale

    def commit_document(*args, **kwargs):
        real_commit(*args, **kwargs)
        Path(spec["committed"]).touch()

    def delete_stale(*args, **kwargs):
        other_committed = Path(spec["other_committed"])
        for _ in range(24000 if spec["first"] else 0):  # 120 s at most
            if other_committed.exists():
                break
            time.sleep(0.005)
        return real_delete(*args, **kwargs)

    core.ingest.writer.commit_document = commit_document
    core.ingest.writer.delete_stale = delete_stale


class SlowEmbedder(FakeEmbedder):
    def embed(self, texts):
        time.sleep(0.02)
        return super().embed(texts)


settings = Settings(**spec["settings"])
workbench = Workbench(settings, embedder=SlowEmbedder(), reranker=FakeReranker())
waited = []


def progress(stage, done, total):
    if stage.startswith("waiting"):
        waited.append(stage)
        Path(spec["waiting"]).touch()


def hold_until_the_other_waits():
    """The first writer to hold the lock keeps it until the other is seen waiting for it (or
    has already written, when this one is the second)."""
    other_waiting, other_done = Path(spec["other_waiting"]), Path(spec["other_done"])
    for _ in range(24000):  # 120 s at most
        if other_waiting.exists() or other_done.exists():
            return
        time.sleep(0.005)


workbench.store.on_lock_held = hold_until_the_other_waits


start = Path(spec["start"])
Path(spec["ready"]).touch()
for _ in range(20000):  # the start line: both children are loaded before either writes
    if start.exists() and Path(spec["other_ready"]).exists():
        break
    time.sleep(0.005)
if spec["kind"] == "docs":
    workbench.ingest_documents(spec["vendor"], [spec["path"]], progress=progress)
else:
    [payload] = workbench.load_questionnaires([spec["path"]])
    workbench.ingest_questionnaire(payload, progress=progress)
Path(spec["done"]).touch()
print(json.dumps({"waited": bool(waited)}))
'''


def document(salt: str, sections: int) -> str:
    return "\n\n".join(
        f"Section {p}. Encryption keys rotate. " + " ".join(f"{salt}{p}w{j}" for j in range(70))
        for p in range(sections)) + "\n"


def payload(vendor: str, round_number: int, answers: str, count: int) -> dict[str, Any]:
    return round_payload(round_number, numbered(
        count, "Question {i} about keys?", "{answers} (answer {i}).",
        criterion={0: "Are encryption keys rotated?"}, answers=answers),
        vendor=vendor, timestamp="2024-02-15T10:30:00Z")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("race-inputs")
    for name, text in {"v0/policy.md": document("base", 20), "v1/policy.md": document("old", 24),
                       "v2/policy.md": document("new", 30),
                       "other/access.md": document("acc", 24)}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    for name, body in {"round_a.json": payload("acme", 2, "Keys rotate yearly", 12),
                       "round_b.json": payload("acme", 2, "Keys rotate monthly", 15),
                       "globex_round.json": payload("globex", 1, "Keys rotate weekly", 10),
                       }.items():
        (root / name).write_text(json.dumps(body), encoding="utf-8")
    (root / "child.py").write_text(CHILD, encoding="utf-8")
    return root


# What a store holds, record by record ------------------------------------------------------

def observe(settings: Settings, vendors: tuple[str, ...]) -> dict[str, Any]:
    """Per vendor: the manifest's documents and versions, every chunk and response record,
    and the link records, with nothing that differs between two runs of the same writes."""
    workbench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    view: dict[str, Any] = {}
    for vendor_id in vendors:
        if vendor_id not in workbench.vendor_ids():
            view[vendor_id] = None
            continue
        vendor = workbench.store.open_vendor(vendor_id)
        manifest = {key: (meta["version"], int(meta["chunks"]))
                    for key, meta in read_manifest(vendor).items()}
        records = with_texts(get_all(vendor.chunks, include=("documents", "metadatas")))
        rows = sorted((i, text, str(m.get("doc_sha", "")), str(m.get("round_number", "")))
                      for i, text, m in zip(records["ids"], records["documents"],
                                            records["metadatas"], strict=True))
        links = sorted(read_links(vendor))
        view[vendor_id] = {"manifest": manifest, "records": rows, "links": links,
                           "status": workbench.status(vendor_id)[0].model_dump()}
    return view


def ingest(workbench: Workbench, inputs: Path, step: dict[str, str]) -> None:
    if step["kind"] == "docs":
        workbench.ingest_documents(step["vendor"], [inputs / step["path"]])
    else:
        [body] = workbench.load_questionnaires([inputs / step["path"]])
        workbench.ingest_questionnaire(body)


SCENARIOS = {
    "one document, two versions": (
        {"kind": "docs", "vendor": "acme", "path": "v1"},
        {"kind": "docs", "vendor": "acme", "path": "v2"}),
    "one round, two payloads": (
        {"kind": "round", "vendor": "acme", "path": "round_a.json"},
        {"kind": "round", "vendor": "acme", "path": "round_b.json"}),
    "one round, the same payload": (
        {"kind": "round", "vendor": "acme", "path": "round_a.json"},
        {"kind": "round", "vendor": "acme", "path": "round_a.json"}),
    "two vendors": (
        {"kind": "docs", "vendor": "acme", "path": "other"},
        {"kind": "round", "vendor": "globex", "path": "globex_round.json"}),
}
VENDORS = ("acme", "globex")


def prepare(workbench: Workbench, inputs: Path) -> None:
    """What the store holds before the race: acme's policy as it was, and a first round."""
    workbench.ingest_documents("acme", [inputs / "v0"])
    [body] = workbench.load_questionnaires([inputs / "round_a.json"])
    workbench.ingest_questionnaire(body.model_copy(update={"round_number": 1}))


@pytest.fixture(scope="module")
def serial_orders(tmp_path_factory, inputs) -> dict[str, list[dict[str, Any]]]:
    """Each scenario's two serial orders, on embedded stores of their own."""
    orders: dict[str, list[dict[str, Any]]] = {}
    for name, (first, second) in SCENARIOS.items():
        orders[name] = []
        for steps in ((first, second), (second, first)):
            store = tmp_path_factory.mktemp("serial") / "store"
            settings = Settings(store=store)
            workbench = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
            prepare(workbench, inputs)
            for step in steps:
                ingest(workbench, inputs, step)
            orders[name].append(observe(settings, VENDORS))
    return orders


def race(inputs: Path, settings: dict[str, Any], start: Path,
         steps: tuple[dict[str, str], ...], *, unlocked: bool = False) -> list[dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVIDENCE_")}
    env["PYTHONPATH"] = str(REPO)
    def marker(kind: str, child: int) -> str:
        return str(start.parent / f"{start.name}-{kind}-{child}")

    children = [warm.start_script(
        inputs / "child.py", json.dumps({
            **step, "path": str(inputs / step["path"]), "settings": settings,
            "unlocked": unlocked, "start": str(start),
            "waiting": marker("waiting", i), "done": marker("done", i),
            "other_waiting": marker("waiting", 1 - i), "other_done": marker("done", 1 - i),
            "ready": marker("ready", i), "other_ready": marker("ready", 1 - i),
            "committed": marker("committed", i), "other_committed": marker("committed", 1 - i),
            "first": i == 0}),
        cwd=REPO, env=env)
        for i, step in enumerate(steps)]
    start.touch()
    results = []
    for child in children:
        done = child.wait()
        assert done.returncode == 0, done.stderr
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


def settle(inputs: Path, settings: Settings, start: Path, steps: tuple[dict[str, str], ...],
           serial: list[dict[str, Any]]) -> None:
    reports = race(inputs, settings.model_dump(mode="json", exclude_none=True), start, steps)
    assert any(r["waited"] for r in reports), (
        "the two writers did not meet; the trial proves nothing")
    now = observe(settings, VENDORS)
    assert now in serial, "the store after the race is neither serial order"


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_two_processes_writing_one_embedded_store_leave_a_serial_order(
        name, tmp_path, inputs, serial_orders):
    for trial in range(2):
        store = tmp_path / f"store-{trial}"
        settings = Settings(store=store)
        prepare(Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker()), inputs)
        settle(inputs, settings, tmp_path / f"start-{trial}", SCENARIOS[name],
               serial_orders[name])


@pytest.mark.server
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_two_processes_writing_one_server_leave_a_serial_order(
        name, tmp_path, inputs, serial_orders):
    server = ChromaServer(tmp_path / "server-data")
    try:
        settings = Settings(store=tmp_path / "unused", chroma_host="127.0.0.1",
                            chroma_port=server.port)
        prepare(Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker()), inputs)
        settle(inputs, settings, tmp_path / "start", SCENARIOS[name], serial_orders[name])
    finally:
        server.stop()


def test_without_the_lock_the_same_race_leaves_neither_order(tmp_path, inputs, serial_orders):
    """The control: the document race above, with the write lock taken away in both
    children, ends in a store no serial order gives (a version whose chunks the other
    writer deleted), so the trials above do race."""
    store = tmp_path / "store"
    settings = Settings(store=store)
    prepare(Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker()), inputs)
    race(inputs, settings.model_dump(mode="json", exclude_none=True), tmp_path / "start",
         SCENARIOS["one document, two versions"], unlocked=True)
    with pytest.raises(AssertionError, match="neither serial order"):
        now = observe(settings, VENDORS)
        assert now in serial_orders["one document, two versions"], "neither serial order"
