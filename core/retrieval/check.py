"""`evidence check`: whether a vendor's lexical index agrees with its store, and what an
interrupted write left in the store; by default both are mended where that is safe.

The index is derived from the store, so every difference is either `behind` (the index's own
records of versions and fingerprints show it, and the next sync mends it) or `drift` (the rows
disagree with those records, or the index settled at the store's current generation, so no
search looks again; only a rebuild mends it). The store is checked for what the same one read
of its records and manifest shows. Repairs run under the store's write lock, so no ingest is
half-way; what only a round's own files can complete is reported, not touched. What the index
must hold, and each repair in turn: docs/reliability.md, section 2."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from core.config import Settings
from core.errors import StoreError
from core.retrieval.lexical import (
    DIFFERENCES,
    LexicalFindings,
    LexicalIndex,
    compare_index,
    index_path,
    read_index,
)
from core.retrieval.run import StrategyRunner
from core.store import EvidenceStore, VendorStore
from core.store.audit import (
    LEFTOVERS,
    StoreFindings,
    StorePlan,
    StoreRead,
    read_store,
    repair_store,
    store_findings,
)


class Repairs(BaseModel):
    """What the check changed."""

    lexical: str | None = Field(None, description="'synced' or 'rebuilt', None if untouched")
    leftover_chunks_deleted: int = 0
    markers_deleted: int = 0
    tombstones_deleted: int = 0
    written_again: int = Field(0, description="records the vector search did not find by "
                               "their own vector, written again as they are")


class SearchFindings(BaseModel):
    """Whether the vector search finds every record of the vendor by its own vector."""

    records: int = 0
    unreachable: int = Field(0, description="records the vector search does not return for "
                             "their own vector (found by `get` alone)")


class CheckReport(BaseModel):
    """`evidence check`'s JSON line."""

    vendor_id: str
    ok: bool
    dry_run: bool
    lexical: LexicalFindings
    store: StoreFindings
    search: SearchFindings = Field(default_factory=SearchFindings)
    repaired: Repairs
    remaining: dict[str, int] = Field(
        default_factory=dict, description="what still differs after the repair (with "
        "--dry-run: what a repair would still leave), by the keys above")
    to_complete: list[str] = Field(default_factory=list,
                                   description="one sentence per thing left, with the command")

    def text(self) -> str:
        """The report for people."""
        lex, store = self.lexical, self.store
        state = "consistent" if self.ok else "NOT consistent"
        lines = [f"Vendor {self.vendor_id}: {state}"
                 + (" (nothing changed: --dry-run)." if self.dry_run else ".")]
        if lex.exists:
            lines.append(
                f"Lexical index {lex.path}: {lex.rows} rows, "
                f"{'settled' if lex.settled else 'not settled'} at the store's generation; "
                f"missing {lex.missing}, extra {lex.extra}, stale {lex.stale}, withdrawn "
                f"{lex.withdrawn}, full-text mismatches {lex.fts_mismatch}, records "
                f"{lex.records}; lingering {lex.lingering}; behind the store {lex.behind}, "
                f"drift {lex.drift}.")
        else:
            lines.append(f"Lexical index {lex.path}: not built yet (the first hybrid search "
                         "builds it).")
        lines.append(
            f"Store: leftover chunks {store.leftover_chunks}, withdrawn markers "
            f"{store.withdrawn_markers}, tombstones {store.tombstones}, links naming no "
            f"response {store.links_without_response}, links not as stored "
            f"{store.links_not_as_stored}, responses without a link "
            f"{store.responses_without_link}, unfinished replacements "
            f"{store.unfinished_replacements}.")
        lines.append(f"Vector search: {self.search.records} records, "
                     f"{self.search.unreachable} not found by their own vector.")
        done = self.repaired
        repairs = [f"the lexical index {done.lexical}" if done.lexical else "",
                   _count(done.leftover_chunks_deleted, "leftover chunk", "deleted"),
                   _count(done.markers_deleted, "withdrawn answer's marker", "deleted"),
                   _count(done.tombstones_deleted, "tombstone", "deleted"),
                   _count(done.written_again, "record the vector search missed",
                          "written again")]
        if not self.dry_run:
            lines.append("Repaired: " + ("; ".join(r for r in repairs if r) or "nothing") + ".")
        lines += [f"To do: {sentence}" for sentence in self.to_complete]
        return "\n".join(lines)


