"""Control implementation statements (core/ingest/rounds/control_statements.py) as rounds keyed
by control id, through the command: OpenControl components (a system's family files, the file
merged from them) and OSCAL system security plans and component definitions in JSON, YAML and
XML, for `ingest questionnaire` and `ingest package`; the files of one system make one round,
and a file that is not what it claims is refused in one sentence naming its line.

The files are built from the layout facts of published ones (tests/support/control_statements
.py), with words of our own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.workbench import Workbench
from tests.fakes import point_the_command_at
from tests.support.cli import error_message, run_json
from tests.support.control_statements import (
    ACCESS,
    AUDIT,
    OSCAL_NAMESPACE,
    TRAINING,
    benchmark_definition,
    definition_model,
    merged_file,
    opencontrol_tree,
    plan_json,
    plan_model,
    plan_xml,
    plan_yaml,
    policy_file,
)
from tests.support.snapshot import store_snapshot

SYSTEM = "Example Ledger Platform"
FAMILIES = {"AC-Access_Control": ACCESS, "AU-Audit_and_Accountability": AUDIT}

OPENCONTROL_ANSWERS = {
    "AC-2": "Implementation status: partial.\n\n"
            "Part a: Account types are defined in the identity runbook kept by the platform "
            "team.\n\n"
            "Part b: Each team lead approves the accounts of their team.\n\n"
            "Part c: Accounts unused for 45 days are locked by a nightly job.",
    "AC-11 (1)": "Implementation status: complete.\n\n"
                 "Idle consoles blank the screen with a neutral pattern after ten minutes.",
    "AC-14": "Implementation status: not applicable.",
    "AU-9": "Implementation status: planned.\n\n"
            "Audit records will be copied to a write-once bucket from the next release.",
    "AU-9 (2)": "Implementation status: none.",
}
PLAN_ANSWERS = {
    "ac-2": "Implementation status: implemented.\n\n"
            "Part a (This System): Account types are listed in the access standard.\n\n"
            "Part b (This System): The service owner approves every account.\n\n"
            "Part b (Managed Database): Database roles are granted by change ticket.",
    "ac-2.1": "Implementation status: partial.\n\n"
              "Accounts are disabled 30 days after the last login.",
    "au-9": "Implementation status: planned.",
}


@pytest.fixture
def cli(workbench: Workbench, monkeypatch) -> Workbench:
    point_the_command_at(workbench, monkeypatch)
    return workbench


def stored(bench: Workbench, round_number: int, vendor: str = "acme") -> dict[str, dict]:
    rows = bench.browse_chunks(vendor, doc_type=f"followup_response:{round_number}",
                               limit=10_000)
    return {row["questionnaire_id"]: row for row in rows}


def dry_run(capsys, *files, vendor: str = "acme") -> tuple[list[dict], str]:
    code, lines, err = run_json(capsys, "ingest", "questionnaire", *files, "--vendor",
                                vendor, "--round", "1", "--dry-run")
    assert code == 0, err
    return lines, err


def test_family_files_of_one_system_are_one_round_with_one_answer_per_control(
        cli, capsys, tmp_path):
    tree = opencontrol_tree(tmp_path / "ledger", SYSTEM, FAMILIES)
    files = sorted(tree.glob("policies/*/component.yaml"))
    code, lines, err = run_json(capsys, "ingest", "questionnaire", *files, "--vendor", "acme",
                                "--round", "2", "--timestamp", "2025-03-01T09:00:00Z")
    assert code == 0, err
    assert lines == [{"vendor_id": "acme", "round_number": 2, "indexed_count": 5}]
    assert cli.status("acme")[0].rounds == [2]
    answers = stored(cli, 2)
    assert {i: row["answer_text"] for i, row in answers.items()} == OPENCONTROL_ANSWERS
    first = answers["AC-2"]
    # The question is the control id and its title; the answer names its file and line.
    assert first["question_text"] == "AC-2 Account Management"
    assert first["origin_file"] == "policies/AC-Access_Control/component.yaml"
    assert first["origin_row"] == 6
    assert json.loads(first["origin_extras"]) == {"implementation_status": "partial",
                                                  "standard": "NIST-800-53"}
    assert answers["AU-9"]["origin_file"] == "policies/AU-Audit_and_Accountability/component.yaml"
    assert f"2 files of {SYSTEM}" in err


def test_a_dry_run_shows_the_round_and_writes_nothing(cli, capsys, tmp_path):
    tree = opencontrol_tree(tmp_path / "ledger", SYSTEM, FAMILIES)
    before = store_snapshot(cli)
    [line], err = dry_run(capsys, *sorted(tree.glob("policies/*/component.yaml")))
    assert line["became"] == "round" and line["answers"] == 5
    assert line["layout"] == "OpenControl component (NIST-800-53)"
    assert [(p["id"], p["row"], p["answer"]) for p in line["preview"]] == [
        (i, row, OPENCONTROL_ANSWERS[i]) for i, row in (("AC-2", 6), ("AC-11 (1)", 23),
                                                      ("AC-14", 32))]
    assert "a dry run; nothing was written" in err
    assert store_snapshot(cli) == before and cli.vendor_ids() == []


def test_the_manifest_given_alone_reads_every_component_it_lists(cli, capsys, tmp_path):
    tree = opencontrol_tree(tmp_path / "ledger", SYSTEM, FAMILIES,
                            unlisted={"AT-Awareness_and_Training": TRAINING})
    [line], _ = dry_run(capsys, tree / "opencontrol.yaml")
    assert line["answers"] == 5  # the family commented out of the manifest is not read


def test_the_merged_file_with_a_second_document_is_read_whole(cli, capsys, tmp_path):
    merged = tmp_path / "build" / "component.yaml"
    merged.parent.mkdir()
    merged.write_text(merged_file("Example Ledger 2.x", ACCESS, AUDIT), encoding="utf-8")
    [line], err = dry_run(capsys, merged)
    assert line["answers"] == 5 and line["layout"] == "OpenControl component (NIST-800-53)"
    assert line["preview"][0]["answer"] == OPENCONTROL_ANSWERS["AC-2"]
    assert "1 file" not in err and "from the file" in err


@pytest.mark.parametrize("form", ["json", "yaml", "xml"])
def test_a_system_security_plan_gives_the_same_answers_in_each_form(cli, capsys, tmp_path,
                                                                    form):
    writer = {"json": plan_json, "yaml": plan_yaml, "xml": plan_xml}[form]
    plan = tmp_path / f"ledger-ssp.{form}"
    plan.write_text(writer(), encoding="utf-8")
    [line], _ = dry_run(capsys, plan)
    assert line["layout"] == "OSCAL system security plan 1.0.4"
    assert {p["id"]: p["answer"] for p in line["preview"]} == PLAN_ANSWERS
    assert all(p["question"].startswith(p["id"]) for p in line["preview"])


def test_the_plan_in_three_forms_is_one_system_read_once(cli, capsys, tmp_path):
    files = []
    for form, writer in (("json", plan_json), ("yaml", plan_yaml), ("xml", plan_xml)):
        files.append(tmp_path / f"ledger-ssp.{form}")
        files[-1].write_text(writer(), encoding="utf-8")
    code, lines, err = run_json(capsys, "ingest", "questionnaire", *files, "--vendor", "acme",
                                "--round", "1")
    assert code == 0, err
    assert lines == [{"vendor_id": "acme", "round_number": 1, "indexed_count": 3}]
    assert {i: r["answer_text"] for i, r in stored(cli, 1).items()} == PLAN_ANSWERS
    assert (f"{files[1]} is {files[0]} in another form (the same OSCAL document, "
            "eeeeeeee-0000-4000-8000-000000000001); it was read once") in err
    extras = json.loads(stored(cli, 1)["ac-2"]["origin_extras"])
    assert extras == {"implementation_status": "implemented",
                      "component": "This System; Managed Database"}


def test_two_versions_of_one_plan_join_and_a_disagreement_is_refused(cli, capsys, tmp_path):
    first, second = tmp_path / "ssp-a.json", tmp_path / "ssp-b.json"
    first.write_text(plan_json(), encoding="utf-8")
    later = plan_model()
    later["system-security-plan"]["uuid"] = "eeeeeeee-0000-4000-8000-000000000002"
    requirements = later["system-security-plan"]["control-implementation"][
        "implemented-requirements"]
    # The same words in other markup say the same: the later version's ac-2.1 is read once.
    words = requirements[1]["by-components"][0]
    words["description"] = words["description"].replace("30 days", "**30 days**")
    second.write_text(plan_json(later), encoding="utf-8")
    lines, err = dry_run(capsys, first, second)
    assert [line["answers"] for line in lines] == [3]
    assert f"{second} says the same of controls ac-2, ac-2.1, au-9 as {first}" in err
    requirements[2]["props"][0]["value"] = "implemented"
    second.write_text(plan_json(later), encoding="utf-8")
    code, _, err = run_json(capsys, "ingest", "questionnaire", first, second, "--vendor",
                            "acme", "--round", "1")
    assert code == 2
    message = error_message(err)
    assert message.startswith(f"{second}, line ")
    assert "control au-9 is described again, differently from" in message
    assert cli.vendor_ids() == []


def test_a_component_definition_keeps_its_own_ids_and_fills_its_parameters(cli, capsys,
                                                                          tmp_path):
    definition = tmp_path / "queue-cd.json"
    definition.write_text(json.dumps(definition_model()), encoding="utf-8")
    benchmark = tmp_path / "benchmark-cd.json"
    benchmark.write_text(json.dumps(benchmark_definition()), encoding="utf-8")
    lines, _ = dry_run(capsys, definition, benchmark)
    assert [line["layout"] for line in lines] == ["OSCAL component definition 1.1.2",
                                                 "OSCAL component definition 1.0.2"]
    assert {p["id"]: p["answer"] for p in lines[0]["preview"]} == {
        "sc-8": "Messages travel over TLS.\n\n"
                "The queue protects the confidentiality of messages.",
        "sc-28.1": "Implementation status: implemented.\n\n"
                   "Queued messages are encrypted on disk."}
    assert {p["id"]: p["answer"] for p in lines[1]["preview"]} == {
        "CIS-1.1.1": "Implementation status: planned.",
        "CIS-1.2.1": "Implementation status: planned."}


def test_plain_yaml_values_are_read_as_written(cli, capsys, tmp_path):
    # YAML would read 1.10 as the number 1.1 and No as false: these files hold text.
    family = tmp_path / "component.yaml"
    family.write_text("- control_key: 1.10\n  implementation_status: No\n  narrative:\n"
                      "    - text: Yes\n", encoding="utf-8")
    [line], _ = dry_run(capsys, family)
    assert [(p["id"], p["answer"]) for p in line["preview"]] == [
        ("1.10", "Implementation status: No.\n\nYes")]
    assert line["layout"] == "OpenControl component"


def test_statement_files_need_a_vendor_and_a_round(cli, capsys, tmp_path):
    plan = tmp_path / "ssp.yaml"
    plan.write_text(plan_yaml(), encoding="utf-8")
    code, _, err = run_json(capsys, "ingest", "questionnaire", plan)
    assert code == 2
    assert error_message(err) == (
        f"{plan} is an OSCAL system security plan (control implementation statements); give "
        "--vendor and --round for it (and --timestamp for when it was answered, default "
        "now).")


def test_json_and_yaml_of_other_shapes_keep_their_old_reading(cli, capsys, tmp_path):
    payload = tmp_path / "round_1.json"
    payload.write_text(json.dumps({
        "vendor_id": "acme", "round_number": 1, "timestamp": "2025-01-01T00:00:00Z",
        "responses": [{"criterion_question_text": "Is data encrypted?",
                       "question_text": "Is data encrypted at rest?",
                       "answer_text": "Yes, with AES-256."}]}), encoding="utf-8")
    code, lines, err = run_json(capsys, "ingest", "questionnaire", payload)
    assert code == 0, err
    assert lines[0]["indexed_count"] == 1
    other = tmp_path / "settings.yaml"
    other.write_text("retries: 3\nhosts: [a, b]\n", encoding="utf-8")
    code, _, err = run_json(capsys, "ingest", "questionnaire", other)
    assert code == 2 and error_message(err).startswith(f"{other} is not valid JSON")


BROKEN = {
    # a YAML syntax error: the mapping's value is cut short by a tab
    "component.yaml": (
        "- control_key: AC-2\n  narrative:\n    - key: a\n\ttext: broken\n",
        "is not valid YAML", 4),
    # `satisfies` that is not a list, on the line of the key
    "merged.yaml": (
        "---\nname: Example\nschema_version: 3.0.0\nsatisfies:\n  control_key: AC-2\n",
        "is not a valid OpenControl component (line 4: satisfies is not a list)", 4),
    # a requirement without its control-id, on the line its object opens
    "ssp.json": (plan_json().replace('"control-id": "ac-2.1"', '"control": "ac-2.1"'),
                 "is not a valid OSCAL system security plan", None),
    # JSON that opens as a plan but cannot be read: refused as JSON, with its line
    "broken.json": ('{"system-security-plan": {\n  "uuid": "x",\n  "metadata": }\n}\n',
                    "is not valid JSON", 3),
    # an end tag that does not match, named where it stands
    "ssp.xml": (plan_xml().replace("</system-characteristics>", "</system-characteristic>"),
                "is not well-formed XML (mismatched tag", None),
    # a requirement without its control-id, on the line of its element
    "no-id.xml": (plan_xml().replace('control-id="au-9"', 'id="au-9"'),
                  "is not a valid OSCAL system security plan", None),
    # an alias repeats its anchor's value unwritten: refused, with the alias's line
    "alias.yaml": ("- control_key: AC-2\n  narrative: &parts\n    - text: Reviewed.\n"
                   "- control_key: AC-3\n  narrative: *parts\n",
                   "uses a YAML alias (*parts at line 5)", 5),
    # a document type declaring an entity: refused before anything is expanded
    "doctype.xml": ('<?xml version="1.0"?>\n<!DOCTYPE x [\n<!ENTITY a "aaaa">\n]>\n'
                    f'<system-security-plan xmlns="{OSCAL_NAMESPACE}"/>',
                    "declares a document type or entities (line 2)", 2),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_malformed_file_is_one_sentence_naming_its_line_and_nothing_is_written(
        cli, capsys, tmp_path, name):
    text, said, line = BROKEN[name]
    broken = tmp_path / name
    broken.write_text(text, encoding="utf-8")
    rows = text.splitlines()
    if name == "ssp.json":  # the line the requirement's object opens on, above its uuid
        line = next(n for n, x in enumerate(rows) if "aaaaaaaa-0000-4000-8000-000000000001" in x)
    if name == "ssp.xml":  # where the end tag does not match
        line = next(n for n, x in enumerate(rows, 1) if "</system-characteristic>" in x)
    if name == "no-id.xml":  # the requirement's element
        line = next(n for n, x in enumerate(rows, 1) if 'id="au-9"' in x)
    before = store_snapshot(cli)
    code, lines, err = run_json(capsys, "ingest", "questionnaire", broken, "--vendor", "acme",
                                "--round", "1")
    assert (code, lines) == (2, [])
    message = error_message(err)
    assert message.startswith(str(broken)) and said in message, message
    assert f"line {line}" in message, message
    assert store_snapshot(cli) == before and cli.vendor_ids() == []


def test_a_package_reads_an_opencontrol_tree_as_one_round(cli, capsys, tmp_path):
    package = tmp_path / "package"
    opencontrol_tree(package / "ledger", SYSTEM, FAMILIES,
                     unlisted={"AT-Awareness_and_Training": TRAINING})
    (package / "ledger-ssp.xml").write_text(plan_xml(), encoding="utf-8")
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", package)
    assert code == 0, err
    files = {line["file"]: line for line in lines}
    plan = files["ledger-ssp.xml"]  # the folder's own files come before its subfolders'
    assert (plan["became"], plan["layout"], plan["round_number"]) == (
        "round", "OSCAL system security plan 1.0.4", 1)
    head = files["ledger/opencontrol.yaml"]
    assert (head["became"], head["layout"], head["round_number"]) == (
        "round", "OpenControl component (NIST-800-53)", 2)
    assert head["reason"] == (
        f"control implementation statements (OpenControl component (NIST-800-53)) of {SYSTEM}:"
        " 5 answers from 2 files: ledger/policies/AC-Access_Control/component.yaml and "
        "ledger/policies/AU-Audit_and_Accountability/component.yaml; round 2.")
    for family in FAMILIES:
        member = files[f"ledger/policies/{family}/component.yaml"]
        assert (member["became"], member["round_number"], member["status"]) == (
            "round", 2, "added")
        assert member["reason"].startswith("read with ledger/opencontrol.yaml as one round")
    left = files["ledger/policies/AT-Awareness_and_Training/component.yaml"]
    assert left["became"] == "skipped" and "does not list" in left["reason"]
    assert files["ledger/header_opencontrol.yaml"]["became"] == "skipped"
    assert cli.status("acme")[0].rounds == [1, 2]
    assert set(stored(cli, 2)) == set(OPENCONTROL_ANSWERS)
    # The same package again: each round holds exactly these files' answers already.
    code, again, err = run_json(capsys, "ingest", "package", "--vendor", "acme", package)
    assert code == 0, err
    assert {line["file"]: line.get("status") for line in again if line["became"] == "round"
            } == dict.fromkeys([*(f"ledger/policies/{f}/component.yaml" for f in FAMILIES),
                                "ledger-ssp.xml", "ledger/opencontrol.yaml"], "unchanged")


def test_a_packages_components_no_manifest_gathers_are_one_round(cli, capsys, tmp_path):
    # Component folders sent without their opencontrol.yaml: the package's system, one round.
    package = tmp_path / "portal"
    opencontrol_tree(package, SYSTEM, FAMILIES)
    (package / "opencontrol.yaml").unlink()
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", package)
    assert code == 0, err
    rounds = [line for line in lines if line["became"] == "round"]
    assert {f"policies/{f}/component.yaml" for f in FAMILIES} <= {r["file"] for r in rounds}
    assert {r["round_number"] for r in rounds} == {1}
    assert cli.status("acme")[0].rounds == [1]
    assert set(stored(cli, 1)) == set(OPENCONTROL_ANSWERS)


def test_a_package_with_a_malformed_component_names_it_and_writes_nothing(cli, capsys,
                                                                          tmp_path):
    package = tmp_path / "package"
    tree = opencontrol_tree(package, SYSTEM, FAMILIES)
    (tree / "policies" / "AU-Audit_and_Accountability" / "component.yaml").write_text(
        policy_file("Audit", AUDIT[1:]) + "\n- control_key: AU-9\n  standard_key: NIST-800-53"
        "\n  implementation_status: planned\n  narrative:\n    - [a, b]\n", encoding="utf-8")
    code, lines, err = run_json(capsys, "ingest", "package", "--vendor", "acme", package)
    assert (code, lines) == (2, [])
    message = error_message(err)
    assert ("policies/AU-Audit_and_Accountability/component.yaml is not a valid OpenControl "
            "component (line 15: the narrative of AU-9 is not a list of parts (key, text))"
            ) in message
    assert cli.vendor_ids() == []


def test_the_question_is_the_control_id_and_the_catalogs_title():
    from core.ingest.rounds.control_statements import control_question

    assert control_question("AC-2 (1)") == "AC-2 (1) Automated System Account Management"
    assert control_question("CIS-1.1.1") == "CIS-1.1.1"  # no catalog of the project's


def test_a_real_layout_fact_the_family_file_has_no_name_and_its_system_names_it(tmp_path):
    from core.ingest.rounds.control_statements import questionnaire_groups
    from core.models import PayloadLimits

    tree = opencontrol_tree(tmp_path / "ledger", SYSTEM, FAMILIES)
    given = sorted(tree.glob("policies/*/component.yaml"))
    groups = questionnaire_groups(given, PayloadLimits())
    assert len({id(g) for g in groups.values()}) == 1
    assert next(iter(groups.values())).system == SYSTEM
    assert Path(groups[given[0]].manifest.path).name == "opencontrol.yaml"
