"""Control implementation statements laid out as compliance tools write them, with words of
our own:

- an OpenControl system: `opencontrol.yaml` naming the system and listing its component
  folders (some commented out), each family's `policies/<FAMILY>/component.yaml` a bare list
  of controls opened by a `## BEGINNING OF:` comment block; each control with `control_key`
  ("AC-11 (1)" for an enhancement), `standard_key`, `covered_by: []`,
  `implementation_status` and a narrative of keyed parts (a, b, c) or one unkeyed part,
  wrapped over lines in a `|` block;
- the file merged from every family: a `---` document with `name`, `schema_version` and
  `satisfies:` over a bare list at the left margin, a later family left as a second document;
- OSCAL component definitions and system security plans as one model written in JSON, YAML
  or XML (the OSCAL namespace, `<description><p>` markup, `<insert type="param">`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import yaml

OSCAL_NAMESPACE = "http://csrc.nist.gov/ns/oscal/1.0"


@dataclass(frozen=True)
class Control:
    """One OpenControl control: its parts are (key, text), key None for an unkeyed one."""

    key: str
    status: str | None
    parts: list[tuple[str | None, str]]


ACCESS = [
    Control("AC-2", "partial", [
        ("a", "Account types are defined in the\nidentity runbook kept by the platform team."),
        ("b", "Each team lead approves the accounts\nof their team."),
        ("c", "Accounts unused for 45 days are locked by a nightly job.")]),
    Control("AC-11 (1)", "complete", [
        (None, "Idle consoles blank the screen with a\nneutral pattern after ten minutes.")]),
    Control("AC-14", "not applicable", [(None, "")]),
]
AUDIT = [
    Control("AU-9", "planned", [
        (None, "Audit records will be copied to a\nwrite-once bucket from the next release.")]),
    Control("AU-9 (2)", "none", []),
]
TRAINING = [
    Control("AT-2", "complete", [
        ("a", "Staff take the security course when they join."),
        ("b", "The course is taken again every year.")]),
]


def _block(text: str, indent: int) -> str:
    pad = " " * indent
    return "|\n" + "".join(f"{pad}{line}\n" for line in text.split("\n"))


def control_entries(controls: list[Control]) -> str:
    """The bare list of controls, as a family's component.yaml and a merged file write it."""
    out = []
    for control in controls:
        lines = [f"- control_key: {control.key}", "  standard_key: NIST-800-53",
                 "  covered_by: []"]
        if control.status is not None:
            lines.append(f"  implementation_status: {control.status}")
        lines.append("  narrative:")
        for key, text in control.parts:
            if key is None:
                lines.append("    - text: " + _block(text, 8).rstrip("\n") if text
                             else "    - text:")
            else:
                lines.append(f"    - key: {key}")
                lines.append("      text: " + _block(text, 8).rstrip("\n"))
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)


def policy_file(family: str, controls: list[Control]) -> str:
    return (f"##\n## BEGINNING OF:\n## {family.upper()} CONTROLS\n##\n\n"
            + control_entries(controls))


def manifest(system: str, folders: list[str], commented: list[str] = ()) -> str:
    listed = [f"  - ./policies/{f}" for f in folders] + [f"#  - ./policies/{f}"
                                                         for f in commented]
    return (f'schema_version: "1.0.0"\nname: {system}\nmetadata:\n  description: {system}\n'
            "  maintainers:\n    - Example Maintainer <security@example.org>\n\n"
            "components:\n" + "\n".join(listed) + "\n\ndependencies:\n  standards:\n"
            "    - url: https://example.org/standards\n      revision: main\n")


def opencontrol_tree(root: Path, system: str, families: dict[str, list[Control]], *,
                     unlisted: dict[str, list[Control]] | None = None) -> Path:
    """A product folder: its opencontrol.yaml, each family's component.yaml (`unlisted`
    families are on disk but commented out of the manifest), and the header the merged file
    is built from."""
    root.mkdir(parents=True, exist_ok=True)
    everything = {**families, **(unlisted or {})}
    (root / "opencontrol.yaml").write_text(
        manifest(system, list(families), list(unlisted or {})), encoding="utf-8")
    for folder, controls in everything.items():
        (root / "policies" / folder).mkdir(parents=True, exist_ok=True)
        (root / "policies" / folder / "component.yaml").write_text(
            policy_file(folder.split("-", 1)[-1].replace("_", " "), controls),
            encoding="utf-8")
    (root / "header_opencontrol.yaml").write_text(
        f"---\ndocumentation_complete: false\nname: {system}\nschema_version: 3.0.0\n"
        "satisfies:\n", encoding="utf-8")
    return root


