"""The control catalogs the package ships: the NIST SP 800-53 Rev. 5 catalog reads as NIST
prints it (AC-7's statement, an enhancement's id and parent, a withdrawn control's
successor), control ids as vendors write them read to the right control and part (and SIG
and HECVAT ids to none), and NIST's ISO/IEC 27001:2013 crosswalk gives the pairs NIST's
document gives, with ids only: no ISO text ships."""

from __future__ import annotations

import csv
import io
import re
from importlib import resources
from pathlib import Path

import pytest

from core.controls import build_data
from core.controls.catalog import catalog_data, nist_catalog
from core.controls.crosswalk import (
    CROSSWALK_EDITION,
    CROSSWALK_SOURCE,
    crosswalk_rows,
    iso2013_to_nist,
    nist_to_iso2013,
)
from core.controls.ids import (
    ISO2013_ANNEX_A,
    ISO2022_ANNEX_A,
    ControlRef,
    nist_keys,
    parse_control_id,
)

DATA = resources.files("core.controls") / "data"
NIST = "NIST SP 800-53 Rev. 5"
SOA = "ISO 27001 statement of applicability"


def crosswalk_csv() -> str:
    return (DATA / "iso27001-2013-to-sp800-53r5.csv").read_text("utf-8")


# The catalog ------------------------------------------------------------------------------


def test_ac_7_reads_as_nist_prints_it():
    control = nist_catalog().get("ac-7")
    assert control is not None
    assert (control.id, control.title, control.family, control.parent) == (
        "AC-7", "Unsuccessful Logon Attempts", "Access Control", None)
    assert control.statement.splitlines() == [
        "a. Enforce a limit of [Assignment: organization-defined number] consecutive invalid "
        "logon attempts by a user during a [Assignment: organization-defined time period]; and",
        "b. Automatically [Selection (one or more): lock the account or node for an "
        "[Assignment: organization-defined time period]; lock the account or node until "
        "released by an administrator; delay next logon prompt per [Assignment: "
        "organization-defined delay algorithm]; notify system administrator; take other "
        "[Assignment: organization-defined action]] when the maximum number of unsuccessful "
        "attempts is exceeded.",
    ]
    assert control.discussion.startswith("The need to limit unsuccessful logon attempts")
    assert not control.withdrawn and control.moved_to == ()


def test_search_text_is_id_title_and_the_start_of_the_statement():
    control = nist_catalog().get("ac-7")
    text = control.search_text(12)
    assert text == ("AC-7 Unsuccessful Logon Attempts. a. Enforce a limit of [Assignment: "
                    "organization-defined number] consecutive invalid logon attempts")
    assert "\n" not in control.search_text()
    assert "lock the account" in control.search_text(80)
    assert len(control.search_text(80).split()) <= 80 + 4


def test_counts_order_and_families():
    catalog = nist_catalog()
    assert catalog is nist_catalog()  # read once per process
    assert len(catalog.controls) == 1189
    assert len({c.family for c in catalog.controls.values()}) == 20
    assert sum(c.parent is None for c in catalog.controls.values()) == 322
    assert sum(c.withdrawn for c in catalog.controls.values()) == 182
    assert len(catalog.current()) == 1007
    assert not any(c.withdrawn for c in catalog.current())
    keys = list(catalog.controls)
    assert keys[:3] == ["ac-1", "ac-2", "ac-2.1"] and keys[-1] == "sr-12"
    assert all(c.key == key for key, c in catalog.controls.items())
    assert catalog.get("ab-12") is None