def _count(n: int, what: str, done: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'} {done}" if n else ""


# The check ---------------------------------------------------------------------------------

def check_vendor(store: EvidenceStore, settings: Settings, runner: StrategyRunner,
                 vendor_id: str, *, repair: bool = True) -> CheckReport:
    """Compare the vendor's lexical index and store; with `repair`, under the store's write
    lock, mend what is safe to mend (see the module's docstring) and compare again."""
    vendor = store.open_vendor(vendor_id)
    path = index_path(settings, vendor.vendor_id)
    collection_id = vendor.collection_id
    repairs = Repairs()
    if not repair:
        read = read_store(vendor)
        plan = store_findings(vendor.vendor_id, read)
        lexical = compare_index(path, read_index(path), read, collection_id)
        search, _ = _search_findings(vendor)
        remaining = _remaining(lexical, plan.findings, search, after_repair=False)
        return _report(vendor.vendor_id, lexical, plan, repairs, remaining, search,
                       dry_run=True)
    with store.write_lock():
        store.recount(vendor.vendor_id)  # the register records what the check leaves
        read = read_store(vendor)
        plan = store_findings(vendor.vendor_id, read)
        lexical = compare_index(path, read_index(path), read, collection_id)
        if plan.leftover_ids or plan.marker_ids or plan.tombstone_ids:
            (repairs.leftover_chunks_deleted, repairs.markers_deleted,
             repairs.tombstones_deleted) = repair_store(vendor, plan)
            read = read_store(vendor)
        after_plan = store_findings(vendor.vendor_id, read)
        index = read_index(path)
        now = compare_index(path, index, read, collection_id)
        if index is not None and (now.differences or now.lingering or not now.settled):
            repairs.lexical = _repair_index(settings, runner, vendor, read, path, collection_id,
                                            now)
            now = compare_index(path, read_index(path), read, collection_id)
        search, unreachable = _search_findings(vendor)
        left = search
        if unreachable:
            vendor.write_again(unreachable)
            repairs.written_again = len(unreachable)
            left, _ = _search_findings(vendor)  # searched again: what writing them mended
        remaining = _remaining(now, after_plan.findings, left, after_repair=True)
    return _report(vendor.vendor_id, lexical, plan, repairs, remaining, search, dry_run=False,
                   after=after_plan.findings)


def _search_findings(vendor: VendorStore) -> tuple[SearchFindings, list[str]]:
    """The vendor's records searched by their own vectors: the findings, and the ids the
    search did not return."""
    unreachable = vendor.unreachable_by_search()
    return SearchFindings(records=vendor.count_chunks(), unreachable=len(unreachable)), unreachable


def _repair_index(settings: Settings, runner: StrategyRunner, vendor: VendorStore,
                  read: StoreRead, path: Any, collection_id: str, found: LexicalFindings
                  ) -> str | None:
    """Sync the index in full (its own records against the store) and, if its rows still
    differ, rebuild it; then settle it at the store's generation as a search would."""
    done: str | None = None
    if found.differences or found.lingering:
        index = LexicalIndex.for_vendor(settings, vendor, read.versions)
        try:
            if index.sync().changed:
                done = "synced"
        except StoreError:  # a damaged file the sync cannot write: the rebuild drops it
            pass
        if compare_index(path, read_index(path), read, collection_id).differences:
            index.rebuild()
            done = "rebuilt"
    runner.lexical(vendor, read.versions, read.generation)
    return done


def _remaining(lexical: LexicalFindings, store: StoreFindings, search: SearchFindings, *,
               after_repair: bool) -> dict[str, int]:
    """What still differs: after a repair, every lexical difference and every store leftover;
    with --dry-run, the drift (a sync mends the rest) and every store leftover."""
    remaining = ({name: getattr(lexical, name) for name in DIFFERENCES} if after_repair
                 else {"drift": lexical.drift})
    remaining.update({name: getattr(store, name) for name in LEFTOVERS})
    remaining["unreachable_by_search"] = search.unreachable
    return {name: n for name, n in remaining.items() if n}


def _report(vendor_id: str, lexical: LexicalFindings, plan: StorePlan, repairs: Repairs,
            remaining: dict[str, int], search: SearchFindings, *, dry_run: bool,
            after: StoreFindings | None = None) -> CheckReport:
    store = plan.findings
    left = after or store
    to_complete: list[str] = []
    if dry_run and store.leftover_chunks:
        to_complete.append(
            f"{store.leftover_chunks} chunk(s) of {', '.join(store.leftover_documents)} belong "
            "to versions the manifest does not name; `evidence check --vendor "
            f"{vendor_id}` deletes them (ingesting the file again writes its version whole).")
    if dry_run and (store.withdrawn_markers or store.tombstones):
        to_complete.append(
            f"A replaced round left {store.withdrawn_markers} marker(s) and "
            f"{store.tombstones} tombstone(s) of withdrawn answers; `evidence check --vendor "
            f"{vendor_id}` deletes them, as the replacement's last steps would.")
    what = {
        "links_without_response": "link(s) name no stored response",
        "links_not_as_stored": "link(s) name a response stored otherwise than they record",
        "unfinished_replacements": "answer(s) are withdrawn by a replacement that did not "
                                   "commit",
        "responses_without_link": "response(s) have no link",
    }
    for kind, sentence in what.items():
        rounds = plan.unfinished[kind] if getattr(left, kind) else []
        if rounds:
            shown = ", ".join(map(str, rounds))
            to_complete.append(
                f"In round(s) {shown} {getattr(left, kind)} {sentence}; run `evidence ingest "
                f"questionnaire` again with the file(s) of round(s) {shown} of vendor "
                f"'{vendor_id}' (with --replace if it was a replacement).")
    if dry_run and search.unreachable:
        to_complete.append(
            f"The vector search does not find {search.unreachable} record(s) by their own "
            f"vector; `evidence check --vendor {vendor_id}` writes them again as they are.")
    if not dry_run and "unreachable_by_search" in remaining:
        to_complete.append(
            f"The vector search still misses {remaining['unreachable_by_search']} record(s) "
            "written again; export the vendor's files and ingest them into a new store.")
    if dry_run and lexical.drift:
        to_complete.append(
            f"The lexical index disagrees with its own records in {lexical.drift} place(s); "
            f"`evidence check --vendor {vendor_id}` rebuilds it from the store.")
    if not dry_run and any(name in remaining for name in DIFFERENCES):
        to_complete.append(
            f"The lexical index still differs from the store after its rebuild; delete "
            f"{lexical.path} (it is derived from the store) and run `evidence check --vendor "
            f"{vendor_id}` again.")
    return CheckReport(vendor_id=vendor_id, ok=not remaining, dry_run=dry_run,
                       lexical=lexical, store=store, search=search, repaired=repairs,
                       remaining=remaining,
                       to_complete=to_complete)