def merged_file(name: str, first: list[Control], second: list[Control]) -> str:
    """The file merged from every family: a header with `satisfies:` over the first
    families' list, and the last family left as a document of its own."""
    return (f"---\ndocumentation_complete: false\nname: {name}\nschema_version: 3.0.0\n"
            "satisfies:\n##\n## BEGINNING OF:\n## ACCESS CONTROL\n##\n\n"
            + control_entries(first) + "---\n##\n## BEGINNING OF:\n## AUDIT\n##\n\n"
            + control_entries(second))


# OSCAL -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ByComponent:
    component: str  # the component's uuid
    text: str  # may hold "{{ insert: param, ID }}"
    parameters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Requirement:
    control_id: str
    status: str | None = None
    whole: list[ByComponent] = field(default_factory=list)  # by-components of the control
    statements: list[tuple[str, list[ByComponent]]] = field(default_factory=list)


SYSTEM = "Example Ledger Service"
COMPONENTS = {"11111111-1111-4111-8111-111111111111": "This System",
              "22222222-2222-4222-8222-222222222222": "Managed Database"}
THIS, DATABASE = COMPONENTS
PLAN = [
    Requirement("ac-2", "implemented", statements=[
        ("ac-2_smt.a", [ByComponent(THIS, "Account types are listed in the access standard.")]),
        ("ac-2_smt.b", [ByComponent(THIS, "The service owner approves every account."),
                        ByComponent(DATABASE, "Database roles are granted by change ticket.")]),
    ]),
    Requirement("ac-2.1", "partial", whole=[
        ByComponent(THIS, "Accounts are disabled {{ insert: param, ac-2.1_prm_1 }} after the "
                          "last login.", {"ac-2.1_prm_1": "30 days"})]),
    Requirement("au-9", "planned"),
]


def plan_model(requirements: list[Requirement] = PLAN, system: str = SYSTEM,
               version: str = "1.0.4") -> dict:
    """A system security plan in OSCAL's JSON model."""
    def by(item: ByComponent, uid: str) -> dict:
        found = {"component-uuid": item.component, "uuid": uid, "description": item.text}
        if item.parameters:
            found["set-parameters"] = [{"param-id": k, "values": [v]}
                                       for k, v in item.parameters.items()]
        return found

    implemented = []
    for n, requirement in enumerate(requirements):
        entry: dict = {"uuid": f"aaaaaaaa-0000-4000-8000-{n:012d}",
                       "control-id": requirement.control_id}
        if requirement.status:
            entry["props"] = [{"name": "implementation-status", "ns": "https://example.org/ns",
                               "value": requirement.status}]
        if requirement.whole:
            entry["by-components"] = [by(b, f"bbbbbbbb-{n:04d}-4000-8000-{i:012d}")
                                      for i, b in enumerate(requirement.whole)]
        if requirement.statements:
            entry["statements"] = [
                {"statement-id": sid, "uuid": f"cccccccc-{n:04d}-4000-8000-{i:012d}",
                 "by-components": [by(b, f"dddddddd-{n:04d}-4{i:03d}-8000-{j:012d}")
                                   for j, b in enumerate(items)]}
                for i, (sid, items) in enumerate(requirement.statements)]
        implemented.append(entry)
    return {"system-security-plan": {
        "uuid": "eeeeeeee-0000-4000-8000-000000000001",
        "metadata": {"title": f"{system} Security Plan", "version": "1.0",
                     "oscal-version": version},
        "system-characteristics": {"system-name": system, "system-ids": []},
        "system-implementation": {"components": [
            {"uuid": uid, "type": "this-system" if title == "This System" else "software",
             "title": title, "description": f"{title}, part of the service.",
             "status": {"state": "operational"}} for uid, title in COMPONENTS.items()]},
        "control-implementation": {"description": "How the controls are met.",
                                   "implemented-requirements": implemented},
    }}


def plan_json(model: dict | None = None) -> str:
    return json.dumps(model or plan_model(), indent=2)


def plan_yaml(model: dict | None = None) -> str:
    return yaml.safe_dump(model or plan_model(), sort_keys=False, width=80)


def _xml_description(text: str) -> str:
    """A description as OSCAL XML marks it up, a parameter as an `insert` element."""
    out, rest = [], text
    while "{{ insert: param, " in rest:
        before, _, after = rest.partition("{{ insert: param, ")
        param, _, rest = after.partition(" }}")
        out.append(escape(before) + f'<insert type="param" id-ref={quoteattr(param)}/>')
    out.append(escape(rest))
    return f"<description>\n<p>{''.join(out)}</p>\n</description>"