def test_an_enhancement_has_its_nist_id_and_its_parent():
    catalog = nist_catalog()
    enhancement = catalog.get("ac-2.1")
    assert (enhancement.id, enhancement.title, enhancement.parent, enhancement.family) == (
        "AC-2(1)", "Automated System Account Management", "ac-2", "Access Control")
    assert enhancement.statement == ("Support the management of system accounts using "
                                     "[Assignment: organization-defined automated mechanisms].")
    # An enhancement's items are labelled "(a)", "(b)"; a base control's "a.", "1.", "(a)".
    assert catalog.get("ac-6.1").statement.splitlines()[1].startswith("(a) [Assignment: ")
    ac_1 = catalog.get("ac-1").statement.splitlines()
    assert [line.split(" ")[0] for line in ac_1[:5]] == ["a.", "1.", "(a)", "(b)", "2."]
    assert ac_1[1].startswith("1. [Selection (one or more): Organization-level; Mission/")
    for control in catalog.controls.values():
        assert control.parent is None or catalog.get(control.parent) is not None
        assert ("(" in control.id) == (control.parent is not None)


def test_a_withdrawn_control_says_where_it_went():
    catalog = nist_catalog()
    incorporated = catalog.get("ac-7.1")
    assert incorporated.withdrawn and incorporated.moved_to == ("ac-7",)
    assert incorporated.statement == "[Withdrawn: Incorporated into AC-7.]"
    moved = catalog.get("au-8.1")
    assert moved.moved_to == ("sc-45.1",)
    assert moved.statement == "[Withdrawn: Moved to SC-45(1).]"
    assert catalog.get("ac-13").moved_to == ("ac-2", "au-6")
    # Into a part of a control, and into a whole family, as NIST prints them.
    assert catalog.get("ac-2.10").statement == "[Withdrawn: Incorporated into AC-2k.]"
    assert catalog.get("sa-12").statement == "[Withdrawn: Incorporated into SR Family.]"
    assert catalog.get("sa-12").moved_to == ()
    for control in catalog.controls.values():
        assert all(catalog.get(key) is not None for key in control.moved_to)
        assert control.withdrawn == control.statement.startswith("[Withdrawn")


def test_no_oscal_markup_is_left_in_the_text():
    catalog = nist_catalog()
    for control in catalog.controls.values():
        for text in (control.title, control.statement, control.discussion):
            assert "{{" not in text and "](" not in text and "  " not in text, control.key
        assert control.statement, control.key
        assert control.withdrawn or control.discussion, control.key
    # A control the discussion names reads by its id; a reference in brackets.
    assert "are defined in accordance with AU-2 and reviewed" in catalog.get("ac-2.4").discussion
    assert "For federal agencies, [PRIVACT]" in catalog.get("ac-3.14").discussion
    # Titles are cased as NIST prints them.
    assert catalog.get("ia-2").title == "Identification and Authentication (Organizational Users)"
    assert catalog.get("sr-2.1").title == "Establish SCRM Team"


def test_the_data_file_records_its_edition_and_source():
    catalog = nist_catalog()
    assert catalog.name == NIST
    assert catalog.version == "5.0.1"
    assert catalog.last_modified.startswith("2021-06-08")
    assert catalog.source == ("usnistgov/oscal-content@a849dbca, "
                              "nist.gov/SP800-53/rev5/json/NIST_SP-800-53_rev5_catalog.json")
    assert "public domain" in catalog.terms
    data = catalog_data()
    assert data["oscal_version"] == "1.0.0"
    assert data["source"] == {
        "repository": "https://github.com/usnistgov/oscal-content",
        "path": "nist.gov/SP800-53/rev5/json/NIST_SP-800-53_rev5_catalog.json",
        "commit": "a849dbca4649e0cc626fefdd46cf5232c8308f4c",
        "blob": "75ea21a04fcb029f6ce8f2761a2f8567cc65a1ea",
    }
    assert data["families"]["ac"] == "Access Control" and len(data["families"]) == 20
    sources = (DATA / "SOURCES.md").read_text("utf-8")
    for fact in ("a849dbca4649e0cc626fefdd46cf5232c8308f4c", "5.0.1", "17 U.S.C. 105",
                 "iso27001-2013-to-sp800-53r5.csv", "ISO/IEC 27001:2022", "main clauses"):
        assert fact in sources


# Control ids as vendors write them --------------------------------------------------------


