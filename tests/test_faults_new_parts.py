"""Faults in the writes beside the ingest, and `evidence check`.

A real subprocess is killed with SIGKILL inside a conversation turn's save (just before and
just after its one ChromaDB write), inside a lexical index update (at a row insert, before
the commit, between the commit and the settle, and inside a rebuild), and inside a verdict's
save; each time the store must show the turn, the index or the verdict whole or not at all,
and the next command must complete the work. `evidence check` must find and mend drift made
on purpose in the lexical index file, and report (and, where that is safe under the store's
write lock, finish) what an interrupted ingest left in the store. Last, two vendors' turns
and verdicts written at the same moment must never mix.

The stores come from tests/test_faults.py's template (acme: two documents, rounds 1 and 2)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest

from core.cli import main
from core.hashing import criterion_hash
from core.models import RerankerStatus
from core.retrieval.lexical import index_path
from core.review.verdicts import VerdictStore, prompt_sha256
from core.store import Where, verdicts_collection_name
from core.workbench import Workbench
from tests import test_faults
from tests.fakes import FakeEmbedder, FakeReranker
from tests.support import payloads, warm
from tests.support.cli import error_message, is_object, run_json
from tests.support.store import get_all
from tests.test_faults import (
    KEY_CRITERION,
    REPO,
    SCENARIOS,
    InjectedFault,
    WriteFaults,
    assert_complete,
    child_env,
    injected,
    observe,
    run_ingest,
    settings_at,
    workbench_at,
)

pytest_plugins = ["tests.llm_stub"]

# The fault suite's fixtures, shared: the inputs, the template store and the complete states.
inputs = test_faults.inputs
template = test_faults.template
references = test_faults.references

VENDOR = "acme"
# The reranker every process of these tests uses, in process and in the killed children
# alike, so that a prompt is the same wherever it is made.
RERANKER_STATUS = RerankerStatus(name=FakeReranker.name, ran=True,
                                 reason="reranker supplied by the caller")
QUESTION_1 = "How are encryption keys rotated?"
QUESTION_2 = "How often does that happen?"
VERDICT = {"verdict": "MET",
           "reasoning": "Round 2 says the keys rotate every six months, which the policy "
                        "describes too.",
           "contradictions": [], "cited_rounds": [2]}
# Questions for hybrid retrieval: the criterion, an answer's words (follow-ups reach the
# lexical list), and words found only in one section of the new policy version.
HYBRID_QUERIES = (KEY_CRITERION, "Do the vendor's keys rotate? Keys rotate every 90 days",
                  "Which section says new5w3 new5w7 about encryption keys?")


# The child process ---------------------------------------------------------------------------

DRIVER = '''\
"""Runs one `evidence` command of tests/test_faults_new_parts.py in its own process with the
fake models, and (with "kill") kills itself with SIGKILL at the moment named."""
import json
import os
import signal
import sys

spec = json.loads(sys.argv[1])
os.environ.update(spec.get("env", {}))


def die(where):
    print(f"killed {where}", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


import core.workbench  # noqa: E402
from core.models import RerankerStatus  # noqa: E402
from tests.fakes import FakeEmbedder, FakeReranker  # noqa: E402

core.workbench.SentenceTransformerEmbedder = lambda *args, **kwargs: FakeEmbedder()
core.workbench.load_reranker = lambda settings: (
    FakeReranker(), RerankerStatus(**spec["reranker_status"]))

kill = spec.get("kill") or {}
if kill.get("at") == "conversation":
    from core.store.conversation_file import ConversationFile

    real_write = ConversationFile.write

    def write(self, ids, *args, **kwargs):
        if kill["when"] == "before":
            die(f"before the conversation write of {json.dumps(list(ids))}")
        real_write(self, ids, *args, **kwargs)
        die(f"after the conversation write of {json.dumps(list(ids))}")

    ConversationFile.write = write
elif kill.get("at") == "verdict":
    from core.store import writes

    real_apply = writes.apply

    def apply(collection, operation, **kwargs):
        if operation != "upsert" or not collection.name.endswith("__verdicts"):
            return real_apply(collection, operation, **kwargs)
        if kill["when"] == "before":
            die(f"before the verdict write of {json.dumps(kwargs['ids'])}")
        real_apply(collection, operation, **kwargs)
        die(f"after the verdict write of {json.dumps(kwargs['ids'])}")

    writes.apply = apply
elif kill.get("at") == "lexical":
    import core.retrieval.lexical.index as lexical

    if kill["point"] == "insert":
        real_insert = lexical._insert
        inserted = [0]

        def insert(db, chunk, version_key):
            inserted[0] += 1
            if inserted[0] == kill["number"]:
                die(f"at lexical row insert {inserted[0]}")
            return real_insert(db, chunk, version_key)

        lexical._insert = insert
    elif kill["point"] == "commit":
        real_apply = lexical.LexicalIndex._apply

        def apply(self, *args):
            report = real_apply(self, *args)
            die(f"before the lexical commit ({report.chunks_added} rows written)")

        lexical.LexicalIndex._apply = apply
    elif kill["point"] == "settle":
        def settle(self, *args):
            die("after the lexical commit, before the index settled")

        lexical.LexicalIndex._settle = settle

from core.cli import main  # noqa: E402

sys.exit(main(["--store", spec["store"], *spec["argv"]]))
'''


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("new-parts-driver") / "new_parts_driver.py"
    path.write_text(DRIVER, encoding="utf-8")
    return path


def run_child(driver: Path, store: Path, argv: list[str], *, kill: dict | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    spec = {"store": str(store), "argv": argv, "kill": kill, "env": env or {},
            "reranker_status": RERANKER_STATUS.model_dump()}
    return warm.run_script(driver, json.dumps(spec), cwd=REPO, env=child_env())


def assert_killed(child: subprocess.CompletedProcess, where: str) -> str:
    """The child died by SIGKILL where it was meant to, having printed nothing; its stderr."""
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert f"killed {where}" in child.stderr, child.stderr
    assert child.stdout == ""
    return child.stderr


# The command in this process -----------------------------------------------------------------

class Command:
    """`evidence` run in this process on one store, with the fake models."""

    def __init__(self, capsys, monkeypatch) -> None:
        self.capsys = capsys
        self.monkeypatch = monkeypatch

    def at(self, store: Path) -> Command:
        self.monkeypatch.setenv("EVIDENCE_STORE", str(store))
        return self

    def __call__(self, *argv: str) -> tuple[int, list[dict], str]:
        return run_json(self.capsys, *argv, keep=is_object)


@pytest.fixture
def command(capsys, monkeypatch) -> Command:
    monkeypatch.setattr("core.workbench.SentenceTransformerEmbedder",
                        lambda *args, **kwargs: FakeEmbedder())
    monkeypatch.setattr("core.workbench.load_reranker",
                        lambda settings: (FakeReranker(), RERANKER_STATUS))
    return Command(capsys, monkeypatch)


@pytest.fixture
def store(tmp_path, template) -> Path:
    """A private copy of the template, never opened before by this process."""
    return copy_of(template, tmp_path)


def copy_of(source: Path, tmp_path: Path, name: str = "store") -> Path:
    """A private copy of a store this process never opened."""
    copy = tmp_path / name
    shutil.copytree(source, copy)
    return copy


# 1. A conversation turn killed at its write --------------------------------------------------

@pytest.fixture(scope="module")
def conversation_template(tmp_path_factory, template) -> tuple[Path, dict]:
    """The template with one conversation of one turn, and that turn as `ask` printed it."""
    store = tmp_path_factory.mktemp("conversation-template") / "store"
    shutil.copytree(template, store)
    bench = Workbench(settings_at(store), embedder=FakeEmbedder(), reranker=FakeReranker())
    turn = bench.ask(VENDOR, QUESTION_1)
    return store, turn.model_dump(mode="json")


def conversation_messages(store: Path) -> dict[str, dict[int, set[str]]]:
    """conversation id -> turn -> the roles stored for it, read from the store itself."""
    records = workbench_at(store).store.conversations(VENDOR)
    found = records.messages(Where(), text=False) if records is not None else []
    messages: dict[str, dict[int, set[str]]] = {}
    for meta in (m.metadata for m in found):
        assert meta["vendor_id"] == VENDOR
        messages.setdefault(meta["conversation_id"], {}).setdefault(
            int(meta["turn"]), set()).add(meta["role"])
    return messages


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("turn", [1, 2])
def test_a_conversation_turn_killed_at_its_write(conversation_template, tmp_path, driver,
                                                 command, turn, when):
    """SIGKILL just before or just after the one write of a turn (the question and its answer
    together): a new conversation's first turn, and a second turn of a stored conversation.
    Afterwards the conversation has that turn whole or not at all, never a question without
    its answer; `evidence conversations --show` shows it so; the next `ask` in it works and
    numbers its turn right."""
    template_store, first_turn = conversation_template
    store = copy_of(template_store, tmp_path)
    if turn == 1:
        argv = ["ask", "--vendor", VENDOR, "Who approves a key rotation?"]
    else:
        argv = ["ask", "--vendor", VENDOR, "--conversation", first_turn["conversation_id"],
                QUESTION_2]
    err = assert_killed(run_child(driver, store, argv,
                                  kill={"at": "conversation", "when": when}),
                        f"{when} the conversation write")
    conversation = re.search(r"c-[0-9a-f]{12}", err).group(0)
    if turn == 2:
        assert conversation == first_turn["conversation_id"]
    kept = turn if when == "after" else turn - 1

    inspected = copy_of(store, tmp_path, "inspected")  # this process keeps no client on it
    messages = conversation_messages(inspected)
    assert all(roles == {"user", "assistant"} for turns in messages.values()
               for roles in turns.values()), messages
    assert sorted(messages.get(conversation, {})) == list(range(1, kept + 1))

    command.at(store)
    code, shown, err = command("conversations", "--vendor", VENDOR, "--show", conversation)
    if kept == 0:
        assert code == 2 and shown == []
        assert f"has no conversation {conversation}" in error_message(err)
        code, listed, _ = command("conversations", "--vendor", VENDOR)
        assert conversation not in {s["conversation_id"] for s in listed}
        code, [again], _ = command(*argv)  # the same question again starts a conversation
        assert code == 0 and again["turn"] == 1
        conversation = again["conversation_id"]
    else:
        assert code == 0
        assert [t["turn"] for t in shown] == list(range(1, kept + 1))
        assert all(t["question"] and t["answer"] for t in shown)
        if turn == 2:
            assert shown[0] == first_turn
        code, [again], _ = command("ask", "--vendor", VENDOR, "--conversation", conversation,
                                   "Is that written down in the policy?")
        assert code == 0 and again["turn"] == kept + 1
        assert again["history"][0]["turn"] == kept
    code, shown, _ = command("conversations", "--vendor", VENDOR, "--show", conversation)
    assert code == 0 and [t["turn"] for t in shown] == list(range(1, (kept or 0) + 2))
    code, listed, _ = command("conversations", "--vendor", VENDOR)
    assert {s["conversation_id"]: s["turns"] for s in listed}[conversation] == kept + 1


# 2. A lexical index update killed ------------------------------------------------------------

@pytest.fixture(scope="module")
def lexical_base(tmp_path_factory, template, inputs) -> Path:
    """The template with its lexical index settled (a hybrid search ran), then documents
    replaced and added and rounds 2 (sent again, answers changed) and 3 (new) ingested: the
    next hybrid search's sync deletes the old version's rows (under the file's own key), adds
    90 chunks, the old version's 60 again under its archive's key (kept as superseded) and 12
    responses, and replaces 6."""
    store = tmp_path_factory.mktemp("lexical-base") / "store"
    shutil.copytree(template, store)
    bench = workbench_at(store)
    bench.retrieve(VENDOR, KEY_CRITERION, "hybrid")
    run_ingest(bench, SCENARIOS["docs"], inputs)
    run_ingest(bench, SCENARIOS["rounds"], inputs)
    return store


def hybrid_view(bench: Workbench, queries: tuple[str, ...] = HYBRID_QUERIES) -> list[tuple]:
    """What the lexical side of hybrid retrieval gives for each query: the lexical list hybrid
    retrieval fuses (the index read after the retrieval synced it), in its order, and the
    linked follow-ups. The vector side is left out, and so is the fused list, which a vector
    near-tie can change: a store reopened after a SIGKILL may rank near-ties of the
    approximate vector index in another order than a store that never saw one, which says
    nothing of the index."""
    import numpy as np

    from core.retrieval.lexical import LexicalIndex
    from core.retrieval.source import Query
    from core.store import committed_versions

    views = []
    for query in queries:
        trace = bench.retrieve(VENDOR, query, "hybrid")
        vendor = bench.store.open_vendor(VENDOR)
        index = LexicalIndex.for_vendor(bench.settings, vendor,
                                        committed_versions(vendor.documents()))
        hits = index.nearest(Query(text=query, criterion_hash=criterion_hash(query),
                                   embedding=np.zeros(0, dtype=np.float32)),
                             bench.settings.lexical_first_stage_n)
        lexical = list(enumerate((h.chunk.id for h in hits if h.committed), start=1))
        fused = {(c.lexical_rank, c.id) for c in trace.first_stage if c.lexical_rank}
        assert fused <= set(lexical)  # what the fused list holds of it, as ranked there
        views.append((lexical, [h.id for h in trace.followups]))
    return views


@pytest.fixture(scope="module")
def lexical_reference(tmp_path_factory, lexical_base) -> list[tuple]:
    """Hybrid retrieval on a copy of the base that never saw a fault."""
    store = tmp_path_factory.mktemp("lexical-reference") / "store"
    shutil.copytree(lexical_base, store)
    return hybrid_view(workbench_at(store))


def check_line(command: Command, *options: str) -> tuple[int, dict]:
    code, lines, err = command("check", "--vendor", VENDOR, *options)
    assert len(lines) == 1, err
    if code:
        error_message(err)
    return code, lines[0]


LEXICAL_KILLS = {
    "first-row": ({"point": "insert", "number": 1}, "at lexical row insert 1"),
    "row-45": ({"point": "insert", "number": 45}, "at lexical row insert 45"),
    "before-commit": ({"point": "commit"}, "before the lexical commit (162 rows written)"),
    "before-settle": ({"point": "settle"}, "after the lexical commit, before the index settled"),
}


@pytest.mark.parametrize("point", list(LEXICAL_KILLS))
def test_a_lexical_index_update_killed(lexical_base, lexical_reference, tmp_path, driver,
                                       command, point):
    """`evidence retrieve --strategy hybrid` killed inside its index sync: at the first and
    the 45th row insert, after its last write before the commit, and after the commit
    before the index records its generation. SQLite rolls the transaction back: `evidence
    check --dry-run` finds the index as it was before (behind the store, which the next sync
    mends, and no drift) or, after the commit, in step; `evidence check` brings it in step
    and settles it, a second check finds nothing, and hybrid retrieval equals that of a store
    that never saw the fault."""
    store = copy_of(lexical_base, tmp_path)
    kill, where = LEXICAL_KILLS[point]
    argv = ["retrieve", "--vendor", VENDOR, "--strategy", "hybrid", "--criterion",
            KEY_CRITERION]
    assert_killed(run_child(driver, store, argv, kill={"at": "lexical", **kill}), where)

    command.at(store)
    code, found = check_line(command, "--dry-run")
    assert code == 0 and found["ok"], found
    lexical = found["lexical"]
    assert lexical["drift"] == 0 and not lexical["settled"]
    if point == "before-settle":
        assert lexical["behind"] == 0
    else:  # as before the sync: the old version's 60 rows; 90 chunks, the old version's 60
        # under its archive's key and 12 answers to come
        assert (lexical["extra"], lexical["missing"], lexical["stale"]) == (60, 156, 6)
        assert lexical["behind"] == 222
    code, repaired = check_line(command)
    assert code == 0 and repaired["ok"] and repaired["remaining"] == {}
    assert repaired["repaired"]["lexical"] == (None if point == "before-settle" else "synced")
    code, again = check_line(command)
    assert code == 0 and again["ok"] and again["repaired"]["lexical"] is None
    assert again["lexical"]["settled"]
    assert all(again["lexical"][k] == 0 for k in ("missing", "extra", "stale", "withdrawn",
                                                  "fts_mismatch", "records", "lingering"))
    assert hybrid_view(workbench_at(store)) == lexical_reference


# 3. A verdict write killed -------------------------------------------------------------------

def llm_env(llm_stub) -> dict[str, str]:
    return {"EVIDENCE_LLM_BASE_URL": llm_stub.base_url, "EVIDENCE_LLM_MODEL": llm_stub.model,
            "EVIDENCE_LLM_TIMEOUT_S": "30"}


def stored_verdicts(store: Path) -> list[tuple[dict, str]]:
    """(metadata, raw answer) of every record of the vendor's verdicts collection."""
    client = workbench_at(store).store.client
    names = {c.name for c in client.list_collections()}
    if verdicts_collection_name(VENDOR) not in names:
        return []
    found = get_all(client.get_collection(verdicts_collection_name(VENDOR)),
                    include=("metadatas", "documents"))
    return list(zip(found["metadatas"], found["documents"], strict=True))


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_verdict_write_killed(store, tmp_path, driver, command, llm_stub, monkeypatch, when):
    """`evidence assess` killed just before or just after the one write of its verdict, the
    language model being a local stub: the verdict is stored whole (every field, the model's
    answer as given, for the prompt the store gives) or not at all; `assess` run again
    completes it, asking the model again only when nothing was stored."""
    llm_stub.enqueue(VERDICT)
    argv = ["assess", "--vendor", VENDOR, "--criterion", KEY_CRITERION]
    assert_killed(run_child(driver, store, argv, kill={"at": "verdict", "when": when},
                            env=llm_env(llm_stub)), f"{when} the verdict write")
    assert len(llm_stub.requests) == 1

    inspected = copy_of(store, tmp_path, "inspected")
    prompt = workbench_at(inspected).retrieve(VENDOR, KEY_CRITERION).prompt
    assert llm_stub.requests[0].messages == [{"role": "user", "content": prompt}]
    records = stored_verdicts(inspected)
    if when == "before":
        assert records == []
    else:
        [(meta, raw)] = records
        assert json.loads(raw) == VERDICT
        assert meta["vendor_id"] == VENDOR and meta["verdict"] == "MET"
        assert meta["reasoning"] == VERDICT["reasoning"]
        assert json.loads(meta["cited_rounds"]) == [2] and json.loads(meta["contradictions"]) == []
        assert meta["prompt_sha256"] == prompt_sha256(prompt)
        assert meta["criterion_hash"] == criterion_hash(KEY_CRITERION)

    for name, value in llm_env(llm_stub).items():
        monkeypatch.setenv(name, value)
    if when == "before":
        llm_stub.enqueue(VERDICT)
    code, [verdict], err = command.at(store)(*argv)
    assert code == 0, err
    assert verdict["cached"] is (when == "after")
    assert len(llm_stub.requests) == (2 if when == "before" else 1)
    assert (verdict["verdict"], verdict["prompt_sha256"]) == ("MET", prompt_sha256(prompt))
    [(meta, raw)] = stored_verdicts(store)
    assert json.loads(raw) == VERDICT and meta["prompt_sha256"] == prompt_sha256(prompt)


# 4. `evidence check` finding drift made on purpose -------------------------------------------

@pytest.fixture(scope="module")
def indexed(tmp_path_factory, template) -> Path:
    """The template with its lexical index built and settled by hybrid searches."""
    store = tmp_path_factory.mktemp("indexed") / "store"
    shutil.copytree(template, store)
    hybrid_view(workbench_at(store))
    return store


@pytest.fixture(scope="module")
def indexed_reference(tmp_path_factory, indexed) -> list[tuple]:
    store = tmp_path_factory.mktemp("indexed-reference") / "store"
    shutil.copytree(indexed, store)
    return hybrid_view(workbench_at(store))


def lexical_file(store: Path) -> sqlite3.Connection:
    return sqlite3.connect(index_path(settings_at(store), VENDOR), isolation_level=None)


def top_lexical_documents(reference: list[tuple], n: int) -> list[str]:
    """The document chunks the first query found in the lexical list, best first."""
    lexical = reference[0][0]  # (lexical rank, id), best first
    return [i for _, i in lexical if i.startswith("doc-")][:n]


def delete_rows(db: sqlite3.Connection, ids: list[str], *, full_text_only: bool) -> None:
    for record_id in ids:
        (rowid,) = db.execute("SELECT rowid FROM chunks WHERE id = ?", (record_id,)).fetchone()
        db.execute("DELETE FROM chunk_text WHERE rowid = ?", (rowid,))
        if not full_text_only:
            db.execute("DELETE FROM chunks WHERE rowid = ?", (rowid,))


def add_row(db: sqlite3.Connection, record_id: str, version_key: str | None, text: str,
            *, recorded: bool) -> None:
    metadata = {"source": "planted.md", "source_type": "document", "type": "tc_files"}
    cursor = db.execute("INSERT INTO chunks (id, version_key, metadata) VALUES (?, ?, ?)",
                        (record_id, version_key, json.dumps(metadata, sort_keys=True)))
    db.execute("INSERT INTO chunk_text (rowid, text) VALUES (?, ?)", (cursor.lastrowid, text))
    if recorded and version_key is not None:
        db.execute("INSERT INTO versions VALUES (?, ?)", tuple(version_key.split("@")))
    elif recorded:
        db.execute("INSERT INTO followups VALUES (?, 'planted')", (record_id,))


def followup_row(db: sqlite3.Connection, words: str) -> tuple[int, str]:
    """(rowid, id) of the indexed follow-up whose text holds these words."""
    return db.execute("SELECT c.rowid, c.id FROM chunks AS c JOIN chunk_text AS t "
                      "ON t.rowid = c.rowid WHERE c.version_key IS NULL AND t.text LIKE ?",
                      (f"%{words}%",)).fetchone()


PLANTED = "Keys rotate every six months, planted words rotate keys encryption"


def make_drift(kind: str, db: sqlite3.Connection, reference: list[tuple]) -> dict[str, int]:
    """Damage the index file one way; the counts `evidence check` must find."""
    if kind == "rows_deleted":
        delete_rows(db, top_lexical_documents(reference, 5), full_text_only=False)
        return {"missing": 5}
    if kind == "full_text_rows_deleted":
        delete_rows(db, top_lexical_documents(reference, 3), full_text_only=True)
        return {"fts_mismatch": 3}
    if kind == "full_text_index_damaged":  # a row's text changed under the full-text index
        [record_id] = top_lexical_documents(reference, 1)
        db.execute("UPDATE chunk_text_content SET c0 = 'Badges are reviewed.' WHERE id = "
                   "(SELECT rowid FROM chunks WHERE id = ?)", (record_id,))
        return {"fts_mismatch": 1, "stale": 1}
    if kind == "unnamed_version_row":
        add_row(db, "doc-0123456789abcdef-fedcba9876543210-0",
                "0123456789abcdef@fedcba9876543210", PLANTED, recorded=False)
        return {"extra": 1}
    if kind == "unnamed_version_recorded":
        add_row(db, "doc-0123456789abcdef-fedcba9876543210-0",
                "0123456789abcdef@fedcba9876543210", PLANTED, recorded=True)
        return {"extra": 1}
    if kind == "followup_text_changed":
        rowid, _ = followup_row(db, "every six months (response 0")
        db.execute("UPDATE chunk_text SET text = ? WHERE rowid = ?",
                   ("Badges are reviewed by the front desk.", rowid))
        return {"stale": 1}
    if kind == "followup_fingerprint_changed":
        _, record_id = followup_row(db, "every six months (response 0")
        db.execute("UPDATE followups SET fingerprint = 'edited' WHERE id = ?", (record_id,))
        return {"stale": 1}
    if kind == "followup_record_deleted":
        _, record_id = followup_row(db, "every six months (response 0")
        db.execute("DELETE FROM followups WHERE id = ?", (record_id,))
        return {"records": 1}
    if kind == "removed_response_row":
        add_row(db, "followup-acme-0000000000000000-round9", None, PLANTED, recorded=True)
        return {"extra": 1}
    raise AssertionError(kind)


DRIFTS = {  # kind -> how `evidence check` mends it
    "rows_deleted": "rebuilt", "full_text_rows_deleted": "rebuilt",
    "full_text_index_damaged": "rebuilt",
    "unnamed_version_row": "rebuilt", "unnamed_version_recorded": "synced",
    "followup_text_changed": "rebuilt", "followup_fingerprint_changed": "synced",
    "followup_record_deleted": "synced",
    "removed_response_row": "synced",
}
# Drift a search shows: lexical ranks lost, or a follow-up found by words it no longer has.
VISIBLE = {"rows_deleted", "full_text_rows_deleted", "followup_text_changed"}


@pytest.mark.parametrize("kind", list(DRIFTS))
def test_check_finds_and_mends_drift_made_on_purpose(indexed, indexed_reference, tmp_path,
                                                     command, kind):
    """The index file damaged behind the workbench's back: rows of a committed version
    deleted (from both tables, or from the full-text table only), a row's text changed under
    the full-text index (FTS5's integrity check fails), a row of a version the manifest does
    not name (unrecorded, or recorded as if indexed), a follow-up's text changed, its
    fingerprint changed or its fingerprint record lost, a row of a response the store does
    not hold.
    The index had settled at the store's generation, so no search would look again: `check
    --dry-run` reports each as drift and exits 1, `check` mends it (a full sync where the
    index's records show it, else a rebuild), a second `check` reports nothing, and hybrid
    retrieval equals a clean store's."""
    store = copy_of(indexed, tmp_path)
    db = lexical_file(store)
    expected = make_drift(kind, db, indexed_reference)
    db.close()
    if kind in VISIBLE:
        assert hybrid_view(workbench_at(copy_of(store, tmp_path, "damaged"))) != (
            indexed_reference)

    command.at(store)
    code, found = check_line(command, "--dry-run")
    assert code == 1 and not found["ok"] and found["dry_run"]
    differences = {k: found["lexical"][k] for k in ("missing", "extra", "stale", "withdrawn",
                                                   "fts_mismatch", "records")}
    assert {k: n for k, n in differences.items() if n} == expected
    assert found["lexical"]["drift"] == sum(expected.values())
    assert found["lexical"]["settled"] and found["remaining"] == {
        "drift": sum(expected.values())}
    assert found["to_complete"] and "rebuilds it" in found["to_complete"][0]

    code, repaired = check_line(command)
    assert code == 0 and repaired["ok"], repaired
    assert repaired["repaired"]["lexical"] == DRIFTS[kind]
    assert {k: repaired["lexical"][k] for k in expected} == expected  # as found
    code, again = check_line(command)
    assert code == 0 and again["ok"] and again["repaired"]["lexical"] is None
    assert again["lexical"]["drift"] == again["lexical"]["behind"] == 0
    assert again["lexical"]["settled"]
    assert hybrid_view(workbench_at(store)) == indexed_reference


def test_a_lost_fingerprint_record_is_mended_by_the_next_sync(indexed, tmp_path, inputs,
                                                              command):
    """The index keeps a follow-up's row but lost its fingerprint record. Once the store
    changes, the next hybrid search's sync writes the response again; it used to insert it
    beside the row, collide, and fail with one StoreError on every search after. It now
    replaces the row: the search works and `check` finds the index in step."""
    store = copy_of(indexed, tmp_path)
    db = lexical_file(store)
    make_drift("followup_record_deleted", db, [])
    db.close()
    bench = workbench_at(store)
    run_ingest(bench, SCENARIOS["rounds"], inputs)
    trace = bench.retrieve(VENDOR, "Keys rotate monthly", "hybrid")
    assert any(c.is_followup and c.lexical_rank is not None for c in trace.first_stage)
    code, found = check_line(command.at(store), "--dry-run")
    assert code == 0 and found["lexical"]["settled"]
    assert found["lexical"]["behind"] == found["lexical"]["drift"] == 0


def test_a_rebuild_killed_before_its_commit_leaves_the_index_as_it_was(
        indexed, indexed_reference, tmp_path, driver, command):
    """`evidence check` killed inside its rebuild, after every row was written again and
    before the commit (the old tables were dropped in the same transaction): the index is the
    damaged one, exactly; the next `check` mends it."""
    store = copy_of(indexed, tmp_path)
    db = lexical_file(store)
    make_drift("rows_deleted", db, indexed_reference)
    make_drift("unnamed_version_row", db, indexed_reference)
    db.close()
    command.at(store)
    code, before = check_line(command, "--dry-run")
    assert code == 1 and before["lexical"]["drift"] == 6
    assert_killed(run_child(driver, store, ["check", "--vendor", VENDOR],
                            kill={"at": "lexical", "point": "commit"}),
                  "before the lexical commit")
    code, after = check_line(command, "--dry-run")
    assert code == 1 and after["lexical"] == before["lexical"]
    code, repaired = check_line(command)
    assert code == 0 and repaired["repaired"]["lexical"] == "rebuilt"
    assert check_line(command)[1]["ok"]
    assert hybrid_view(workbench_at(store)) == indexed_reference


# 5. `evidence check` and what an interrupted ingest left in the store ------------------------

def fail_at(store: Path, inputs: Path, name: str, label: str, when: str) -> None:
    """The scenario's ingest with ChromaDB raising just before or after the write `label`."""
    number = SCENARIOS[name].writes.index(label) + 1
    with injected(WriteFaults(at=number, when=when)), pytest.raises(InjectedFault):
        run_ingest(workbench_at(store), SCENARIOS[name], inputs)


def test_check_deletes_an_abandoned_version_under_the_write_lock(store, inputs, references,
                                                                 command):
    """A documents ingest failing before policy.md's manifest entry: its 60 new chunks, and
    the 60 of the old version copied under its archive's key, are leftovers. `check
    --dry-run` names them and exits 1; `check` deletes them under the write lock (status then
    counts no incomplete chunk, retrieval is unchanged); the same ingest run again completes
    the store."""
    fail_at(store, inputs, "docs", "upsert manifest policy.md", "before")
    bench = workbench_at(store)
    views = {s: [c.id for c in bench.retrieve(VENDOR, KEY_CRITERION, s).first_stage]
             for s in ("semantic", "precedence", "hybrid")}
    code, found = check_line(command.at(store), "--dry-run")
    assert code == 1 and not found["ok"]
    assert found["store"]["leftover_chunks"] == 120
    assert found["store"]["leftover_documents"] == ["policy.md"]
    assert found["remaining"] == {"leftover_chunks": 120}
    assert "deletes them" in found["to_complete"][0]
    code, repaired = check_line(command)
    assert code == 0 and repaired["ok"] and repaired["repaired"]["leftover_chunks_deleted"] == 120
    now = observe(store)
    assert not now.uncommitted[VENDOR] and now.status[VENDOR]["incomplete_chunks"] == 0
    bench = workbench_at(store)
    assert views == {s: [c.id for c in bench.retrieve(VENDOR, KEY_CRITERION, s).first_stage]
                     for s in views}
    run_ingest(bench, SCENARIOS["docs"], inputs)
    assert_complete(observe(store), references("docs").view)
    assert check_line(command)[1]["ok"]


def test_check_deletes_a_replaced_version_that_lingers(store, inputs, references, command):
    """A documents ingest failing after policy.md's commit, before its old version's delete,
    with hybrid searches before and after: the index keeps the old version's 60 rows, as it
    may while their chunks are in the store (`lingering`, no drift). `check` deletes the old
    chunks (the writer's step 3), the next sync drops the rows, and the store and index are
    in step."""
    workbench_at(store).retrieve(VENDOR, KEY_CRITERION, "hybrid")
    fail_at(store, inputs, "docs", "delete chunks policy.md", "before")
    workbench_at(store).retrieve(VENDOR, KEY_CRITERION, "hybrid")
    code, found = check_line(command.at(store), "--dry-run")
    assert code == 1 and found["remaining"] == {"leftover_chunks": 60}
    assert (found["lexical"]["lingering"], found["lexical"]["drift"]) == (60, 0)
    code, repaired = check_line(command)
    assert code == 0 and repaired["ok"]
    assert repaired["repaired"] == {"lexical": "synced", "leftover_chunks_deleted": 60,
                                    "markers_deleted": 0, "tombstones_deleted": 0,
                                    "written_again": 0}
    code, again = check_line(command)
    assert code == 0 and again["lexical"]["lingering"] == 0 and again["lexical"]["settled"]
    now = observe(store)
    assert now.documents == references("docs").view.documents and not now.uncommitted[VENDOR]


def test_check_finishes_a_committed_replacement(store, inputs, references, command):
    """A replacement of round 2 failing just after its commit (the responses' write), after a
    hybrid search had indexed round 2: four markers and four tombstones are left, and the
    index still holds the four withdrawn answers and the changed one's old text until its
    next sync. `check --dry-run` reports them (the index behind, not drifting); `check`
    deletes the markers and tombstones, as the replacement's steps 3 and 4 would, syncs the
    index, and the store equals the completed replacement without running it again."""
    workbench_at(store).retrieve(VENDOR, KEY_CRITERION, "hybrid")
    fail_at(store, inputs, "round_replace", "upsert chunks round 2 (6)", "after")
    code, found = check_line(command.at(store), "--dry-run")
    assert code == 1
    assert (found["store"]["withdrawn_markers"], found["store"]["tombstones"]) == (4, 4)
    lexical = found["lexical"]
    assert (lexical["withdrawn"], lexical["stale"], lexical["missing"]) == (4, 1, 1)
    assert (lexical["behind"], lexical["drift"]) == (6, 0)
    code, repaired = check_line(command)
    assert code == 0 and repaired["ok"]
    assert repaired["repaired"] == {"lexical": "synced", "leftover_chunks_deleted": 0,
                                    "markers_deleted": 4, "tombstones_deleted": 4,
                                    "written_again": 0}
    assert_complete(observe(store), references("round_replace").view)
    code, again = check_line(command)
    assert code == 0 and again["lexical"]["settled"] and again["lexical"]["behind"] == 0


@pytest.mark.parametrize(("name", "label", "counts"), [
    ("rounds", "upsert manifest links round 2 (7)",
     {"links_not_as_stored": 6, "links_without_response": 1}),
    ("round_replace", "upsert manifest links round 2 (6)",
     {"unfinished_replacements": 4, "links_not_as_stored": 1, "links_without_response": 1}),
], ids=["round-between-links-and-responses", "replacement-before-its-commit"])
def test_check_reports_what_only_the_rounds_files_complete(store, inputs, references, command,
                                                           name, label, counts):
    """A round killed between its link write and its responses' write (round 2 sent again:
    six changed answers, one new), and a replacement before its commit (four tombstones over
    answers still shown, one changed answer's and one new answer's links): `check` changes
    nothing of it, names the round and the command, and exits 1 with one sentence; once the
    same ingest runs again, `check` exits 0."""
    fail_at(store, inputs, name, label, "after")
    before = observe(store)
    command.at(store)
    for options in (("--dry-run",), ()):
        code, found = check_line(command, *options)
        assert code == 1 and not found["ok"]
        assert {k: found["store"][k] for k in counts} == counts
        assert found["remaining"] == counts
        assert found["store"]["rounds_to_ingest_again"] == [2]
        assert any("round(s) 2" in s and "evidence ingest questionnaire" in s
                   for s in found["to_complete"])
    assert observe(store) == before
    run_ingest(workbench_at(store), SCENARIOS[name], inputs)
    code, done = check_line(command)
    assert code == 0 and done["ok"] and done["store"]["rounds_to_ingest_again"] == []
    assert_complete(observe(store), references(name).view)


# 6. The command's face ---------------------------------------------------------------------

@pytest.mark.parametrize(("vendor", "needle"), [
    ("globex", "No evidence is stored for vendor 'globex'"),
    ("acme/evil", "is not valid"),
])
def test_check_refuses_a_vendor_in_one_sentence(store, command, vendor, needle):
    code, lines, err = command.at(store)("check", "--vendor", vendor)
    assert code == 2 and lines == []
    assert needle in error_message(err)


def test_check_prints_text_for_people_and_has_help(indexed, tmp_path, capsys, command):
    command.at(copy_of(indexed, tmp_path))
    assert main(["check", "--vendor", VENDOR, "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("Vendor acme: consistent.\nLexical index ")
    assert "settled at the store's generation" in text and "Repaired: nothing." in text
    assert main(["check", "--help"]) == 0
    assert "--dry-run" in capsys.readouterr().out


# 7. Two vendors writing conversations and verdicts at once -----------------------------------

MARKERS = {"acme": "Ravenwood", "globex": "Kestrelmoor"}


def test_two_vendors_conversations_and_verdicts_never_mix(tmp_path, llm_stub):
    """Two threads, one per vendor, each asking three questions of one conversation and
    assessing three criteria, at the same moment, through one shared workbench for asking and
    one for assessing (as the dashboard shares one): each vendor's conversations and verdicts
    hold only its own, each verdict answers the prompt its own vendor's store gives."""
    settings = settings_at(tmp_path / "store")
    asker = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    criteria = [f"Does the vendor rotate encryption keys, control {n}?" for n in range(3)]
    for vendor, marker in MARKERS.items():
        folder = tmp_path / vendor
        folder.mkdir()
        (folder / "keys.md").write_text(
            f"# Keys\n\nEncryption keys are rotated by the {marker} key service every "
            f"quarter.\n\n# Access\n\nAccess is reviewed by the {marker} team.\n",
            encoding="utf-8")
        asker.ingest_documents(vendor, [folder])
        asker.ingest_questionnaire(payloads.round_payload(
            1, [payloads.response(c, f"{marker} rotates the keys quarterly ({n}).", c)
                for n, c in enumerate(criteria)], vendor=vendor, timestamp="2024-01-15T10:30:00Z"))
    assessor = Workbench(settings.model_copy(update={
        "llm_base_url": llm_stub.base_url, "llm_model": llm_stub.model, "llm_timeout_s": 30.0}),
        embedder=FakeEmbedder(), reranker=FakeReranker())
    for _ in range(2 * len(criteria)):
        llm_stub.enqueue({**VERDICT, "cited_rounds": [1]})
    start = threading.Barrier(2)
    failures: list[BaseException] = []
    conversations: dict[str, str] = {}

    def work(vendor: str) -> None:
        try:
            start.wait()
            conversation = None
            for n, criterion in enumerate(criteria):
                turn = asker.ask(vendor, f"How are the keys rotated, part {n}?", conversation)
                conversation = turn.conversation_id
                assessor.verdicts.assess(vendor, criterion)
            conversations[vendor] = conversation
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(vendor,)) for vendor in MARKERS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []

    reader = Workbench(settings, embedder=FakeEmbedder(), reranker=FakeReranker())
    for vendor, marker in MARKERS.items():
        other = next(m for v, m in MARKERS.items() if v != vendor)
        [summary] = reader.conversations(vendor)
        assert (summary.conversation_id, summary.turns) == (conversations[vendor], 3)
        turns = reader.conversation(vendor, conversations[vendor])
        assert [t.turn for t in turns] == [1, 2, 3]
        for turn in turns:
            assert turn.vendor_id == vendor
            shown = json.dumps(turn.model_dump(mode="json"))
            assert marker in shown and other not in shown
        stored = reader.store.conversations(vendor).messages(Where(), text=False)
        assert {m.metadata["vendor_id"] for m in stored} == {vendor}
        verdicts = VerdictStore(reader.store, vendor)
        prompts = {prompt_sha256(reader.retrieve(vendor, c).prompt) for c in criteria}
        stored = [v for c in criteria for v in verdicts.for_criterion(criterion_hash(c),
                                                                       "precedence")]
        assert {v.vendor_id for v in stored} == {vendor}
        assert {v.prompt_sha256 for v in stored} == prompts and len(stored) == 3
        raw = get_all(reader.store.client.get_collection(verdicts_collection_name(vendor)))
        assert {m["vendor_id"] for m in raw["metadatas"]} == {vendor}
    requests = [r.messages[0]["content"] for r in llm_stub.requests]
    assert len(requests) == 6
    assert all(sum(m in content for m in MARKERS.values()) == 1 for content in requests)