def plan_xml(model: dict | None = None) -> str:
    """The same plan in OSCAL XML."""
    plan = (model or plan_model())["system-security-plan"]

    def by(item: dict) -> str:
        parameters = "".join(
            f'<set-parameter param-id={quoteattr(s["param-id"])}><value>'
            f'{escape(s["values"][0])}</value></set-parameter>'
            for s in item.get("set-parameters", []))
        return (f'<by-component component-uuid="{item["component-uuid"]}" '
                f'uuid="{item["uuid"]}">\n{_xml_description(item["description"])}\n'
                f"{parameters}</by-component>")

    requirements = []
    for entry in plan["control-implementation"]["implemented-requirements"]:
        props = "".join(f'<prop name="{p["name"]}" ns="{p["ns"]}" value="{p["value"]}"/>\n'
                        for p in entry.get("props", []))
        whole = "".join(by(b) for b in entry.get("by-components", []))
        statements = "".join(
            f'<statement statement-id="{s["statement-id"]}" uuid="{s["uuid"]}">\n'
            + "".join(by(b) for b in s["by-components"]) + "</statement>\n"
            for s in entry.get("statements", []))
        requirements.append(
            f'<implemented-requirement uuid="{entry["uuid"]}" '
            f'control-id="{entry["control-id"]}">\n{props}{whole}{statements}'
            "</implemented-requirement>")
    components = "".join(
        f'<component uuid="{c["uuid"]}" type="{c["type"]}">\n<title>{escape(c["title"])}'
        f"</title>\n<description><p>{escape(c['description'])}</p></description>\n"
        '<status state="operational"/>\n</component>\n'
        for c in plan["system-implementation"]["components"])
    metadata = plan["metadata"]
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<system-security-plan xmlns="{OSCAL_NAMESPACE}" uuid="{plan["uuid"]}">\n'
        f"<metadata>\n<title>{escape(metadata['title'])}</title>\n"
        f"<version>{metadata['version']}</version>\n"
        f"<oscal-version>{metadata['oscal-version']}</oscal-version>\n</metadata>\n"
        "<system-characteristics>\n<system-name>"
        f"{escape(plan['system-characteristics']['system-name'])}</system-name>\n"
        "</system-characteristics>\n"
        f"<system-implementation>\n{components}</system-implementation>\n"
        "<control-implementation>\n<description><p>How the controls are met.</p>"
        "</description>\n" + "\n".join(requirements) + "\n</control-implementation>\n"
        "</system-security-plan>\n")


def definition_model(title: str = "Example Queue Component Definition") -> dict:
    """A component definition: one component, one implementation, requirements keyed by
    their control ids, one with statements by part and a parameter it sets."""
    return {"component-definition": {
        "uuid": "ffffffff-0000-4000-8000-000000000001",
        "metadata": {"title": title, "version": "3", "oscal-version": "1.1.2"},
        "components": [{
            "uuid": "ffffffff-0000-4000-8000-000000000002", "type": "service",
            "title": "Example Queue", "description": "A message queue.",
            "control-implementations": [{
                "uuid": "ffffffff-0000-4000-8000-000000000003",
                "source": "#ffffffff-0000-4000-8000-000000000009",
                "description": "The queue's part of the moderate baseline.",
                "implemented-requirements": [
                    {"uuid": "ffffffff-0000-4000-8000-000000000004", "control-id": "sc-8",
                     "description": "Messages travel over TLS.",
                     "set-parameters": [{"param-id": "sc-8_prm_1",
                                         "values": ["confidentiality"]}],
                     "statements": [{"statement-id": "sc-8_smt",
                                     "uuid": "ffffffff-0000-4000-8000-000000000005",
                                     "description": "The queue protects the {{ insert: "
                                                    "param, sc-8_prm_1 }} of messages."}]},
                    {"uuid": "ffffffff-0000-4000-8000-000000000006", "control-id": "sc-28.1",
                     "description": "Queued messages are encrypted on disk.",
                     "props": [{"name": "implementation-status", "value": "implemented"}]},
                ]}]}]}}


def benchmark_definition() -> dict:
    """A component definition keyed by benchmark rule ids (CIS-1.2.1), each only a status,
    under two components that repeat one another."""
    def component(title: str, n: int) -> dict:
        return {"uuid": f"99999999-0000-4000-8000-00000000000{n}", "type": "service",
                "title": title, "description": title,
                "control-implementations": [{
                    "uuid": f"99999999-0000-4000-8000-00000000001{n}",
                    "source": "profiles/benchmark/profile.json",
                    "description": "Benchmark profile",
                    "implemented-requirements": [
                        {"uuid": f"99999999-0000-4000-8{n}00-00000000002{i}",
                         "control-id": control_id, "description": "",
                         "props": [{"name": "implementation-status", "value": "planned"}]}
                        for i, control_id in enumerate(["CIS-1.1.1", "CIS-1.2.1"])]}]}

    return {"component-definition": {
        "uuid": "99999999-0000-4000-8000-000000000000",
        "metadata": {"title": "Benchmark component definition", "version": "1",
                     "oscal-version": "1.0.2"},
        "components": [component("Cluster", 1), component("Checks", 2)]}}