@pytest.mark.parametrize(("text", "key", "part", "canonical"), [
    ("AC-2", "sp800-53:ac-2", None, "AC-2"),
    ("AC-02", "sp800-53:ac-2", None, "AC-2"),
    ("  ac-7 ", "sp800-53:ac-7", None, "AC-7"),
    ("AC-2(1)", "sp800-53:ac-2.1", None, "AC-2(1)"),
    ("AC-2 (1)", "sp800-53:ac-2.1", None, "AC-2(1)"),
    ("AC-02 (01)", "sp800-53:ac-2.1", None, "AC-2(1)"),
    ("ac-2.1", "sp800-53:ac-2.1", None, "AC-2(1)"),
    ("AC-2(1)(a)", "sp800-53:ac-2.1", "a", "AC-2(1)"),
    ("AC-2 (1) (a)", "sp800-53:ac-2.1", "a", "AC-2(1)"),
    ("AC-2(1)(b)", "sp800-53:ac-2.1", "b", "AC-2(1)"),
    ("AC-2(a)", "sp800-53:ac-2", "a", "AC-2"),
    ("AC-1 (a)", "sp800-53:ac-1", "a", "AC-1"),
    ("AC-2 a.", "sp800-53:ac-2", "a", "AC-2"),
    ("AC-1(a)(1)", "sp800-53:ac-1", "a.1", "AC-1"),
    ("SI-4(4)", "sp800-53:si-4.4", None, "SI-4(4)"),
    ("AC\u20112", "sp800-53:ac-2", None, "AC-2"),  # a non-breaking hyphen
])
def test_800_53_ids_as_vendors_write_them(text, key, part, canonical):
    ref = parse_control_id(text)
    assert ref is not None
    assert (ref.framework, ref.key, ref.part, ref.id) == (NIST, key, part, canonical)
    assert ref.title == nist_catalog().get(key.removeprefix("sp800-53:")).title
    assert nist_keys(ref) == (key.removeprefix("sp800-53:"),)


def test_an_enhancement_number_is_not_a_part():
    enhancement, part = parse_control_id("AC-2(3)"), parse_control_id("AC-2(c)")
    assert (enhancement.key, enhancement.part) == ("sp800-53:ac-2.3", None)
    assert (part.key, part.part) == ("sp800-53:ac-2", "c")


@pytest.mark.parametrize("text", ["AB-12", "AC-99", "AC-2(99)", "ac-2.99", "AC-", "", "  ",
                                  "Access Control", "AC-2 and AC-3"])
def test_ids_of_no_catalog_control_are_none(text):
    assert parse_control_id(text) is None


def test_iso_27001_ids():
    old = parse_control_id("A.9.4.2")
    assert old == ControlRef(framework="ISO/IEC 27001:2013", id="A.9.4.2",
                             key="iso27001-2013:a.9.4.2", title=None)
    new = parse_control_id("a.5.15")
    assert new == ControlRef(framework="ISO/IEC 27001:2022", id="A.5.15",
                             key="iso27001-2022:a.5.15", title=None)
    assert parse_control_id("A.08.34").key == "iso27001-2022:a.8.34"
    # Bare numbers are an ISO id only in a statement of applicability.
    assert parse_control_id("5.15") is None
    assert parse_control_id("5.15", SOA) == new
    assert parse_control_id("5.15", "iso27001-soa") == new
    assert parse_control_id("9.4.2", SOA) == old
    # Only what the standard's Annex A has.
    for text in ("A.5.38", "A.6.9", "A.8.35", "A.4.1", "A.9.4.6", "A.19.1.1", "A.5.2.1"):
        assert parse_control_id(text) is None, text
    assert sum(ISO2022_ANNEX_A.values()) == 93 and sum(ISO2013_ANNEX_A.values()) == 114


def test_sig_and_hecvat_ids_are_not_controls():
    sig = "SIG questionnaire (Lite)"
    for text in ("A.1.2", "A.5.15", "A.9.4.2", "5.15"):
        assert parse_control_id(text, sig) is None, text
    assert parse_control_id("A.1.2") is None  # no Annex A theme 1
    for layout in (None, "HECVAT Full 3.04", "HECVAT 4", "CAIQ v4.0.3"):
        assert parse_control_id("GNRL-01", layout) is None
        assert parse_control_id("HFIH-01", layout) is None
    assert parse_control_id("AC-2", "HECVAT Full 3.04") is None


