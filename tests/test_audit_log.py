"""The store's audit log (core/store/audit_log.py) and `evidence audit`, on real ChromaDB
stores on disk: entries kept and read back with filters, both output formats, entries changed
or removed on disk named by `--verify`, two processes appending at once, and a process killed
while appending."""

from __future__ import annotations

import hashlib
import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import core.store.audit_log as audit_log
from core.config import Settings
from core.errors import StoreError, UserInputError
from core.store import EvidenceStore
from core.store.audit_log import AUDIT_COLLECTION, AuditEntry, record_id
from tests.chroma_server import ChromaServer
from tests.conftest import AES_CRITERION
from tests.support import warm
from tests.support.cli import environment, error_message, run_json, run_main, run_process
from tests.support.payloads import numbered, round_payload
from tests.support.sentences import assert_one_sentence

REPO = Path(__file__).resolve().parents[1]
CONTEXT = "3f2a" + "0" * 60


def log_at(store: Path):
    return EvidenceStore(Settings(store=store)).audit_log()


def at_times(monkeypatch, *times: str) -> None:
    """The entries appended next get these times, in turn."""
    given = iter(times)
    monkeypatch.setattr(audit_log, "now_utc", lambda: next(given))


def a_day(log) -> list[AuditEntry]:
    """Five entries of two users about two vendors, on 27 and 28 November 2026."""
    return [
        log.append("alice@example.com", "login"),
        log.append("alice@example.com", "view", vendor="acme", criterion=AES_CRITERION,
                   page="Criterion overview", strategy="precedence", context_sha256=CONTEXT),
        log.append("bob@example.com", "search", vendor="northwind", page="Ask the evidence",
                   detail="Searched for backups."),
        log.append("alice@example.com", "export", vendor="acme",
                   detail="Downloaded the evidence pack."),
        log.append("oidc|5c0ffee", "decide", vendor="acme", criterion=AES_CRITERION,
                   strategy="precedence", context_sha256=CONTEXT, detail="Decided met."),
    ]


DAY = ("2026-11-27T09:00:00.000001Z", "2026-11-27T09:05:00.250000Z",
       "2026-11-27T21:04:05.000000Z", "2026-11-28T08:00:00.000000Z",
       "2026-11-28T10:30:00.999999Z")


