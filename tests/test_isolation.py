"""Each vendor's evidence lives in its own namespace: two vendors with near-identical documents
and answers to the same questions never see each other's evidence, under any strategy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import UnknownVendorError, UserInputError
from core.retrieval.strategies import STRATEGIES
from core.workbench import Workbench
from tests.conftest import AES_CRITERION
from tests.support.cli import run_main
from tests.support.payloads import response, round_payload
from tests.support.store import get_all

ALL_STRATEGIES = pytest.mark.parametrize("strategy", sorted(STRATEGIES))
KMS = {"acme": "AWS KMS", "globex": "Azure Key Vault"}
OTHER = {"acme": "globex", "globex": "acme"}
REWORDED = "Which cipher protects stored customer information?"


def documents(kms: str) -> dict[str, str]:
    return {
        "encryption_policy.md":
            f"The vendor shall encrypt data at rest using AES-256; keys are held in {kms}.",
        "key_management.md": f"Encryption keys for data at rest are rotated yearly in {kms}.",
        "backups.md": f"Backups hold data at rest sealed with AES-256 under keys from {kms}.",
    }


def write(folder: Path, docs: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    for name, text in docs.items():
        (folder / name).write_text(text + "\n", encoding="utf-8")
    return folder


def answer_round(vendor: str, round_number: int) -> dict:
    kms = KMS[vendor]
    return round_payload(round_number, [
        response(AES_CRITERION, f"Yes, AES-256 with keys in {kms} (round {round_number}).",
                 AES_CRITERION),
        response(REWORDED, f"AES-256 via {kms}.", AES_CRITERION),
        response("Where are keys held?", f"In {kms}."),
    ], vendor=vendor)


@pytest.fixture
def two_vendors(workbench, tmp_path) -> Workbench:
    for vendor in ("acme", "globex"):
        workbench.ingest_documents(vendor, [write(tmp_path / vendor, documents(KMS[vendor]))])
        workbench.ingest_questionnaire(answer_round(vendor, 1))
    workbench.ingest_documents("acme", [write(tmp_path / "acme-extra", {
        "laptops.md": "Laptop disks keep data at rest under AES-256 full disk encryption."})])
    workbench.ingest_documents("acme", [write(tmp_path / "acme-upload", {
        "kms_update.md": "The vendor moved data at rest keys to a dedicated AWS KMS account."})],
        doc_type="followup_document", round_number=2)
    workbench.ingest_questionnaire(answer_round("acme", 2))
    return workbench


def vendor_ids_of(bench: Workbench, vendor: str) -> set[str]:
    return set(get_all(bench.store.open_vendor(vendor).chunks)["ids"])


def trace_ids(trace) -> set[str]:
    hits = (list(trace.followups) + list(trace.hash_path or []) + list(trace.semantic_path or [])
            + [d.followup for d in trace.dropped_followups])
    candidates = list(trace.evidence) + list(trace.first_stage) + list(trace.reranked)
    return {h.id for h in hits} | {c.id for c in candidates}


@ALL_STRATEGIES
@pytest.mark.parametrize("vendor", ["acme", "globex"])
def test_retrieval_never_returns_the_other_vendors_evidence(two_vendors, strategy, vendor):
    own, other = vendor_ids_of(two_vendors, vendor), vendor_ids_of(two_vendors, OTHER[vendor])
    assert own and other and own.isdisjoint(other)

    trace = two_vendors.retrieve(vendor, AES_CRITERION, strategy)

    ids = trace_ids(trace)
    assert ids  # something was retrieved ...
    assert ids <= own  # ... and all of it is this vendor's
    assert ids.isdisjoint(other)
    dumped = json.dumps(trace.to_json_dict())
    assert KMS[OTHER[vendor]] not in dumped
    assert KMS[OTHER[vendor]] not in trace.prompt
    assert KMS[vendor] in trace.context
    assert trace.vendor_id == vendor
    assert all(c.metadata.get("vendor_id") == vendor for c in trace.first_stage)


@pytest.mark.parametrize("strategy", ["hash_extraction", "tiered", "precedence"])
def test_linked_followups_come_from_the_vendor_asked_for(two_vendors, strategy):
    for vendor in ("acme", "globex"):
        trace = two_vendors.retrieve(vendor, AES_CRITERION, strategy)
        assert trace.followups
        for hit in trace.followups:
            assert hit.id.startswith(f"followup-{vendor}-")
            assert KMS[vendor] in hit.answer_text
    acme = two_vendors.retrieve("acme", AES_CRITERION, "precedence")
    globex = two_vendors.retrieve("globex", AES_CRITERION, "precedence")
    assert [f.round_number for f in acme.followups] == [1, 2, 2]
    assert [f.round_number for f in globex.followups] == [1, 1]


def test_status_counts_only_each_vendors_own_evidence(two_vendors):
    acme, globex = two_vendors.status()

    assert acme.model_dump() == {
        "vendor_id": "acme", "documents": 5, "chunks": 5, "earlier_versions": 0,
        "followup_responses": 6,
        "rounds": [1, 2], "incomplete_chunks": 0,
        "by_type": {"followup_document": 1, "followup_response:1": 3,
                    "followup_response:2": 3, "tc_files": 4},
    }
    assert globex.model_dump() == {
        "vendor_id": "globex", "documents": 3, "chunks": 3, "earlier_versions": 0,
        "followup_responses": 3,
        "rounds": [1], "incomplete_chunks": 0,
        "by_type": {"followup_response:1": 3, "tc_files": 3},
    }
    assert two_vendors.status("globex") == [globex]
    assert two_vendors.status("acme") == [acme]


@ALL_STRATEGIES
def test_unknown_vendor_is_refused(two_vendors, strategy):
    with pytest.raises(UnknownVendorError, match="initech"):
        two_vendors.retrieve("initech", AES_CRITERION, strategy)
    assert two_vendors.vendor_ids() == ["acme", "globex"]


def test_status_of_an_unknown_vendor_is_refused_and_creates_nothing(two_vendors):
    with pytest.raises(UnknownVendorError, match="initech"):
        two_vendors.status("initech")
    assert two_vendors.vendor_ids() == ["acme", "globex"]


@pytest.mark.parametrize("clash", ["ACME", "Acme", "aCmE"])
def test_vendor_ids_differing_only_in_case_are_refused(two_vendors, tmp_path, clash):
    before = [s.model_dump() for s in two_vendors.status()]
    folder = write(tmp_path / f"clash-{clash}", {"other.md": "Data at rest uses AES-256."})

    with pytest.raises(UserInputError, match="acme"):
        two_vendors.ingest_documents(clash, [folder])
    with pytest.raises(UserInputError, match="acme"):
        two_vendors.ingest_documents(clash, [folder], doc_type="followup_document",
                                     round_number=3)
    payload = answer_round("acme", 3)
    payload["vendor_id"] = clash
    with pytest.raises(UserInputError, match="acme"):
        two_vendors.ingest_questionnaire(payload)
    with pytest.raises(UserInputError):
        two_vendors.retrieve(clash, AES_CRITERION)

    assert two_vendors.vendor_ids() == ["acme", "globex"]
    assert [s.model_dump() for s in two_vendors.status()] == before


# Through the command line and the dashboard ------------------------------------------------

@pytest.fixture
def cli_two_vendors(two_vendors, monkeypatch) -> Workbench:
    """The `evidence` command on the two-vendor store, with the fake embedder behind it."""
    from tests.fakes import FakeEmbedder

    monkeypatch.setattr("core.workbench.SentenceTransformerEmbedder",
                        lambda *args, **kwargs: FakeEmbedder())
    monkeypatch.setenv("EVIDENCE_STORE", str(two_vendors.settings.store))
    return two_vendors


@ALL_STRATEGIES
@pytest.mark.parametrize("vendor", ["acme", "globex"])
def test_the_command_line_never_prints_the_other_vendors_evidence(cli_two_vendors, capsys,
                                                                  strategy, vendor):
    own = vendor_ids_of(cli_two_vendors, vendor)
    for output_format in ("json", "xml", "prompt"):
        code, out, _ = run_main(capsys, "retrieve", "--vendor", vendor, "--criterion",
                                AES_CRITERION, "--strategy", strategy, "--format", output_format)
        assert code == 0
        assert KMS[vendor] in out
        assert KMS[OTHER[vendor]] not in out, output_format
    trace = json.loads(run_main(capsys, "retrieve", "--vendor", vendor, "--criterion",
                                AES_CRITERION, "--strategy", strategy)[1])
    shown = {f["id"] for f in trace["followups"]} | {e["id"] for e in trace["evidence"]}
    assert shown and shown <= own


def test_the_command_lines_status_reports_each_vendor_alone(cli_two_vendors, capsys):
    code, out, _ = run_main(capsys, "status", "--vendor", "globex")
    assert code == 0
    [line] = out.splitlines()
    assert json.loads(line)["vendor_id"] == "globex"
    assert json.loads(line)["rounds"] == [1]


def _page_text(at) -> str:
    """Everything a page shows: text elements, tables, code blocks and raw HTML."""
    parts = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "code", "metric",
                 "info", "warning", "error", "success", "text"):
        for element in getattr(at, kind):
            parts.append(str(getattr(element, "value", "")))
            parts.append(str(getattr(element, "label", "")))
    for table in at.dataframe:
        parts.append(table.value.to_csv())
    parts.extend(str(h.value) for h in at.get("html"))
    return "\n".join(parts)


@pytest.mark.parametrize("view", ["overview", "tiers", "rankings", "rounds", "context"])
@pytest.mark.parametrize("vendor", ["acme", "globex"])
def test_the_dashboard_never_shows_the_other_vendors_evidence(two_vendors, monkeypatch, view,
                                                              vendor):
    import streamlit as st

    from dashboard import resources
    from tests.dashboard.conftest import page

    monkeypatch.setattr(resources, "make_workbench", lambda: two_vendors)
    st.cache_resource.clear()
    st.cache_data.clear()
    try:
        at = page(view, vendor=vendor).run()
        assert not at.exception, at.exception
        text = _page_text(at)
        own, other = vendor_ids_of(two_vendors, vendor), vendor_ids_of(two_vendors,
                                                                        OTHER[vendor])
        assert KMS[vendor] in text or any(i in text for i in own)  # the page shows evidence
        assert KMS[OTHER[vendor]] not in text
        assert not [i for i in other if i in text]
    finally:
        st.cache_resource.clear()
        st.cache_data.clear()