def test_caiq_ids():
    for layout in (None, "CAIQ v4.0.3", "CAIQ v4.0.2 (PDF)"):
        ref = parse_control_id("IAM-02.1", layout)
        assert (ref.framework, ref.id, ref.key, ref.title) == (
            "CSA CAIQ v4", "IAM-02.1", "caiq-v4:iam-02.1", None)
        assert nist_keys(ref) == ()
    assert parse_control_id("a&a-1.3").key == "caiq-v4:a&a-01.3"
    v3 = parse_control_id("AIS-01.1", "CAIQ v3.1")
    assert (v3.framework, v3.key) == ("CSA CAIQ v3.1", "caiq-v3:ais-01.1")
    assert parse_control_id("CEK-01.1", "CAIQ v3.1") is None  # a v4 domain
    assert parse_control_id("XYZ-01.1") is None


# The ISO/IEC 27001:2013 crosswalk ---------------------------------------------------------


def test_crosswalk_pairs_as_nists_document_gives_them():
    assert CROSSWALK_EDITION == "ISO/IEC 27001:2013"
    assert "NIST" in CROSSWALK_SOURCE and "ISO/IEC 27001" in CROSSWALK_SOURCE
    # Table 1: AC-7 -> A.9.4.2; Table 2: A.9.4.2 -> AC-7, AC-8, AC-9, IA-6.
    assert nist_to_iso2013("ac-7") == ("A.9.4.2",)
    assert iso2013_to_nist("A.9.4.2") == ("ac-7", "ac-8", "ac-9", "ia-6")
    assert iso2013_to_nist(" a.09.4.2 ") == ("ac-7", "ac-8", "ac-9", "ia-6")
    assert nist_to_iso2013("ac-2") == ("A.9.2.1", "A.9.2.2", "A.9.2.3", "A.9.2.5", "A.9.2.6")
    assert nist_to_iso2013("AU-8") == ("A.12.4.4",)
    assert iso2013_to_nist("A.12.4.4") == ("au-8",)
    assert nist_to_iso2013("ac-10") == ()  # "None" in Table 1
    # A main clause is no Annex A id; the crosswalk holds Annex A only.
    assert iso2013_to_nist("5.2") == () and iso2013_to_nist("A.18.1.4") == ()
    assert nist_keys(parse_control_id("A.9.4.2")) == ("ac-7", "ac-8", "ac-9", "ia-6")
    assert nist_keys(parse_control_id("A.5.15")) == ()  # the 2022 edition is not crosswalked


def test_enhancements_have_only_the_ids_nist_gives_them():
    # "Where no enhancement is specified, the ISO/IEC 27001 requirement or control is relevant
    # only to the Special Publication 800-53 base control."
    assert nist_to_iso2013("ac-2.1") == ()
    assert nist_to_iso2013("ac-19.4") == ("A.11.1.5",)
    assert iso2013_to_nist("A.11.1.5") == ("ac-19", "ac-19.4", "sc-42")
    assert iso2013_to_nist("A.12.1.3") == ("au-4", "cp-2.2", "sc-5.2")


def test_partial_pairs_carry_nists_asterisk():
    rows = {(r.sp800_53_key, r.iso27001_2013_id): r for r in crosswalk_rows()}
    assert rows[("ac-24", "A.9.4.1")].partial  # Table 1: "A.9.4.1*"
    assert rows[("sr-3", "A.15.1.3")].partial and not rows[("sr-3", "A.15.1.2")].partial
    assert not rows[("ac-7", "A.9.4.2")].partial
    assert rows[("ac-7", "A.9.4.2")].tables == ("1", "2")
    assert rows[("ac-19.4", "A.11.1.5")].tables == ("2",)