def hash_of(line: dict) -> str:
    """SHA-256 of an entry's canonical JSON without its hash, as docs/cli.md describes it,
    computed here without the log's own code."""
    held = {key: value for key, value in line.items() if key != "hash"}
    text = json.dumps(held, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def audit(capsys, store: Path, *args) -> tuple[int, list, str]:
    return run_json(capsys, "--store", store, "audit", *args, clear=True)


def verify_in_a_new_process(store: Path, tmp_path: Path) -> tuple[int, dict, str]:
    done = run_process("--store", store, "audit", "--verify", env=environment(), cwd=tmp_path)
    return done.returncode, json.loads(done.stdout), done.stderr


# On disk --------------------------------------------------------------------------------


def sql(store: Path, statement: str, *args) -> int:
    """Run one statement on the embedded store's database, as someone editing it would."""
    database = sqlite3.connect(store / "chroma.sqlite3")
    try:
        changed = database.execute(statement, args).rowcount
        database.commit()
    finally:
        database.close()
    return changed


ROW = "(SELECT id FROM embeddings WHERE embedding_id = ?)"


def stored_document(store: Path, seq: int) -> str:
    database = sqlite3.connect(store / "chroma.sqlite3")
    try:
        [(text,)] = database.execute(
            f"SELECT string_value FROM embedding_metadata WHERE id = {ROW} "
            "AND key = 'chroma:document'", (record_id(seq),)).fetchall()
    finally:
        database.close()
    return text


def set_document(store: Path, seq: int, text: str) -> None:
    assert sql(store, f"UPDATE embedding_metadata SET string_value = ? WHERE id = {ROW} "
                      "AND key = 'chroma:document'", text, record_id(seq)) == 1


def set_metadata(store: Path, seq: int, key: str, value: str) -> None:
    assert sql(store, f"UPDATE embedding_metadata SET string_value = ? WHERE id = {ROW} "
                      "AND key = ?", value, record_id(seq), key) == 1


# Appending and reading --------------------------------------------------------------------


def test_entries_are_chained_in_order_and_read_back_with_filters(tmp_path, monkeypatch):
    at_times(monkeypatch, *DAY)
    log = log_at(tmp_path / "store")
    appended = a_day(log)

    entries = log.entries()
    assert entries == appended
    assert [e.seq for e in entries] == [0, 1, 2, 3, 4]
    assert [e.at for e in entries] == list(DAY)
    assert entries[0].prev == ""
    for before, entry in zip(entries, entries[1:], strict=False):
        assert entry.prev == before.hash
    for entry in entries:  # the hash is what the docs say it is, recomputed independently
        assert entry.hash == hash_of(entry.to_json())
    assert entries[1].criterion == AES_CRITERION and entries[1].context_sha256 == CONTEXT

    assert [e.seq for e in log.entries(vendor="acme")] == [1, 3, 4]
    assert [e.seq for e in log.entries(user="alice@example.com")] == [0, 1, 3]
    assert [e.seq for e in log.entries(user="alice@example.com", vendor="acme")] == [1, 3]
    assert [e.seq for e in log.entries(since="2026-11-28")] == [3, 4]
    assert [e.seq for e in log.entries(since="2026-11-27T21:04:05Z")] == [2, 3, 4]
    # A time with an offset is that moment: 22:04:05 at +01:00 is 21:04:05 UTC.
    assert [e.seq for e in log.entries(since="2026-11-27T22:04:05.000001+01:00")] == [3, 4]
    assert log.entries(vendor="globex") == []

    check = log.verify()
    assert (check.ok, check.count, check.head) == (True, 5, entries[-1].hash)


def test_a_store_whose_log_was_never_written_reads_empty_and_creates_nothing(tmp_path,
                                                                             capsys):
    store = tmp_path / "store"
    log = log_at(store)
    assert log.entries() == []
    check = log.verify()
    assert (check.ok, check.count, check.head) == (True, 0, "")

    assert audit(capsys, store) == (0, [], "")
    code, out, err = run_main(capsys, "--store", store, "audit", "--format", "text")
    assert (code, out, err) == (0, "The audit log is empty.\n", "")
    assert audit(capsys, store, "--verify") == (0, [{"ok": True, "entries": 0, "head": ""}],
                                                "")
    assert not store.exists()


@pytest.mark.parametrize(("call", "named"), [
    (lambda log: log.append("", "view"), "user"),
    (lambda log: log.append("alice\nmallory", "view"), "user"),
    (lambda log: log.append("alice", "View page"), "action"),
    (lambda log: log.append("alice", ""), "action"),
    (lambda log: log.append("alice", "view", vendor="a b"), "vendor"),
    (lambda log: log.append("alice", "view", context_sha256="3f2a"), "context_sha256"),
    (lambda log: log.append("alice", "view", page="x" * 201), "page"),
    (lambda log: log.append("alice", "view", detail="\udcff"), "detail"),
    (lambda log: log.append("alice", "view", criterion=7), "criterion"),
])
def test_bad_fields_are_refused_in_one_sentence_and_nothing_is_written(tmp_path, call,
                                                                       named):
    log = log_at(tmp_path / "store")
    log.append("alice@example.com", "login")
    with pytest.raises(UserInputError) as refused:
        call(log)
    assert_one_sentence(str(refused.value), named, quotes_input=True)
    assert [e.action for e in log_at(tmp_path / "store").entries()] == ["login"]


def test_a_log_of_a_fresh_store_refusing_its_first_entry_leaves_no_store(tmp_path):
    store = tmp_path / "store"
    with pytest.raises(UserInputError):
        log_at(store).append("alice", "no such action!")
    assert not store.exists()


def test_the_log_is_no_vendor(workbench, capsys):
    """The log's collection is store-wide: no listing of vendors, with or without the
    register of vendors, takes it for one."""
    store = workbench.store
    store.audit_log().append("alice@example.com", "login")
    assert store.vendor_ids() == [] and store._listed_vendor_ids() == []
    assert run_main(capsys, "--store", workbench.settings.store, "status") == (0, "", "")

    workbench.ingest_questionnaire(round_payload(1, numbered(
        2, "Question {i} about encryption", "Answer {i}: AES-256.",
        criterion={0: AES_CRITERION}), timestamp="2024-01-10T09:00:00Z"))
    store.audit_log().append("alice@example.com", "ingest", vendor="acme")
    names = {c.name for c in store.client.list_collections()}
    assert AUDIT_COLLECTION in names
    assert store.vendor_ids() == ["acme"] and store._listed_vendor_ids() == ["acme"]
    reopened = EvidenceStore(workbench.settings)
    assert reopened.vendor_ids() == ["acme"]
    code, lines, _ = run_json(capsys, "--store", workbench.settings.store, "status", clear=True)
    assert code == 0 and [line["vendor_id"] for line in lines] == ["acme"]


def test_threads_of_one_process_appending_at_once_lose_nothing(tmp_path):
    log = log_at(tmp_path / "store")
    log.append("setup", "login")  # the collection exists before the threads start
    go = threading.Barrier(4)

    def append(name: str) -> None:
        go.wait()
        for i in range(15):
            log.append(name, "view", detail=f"{name} {i}")

    threads = [threading.Thread(target=append, args=(f"user-{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entries = log_at(tmp_path / "store").entries()
    assert [e.seq for e in entries] == list(range(61))
    for n in range(4):
        assert [e.detail for e in entries if e.user == f"user-{n}"] == [
            f"user-{n} {i}" for i in range(15)]
    assert log.verify().ok


def test_an_append_that_loses_its_number_chains_onto_the_winner(tmp_path, monkeypatch):
    """Another writer adding the number this one tries, just before it: this one's add is a
    no-op, and it appends after the other's entry, chained to it; past the bound of attempts
    it gives up in one sentence, and the log still verifies."""
    store = tmp_path / "store"
    log, other = log_at(store), EvidenceStore(Settings(store=store)).audit_log()
    log.append("alice@example.com", "login")
    real = audit_log.writes.apply
    rivals = {"left": 1000, "made": 0}
    inside: list[bool] = []  # the rival's own add goes straight through

    def apply(collection, operation, **arguments):
        if (collection.name == AUDIT_COLLECTION and operation == "add" and rivals["left"]
                and not inside):
            rivals["left"] -= 1
            inside.append(True)
            try:
                other.append("bob@example.com", "view", detail=f"rival {rivals['made']}")
            finally:
                inside.pop()
            rivals["made"] += 1
        return real(collection, operation, **arguments)

    monkeypatch.setattr(audit_log.writes, "apply", apply)
    monkeypatch.setattr(audit_log, "APPEND_ATTEMPTS", 3)
    with pytest.raises(StoreError) as refused:
        log.append("alice@example.com", "view")
    assert_one_sentence(str(refused.value), "audit log", "try again")
    entries = log.entries()
    assert [(e.seq, e.user, e.detail) for e in entries] == [
        (0, "alice@example.com", None), (1, "bob@example.com", "rival 0"),
        (2, "bob@example.com", "rival 1"), (3, "bob@example.com", "rival 2")]
    assert log.verify().ok

    rivals["left"] = 1
    mine = log.append("alice@example.com", "view")
    entries = log.entries()
    assert [e.detail for e in entries[-2:]] == ["rival 3", None]
    assert mine == entries[-1] and mine.seq == 5 and mine.prev == entries[-2].hash
    assert log.verify().ok


# The command ------------------------------------------------------------------------------


def test_the_command_lists_entries_as_json_lines_with_filters(tmp_path, monkeypatch, capsys):
    at_times(monkeypatch, *DAY)
    store = tmp_path / "store"
    a_day(log_at(store))

    code, lines, err = audit(capsys, store)
    assert (code, err) == (0, "")
    assert [line["seq"] for line in lines] == [0, 1, 2, 3, 4]
    assert list(lines[1]) == ["seq", "at", "user", "action", "vendor", "criterion", "page",
                              "strategy", "context_sha256", "detail", "prev", "hash"]
    assert lines[1] | {"prev": None, "hash": None} == {
        "seq": 1, "at": "2026-11-27T09:05:00.250000Z", "user": "alice@example.com",
        "action": "view", "vendor": "acme", "criterion": AES_CRITERION,
        "page": "Criterion overview", "strategy": "precedence", "context_sha256": CONTEXT,
        "detail": None, "prev": None, "hash": None}
    assert all(line["hash"] == hash_of(line) for line in lines)

    assert [line["seq"] for line in audit(capsys, store, "--vendor", "acme")[1]] == [1, 3, 4]
    assert [line["seq"] for line in audit(capsys, store, "--user", "bob@example.com")[1]
            ] == [2]
    assert [line["seq"] for line in audit(capsys, store, "--since", "2026-11-28T00:00Z",
                                          "--vendor", "acme")[1]] == [3, 4]
    assert audit(capsys, store, "--vendor", "globex") == (0, [], "")


def test_the_command_prints_one_readable_line_per_entry(tmp_path, monkeypatch, capsys):
    at_times(monkeypatch, *DAY)
    store = tmp_path / "store"
    a_day(log_at(store))
    code, out, err = run_main(capsys, "--store", store, "audit", "--format", "text",
                              clear=True)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "0  2026-11-27 09:00:00Z  alice@example.com  login  -",
        "1  2026-11-27 09:05:00Z  alice@example.com  view  acme  "
        "'Does the vendor encrypt data at rest...'  Criterion overview, precedence, "
        "context 3f2a…",
        "2  2026-11-27 21:04:05Z  bob@example.com  search  northwind  Ask the evidence  "
        "Searched for backups.",
        "3  2026-11-28 08:00:00Z  alice@example.com  export  acme  "
        "Downloaded the evidence pack.",
        "4  2026-11-28 10:30:00Z  oidc|5c0ffee  decide  acme  "
        "'Does the vendor encrypt data at rest...'  precedence, context 3f2a…  Decided met.",
    ]
    code, out, _ = run_main(capsys, "--store", store, "audit", "--format", "text",
                            "--user", "carol@example.com")
    assert (code, out) == (0, "No entry of the audit log matches.\n")

    code, out, err = run_main(capsys, "--store", store, "audit", "--verify", "--format",
                              "text")
    head = log_at(store).entries()[-1].hash
    assert (code, err) == (0, "")
    assert out == f"The audit log holds together: 5 entries, head {head}.\n"


@pytest.mark.parametrize(("args", "named"), [
    (("--since", "yesterday"), "--since"),
    (("--since", "2026-13-01"), "--since"),
    (("--verify", "--vendor", "acme"), "--vendor"),
    (("--verify", "--since", "2026-11-27"), "--since"),
    (("--vendor", "not a vendor"), "not a vendor"),
    (("--user", " "), "--user"),
])
def test_bad_options_are_refused_in_one_sentence(tmp_path, capsys, args, named):
    store = tmp_path / "store"
    log_at(store).append("alice@example.com", "login")
    code, out, err = run_main(capsys, "--store", store, "audit", *args, clear=True)
    assert (code, out) == (2, "")
    assert named in error_message(err)
    assert [e.action for e in log_at(store).entries()] == ["login"]


def test_verify_prints_the_head_and_the_log_is_unchanged_by_reading_it(tmp_path, capsys):
    store = tmp_path / "store"
    entries = a_day(log_at(store))
    code, lines, err = audit(capsys, store, "--verify")
    assert (code, err) == (0, "")
    assert lines == [{"ok": True, "entries": 5, "head": entries[-1].hash}]
    audit(capsys, store)
    assert audit(capsys, store, "--verify")[1] == lines  # listing wrote nothing


# Changed on disk ---------------------------------------------------------------------------


def test_an_entry_whose_text_was_edited_on_disk_fails_verify_naming_it(tmp_path, capsys):
    store = tmp_path / "store"
    a_day(log_at(store))
    held = stored_document(store, 3)
    set_document(store, 3, held.replace("alice@example.com", "mallory@example.com"))

    code, line, err = verify_in_a_new_process(store, tmp_path)
    assert code == 1
    assert (line["ok"], line["entries"], line["broken"]) == (False, 5, 3)
    assert line["problem"] == "entry 3 was changed: its hash does not match what it holds"
    assert "entry 3 was changed" in error_message(err)
    code, out, _ = run_main(capsys, "--store", store, "audit", "--verify", "--format", "text")
    assert (code, out) == (1, "The audit log is broken: entry 3 was changed: its hash does "
                              "not match what it holds.\n")


def test_an_entry_whose_metadata_was_edited_on_disk_fails_verify_naming_it(tmp_path, capsys):
    """Metadata is what the filters read: an entry moved to another user on disk would hide
    from `--user`, and --verify names it."""
    store = tmp_path / "store"
    a_day(log_at(store))
    set_metadata(store, 1, "user", "bob@example.com")
    assert [line["seq"] for line in audit(capsys, store, "--user", "alice@example.com")[1]
            ] == [0, 3]
    code, line, err = verify_in_a_new_process(store, tmp_path)
    assert (code, line["broken"]) == (1, 1)
    assert line["problem"] == ("entry 1 was changed: its metadata (user) does not match "
                               "what it holds")
    assert "entry 1 was changed" in error_message(err)


def rewrite(store: Path, seq: int, **changes) -> AuditEntry:
    """Rewrite an entry on disk with its hash and metadata made to match, as someone who
    knows how the log is kept would."""
    entry = AuditEntry.from_document(stored_document(store, seq))
    draft = AuditEntry(**{**entry.to_json(), **changes})
    forged = AuditEntry(**{**draft.to_json(), "hash": draft.computed_hash()})
    set_document(store, seq, forged.document())
    set_metadata(store, seq, "hash", forged.hash)
    for key, value in changes.items():
        if key in ("user", "action", "at"):
            set_metadata(store, seq, key, value)
    return forged


def test_an_entry_rewritten_with_a_new_hash_breaks_the_link_to_the_next(tmp_path):
    store = tmp_path / "store"
    a_day(log_at(store))
    rewrite(store, 2, user="mallory@example.com")
    code, line, _ = verify_in_a_new_process(store, tmp_path)
    assert (code, line["broken"]) == (1, 3)
    assert line["problem"] == ("entry 3 does not follow entry 2: its prev is not entry 2's "
                               "hash")


def test_the_newest_entry_rewritten_with_its_hash_changes_only_the_head(tmp_path):
    """What a hash chain cannot show by itself: the newest entry replaced together with its
    hash verifies, but the head is no longer the one --verify printed before."""
    store = tmp_path / "store"
    a_day(log_at(store))
    code, kept, _ = verify_in_a_new_process(store, tmp_path)
    assert code == 0
    forged = rewrite(store, 4, detail="Decided not met.")
    code, now, _ = verify_in_a_new_process(store, tmp_path)
    assert (code, now["ok"], now["entries"]) == (0, True, 5)
    assert now["head"] == forged.hash != kept["head"]


def test_an_entry_deleted_through_chromadb_fails_verify_naming_the_gap(tmp_path, capsys):
    store = tmp_path / "store"
    log = log_at(store)
    a_day(log)
    log._collection(create=False).delete(ids=[record_id(2)])  # chromadb's own delete

    code, line, err = verify_in_a_new_process(store, tmp_path)
    assert (code, line["entries"], line["broken"]) == (1, 4, 2)
    assert line["problem"] == "entry 2 is missing: entry 3 follows entry 1"
    assert "entry 2 is missing" in error_message(err)

    # Appending goes on after the newest entry; the gap stays named.
    added = log_at(store).append("alice@example.com", "logout")
    assert added.seq == 5 and added.prev == log.entries()[-2].hash
    code, line, _ = verify_in_a_new_process(store, tmp_path)
    assert (code, line["entries"], line["broken"]) == (1, 5, 2)


def test_entries_deleted_with_sql_fail_verify_naming_the_first_gap(tmp_path):
    store = tmp_path / "store"
    a_day(log_at(store))
    for seq in (0, 3):
        assert sql(store, f"DELETE FROM embedding_metadata WHERE id = {ROW}",
                   record_id(seq)) > 0
        assert sql(store, "DELETE FROM embeddings WHERE embedding_id = ?", record_id(seq)) == 1
    code, line, _ = verify_in_a_new_process(store, tmp_path)
    assert (code, line["entries"], line["broken"]) == (1, 3, 0)
    assert line["problem"] == "entry 0 is missing: the log starts at entry 1"
    assert [e.seq for e in log_at(store).entries()] == [1, 2, 4]
    assert log_at(store).append("alice@example.com", "logout").seq == 5


def test_an_entry_whose_text_is_no_entry_is_refused_by_the_listing(tmp_path, capsys):
    store = tmp_path / "store"
    a_day(log_at(store))
    set_document(store, 1, "nothing to see")
    code, out, err = run_main(capsys, "--store", store, "audit", clear=True)
    assert (code, out) == (1, "")
    message = error_message(err)
    assert "entry 1" in message and "--verify" in message
    code, line, _ = verify_in_a_new_process(store, tmp_path)
    assert (code, line["broken"], line["problem"]) == (
        1, 1, "entry 1 was changed: its text is not an entry")


# Processes ---------------------------------------------------------------------------------


def append_in_turn(store: str, name: str, count: str, folder: str) -> int:
    """In a child process: open the store, say so, wait for the word, append `count` entries
    as `name` as fast as it can."""
    log = log_at(Path(store))
    log.entries()
    (Path(folder) / f"ready-{name}").touch()
    while not (Path(folder) / "go").exists():
        time.sleep(0.005)
    for i in range(int(count)):
        log.append(f"{name}@example.com", "view", detail=f"{name} {i}")
    return 0


def test_two_processes_appending_at_once_lose_nothing(tmp_path):
    """Both start on a store without a log: the first appends make its collection at once."""
    store = tmp_path / "store"
    opened = EvidenceStore(Settings(store=store))
    assert opened.client is not None and opened.exists()  # the store, without a log yet
    children = [warm.Started("tests.test_audit_log.append_in_turn",
                             [str(store), name, "40", str(tmp_path)],
                             env=environment(), cwd=REPO)
                for name in ("alice", "bob")]
    while not all((tmp_path / f"ready-{n}").exists() for n in ("alice", "bob")):
        assert all(c.process.exitcode is None for c in children)
        time.sleep(0.01)
    (tmp_path / "go").touch()
    done = [child.wait() for child in children]
    assert [d.returncode for d in done] == [0, 0], [d.stderr for d in done]

    entries = log_at(store).entries()
    assert [e.seq for e in entries] == list(range(80))
    for name in ("alice", "bob"):
        assert [e.detail for e in entries if e.user == f"{name}@example.com"] == [
            f"{name} {i}" for i in range(40)]
    code, line, _ = verify_in_a_new_process(store, tmp_path)
    assert (code, line) == (0, {"ok": True, "entries": 80, "head": entries[-1].hash})


APPENDING_FOREVER = """
import sys
from pathlib import Path
from core.config import Settings
from core.store import EvidenceStore

log = EvidenceStore(Settings(store=Path(sys.argv[1]))).audit_log()
i = 0
while True:
    entry = log.append("alice@example.com", "view", vendor="acme", detail=f"view {i}")
    print(entry.seq, flush=True)
    i += 1
"""


def test_a_process_killed_while_appending_leaves_a_log_that_verifies(tmp_path):
    store = tmp_path / "store"
    script = tmp_path / "appending.py"
    script.write_text(APPENDING_FOREVER, encoding="utf-8")
    child = subprocess.Popen([sys.executable, str(script), str(store)], cwd=REPO,
                             env={**environment(), "PYTHONPATH": str(REPO)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for appended, _line in enumerate(child.stdout, 1):  # it appends until it is killed
        if appended == 25:
            child.send_signal(signal.SIGKILL)
            break
    child.stdout.close()
    errors = child.stderr.read()
    child.stderr.close()
    assert child.wait() == -signal.SIGKILL, errors

    code, line, _ = verify_in_a_new_process(store, tmp_path)
    assert code == 0 and line["ok"] and line["entries"] >= 25
    entries = log_at(store).entries()
    assert [e.detail for e in entries] == [f"view {i}" for i in range(len(entries))]

    added = log_at(store).append("bob@example.com", "login")
    assert added.seq == len(entries) and added.prev == line["head"]
    code, again, _ = verify_in_a_new_process(store, tmp_path)
    assert (code, again) == (0, {"ok": True, "entries": len(entries) + 1, "head": added.hash})


KILLED_AT_THE_ADD = """
import os, signal, sys
from pathlib import Path
import core.store.writes as writes
from core.config import Settings
from core.store import EvidenceStore

when = sys.argv[2]
real = writes.apply

def apply(collection, operation, **arguments):
    if collection.name == "workbench__audit" and operation == "add":
        if when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        real(collection, operation, **arguments)
        os.kill(os.getpid(), signal.SIGKILL)
    return real(collection, operation, **arguments)

writes.apply = apply
EvidenceStore(Settings(store=Path(sys.argv[1]))).audit_log().append("mallory", "export")
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_process_killed_at_its_add_leaves_the_whole_entry_or_none(tmp_path, when):
    store = tmp_path / "store"
    before = a_day(log_at(store))
    script = tmp_path / "killed.py"
    script.write_text(KILLED_AT_THE_ADD, encoding="utf-8")
    done = warm.run_script(script, str(store), when, env=environment(), cwd=REPO)
    assert done.returncode == -signal.SIGKILL, done.stderr

    entries = log_at(store).entries()
    assert entries[:5] == before
    if when == "before":
        assert len(entries) == 5
    else:
        [added] = entries[5:]
        assert (added.seq, added.user, added.action, added.prev) == (
            5, "mallory", "export", before[-1].hash)
    code, line, _ = verify_in_a_new_process(store, tmp_path)
    assert (code, line["entries"], line["head"]) == (0, len(entries), entries[-1].hash)


@pytest.mark.server
def test_two_clients_of_one_server_append_to_one_chain(tmp_path):
    server = ChromaServer(tmp_path / "server-data")
    try:
        settings = Settings(chroma_host="127.0.0.1", chroma_port=server.port,
                            store=tmp_path / "unused")
        first, second = (EvidenceStore(settings).audit_log() for _ in range(2))
        for i in range(5):
            first.append("alice@example.com", "view", detail=f"alice {i}")
            second.append("bob@example.com", "view", detail=f"bob {i}")
        entries = first.entries()
        assert [e.seq for e in entries] == list(range(10))
        assert [e.user.split("@")[0] for e in entries] == ["alice", "bob"] * 5
        check = second.verify()
        assert (check.ok, check.count, check.head) == (True, 10, entries[-1].hash)
        assert not (tmp_path / "unused").exists()
    finally:
        server.stop()


def test_verify_reads_every_entry_once_and_in_order(tmp_path, monkeypatch):
    """Past one page of records, the chain is still checked whole, in order."""
    monkeypatch.setattr(audit_log, "PAGE_SIZE", 4)
    log = log_at(tmp_path / "store")
    for i in range(11):
        log.append("alice@example.com", "view", detail=f"view {i}")
    assert [e.detail for e in log.entries()] == [f"view {i}" for i in range(11)]
    check = log.verify()
    assert (check.ok, check.count) == (True, 11)