def test_the_crosswalk_ships_ids_only():
    text = crosswalk_csv()
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["sp800_53_key", "iso27001_2013_id", "partial", "tables"]
    assert len(rows) - 1 == len(crosswalk_rows()) == 412
    catalog = nist_catalog()
    for key, iso_id, partial, tables in rows[1:]:
        assert catalog.get(key) is not None, key
        assert parse_control_id(iso_id).framework == "ISO/IEC 27001:2013", iso_id
        assert partial in ("true", "false") and tables in ("1", "2", "1+2")
    # No word of ISO's text: every cell is an id, a flag or a table number.
    assert re.fullmatch(r"[a-z0-9_,.+\-A\n]*", "\n".join(text.splitlines()[1:]) + "\n")
    shipped = text + (DATA / "SOURCES.md").read_text("utf-8")
    for iso_title in ("Secure logon procedures", "Information access restriction",
                      "Segregation of duties", "Policies for information security"):
        assert iso_title.lower() not in shipped.lower()


def test_every_crosswalked_iso_id_but_one_has_a_pair():
    iso_ids = {r.iso27001_2013_id for r in crosswalk_rows()}
    every = {f"A.{c}.{o}.{n}" for (c, o), count in ISO2013_ANNEX_A.items()
             for n in range(1, count + 1)}
    assert iso_ids <= every
    assert every - iso_ids == {"A.18.1.4"}  # "Appendix J Privacy controls", left out


# The builder ------------------------------------------------------------------------------


def test_the_builder_renders_parameters_and_withdrawals():
    oscal = {"catalog": {
        "metadata": {"title": "T", "version": "9.9", "oscal-version": "1.0.0",
                     "last-modified": "2024-01-01T00:00:00Z"},
        "groups": [{"id": "zz", "title": "Zed Family", "controls": [
            {"id": "zz-1", "title": "Name/address (organizational Users)",
             "props": [{"name": "label", "value": "ZZ-1"}],
             "params": [
                 {"id": "zz-1_prm_1", "label": "organization-defined number"},
                 {"id": "zz-1_prm_2", "select": {"choice": ["lock for {{ insert: param, "
                                                            "zz-1_prm_1 }} ", "notify"]}},
             ],
             "parts": [
                 {"id": "zz-1_smt", "name": "statement", "prose": "Do:", "parts": [
                     {"id": "zz-1_smt.a", "name": "item",
                      "props": [{"name": "label", "value": "a."}],
                      "prose": "Then {{ insert: param, zz-1_prm_2 }}; see [ZZ-1](#zz-1)."}]},
                 {"id": "zz-1_gdn", "name": "guidance",
                  "prose": "Per [ACT](#0f66be67-85e7-4ca6-bd19-39453e9f4394).\n\nMore."},
             ],
             "controls": [
                 {"id": "zz-1.1", "title": "Old", "links": [
                     {"href": "#zz-1", "rel": "incorporated-into"}],
                  "props": [{"name": "label", "value": "ZZ-1(1)"},
                            {"name": "status", "value": "withdrawn"}]},
             ]},
        ]}],
    }}
    compact = build_data.compact_catalog(oscal, {"repository": "r", "path": "p", "commit": "c"})
    first, withdrawn = compact["controls"]
    assert first["title"] == "Name/Address (Organizational Users)"
    assert first["statement"] == ("Do:\na. Then [Selection: lock for [Assignment: "
                                  "organization-defined number]; notify]; see ZZ-1.")
    assert first["discussion"] == "Per [ACT].\n\nMore."
    assert (withdrawn["id"], withdrawn["parent"], withdrawn["moved_to"]) == (
        "ZZ-1(1)", "zz-1", ["zz-1"])
    assert withdrawn["statement"] == "[Withdrawn: Incorporated into ZZ-1.]"
    assert build_data.nist_key("AC-19(4)") == "ac-19.4"
    assert build_data.nist_key("PE- 20") == "pe-20"


def test_nothing_imports_the_builder_at_run_time():
    core = Path(build_data.__file__).resolve().parents[1]
    imports = re.compile(r"^\s*(?:from|import)\s[^\n]*\bbuild_data\b", re.MULTILINE)
    for path in core.rglob("*.py"):
        assert not imports.search(path.read_text("utf-8")), path
