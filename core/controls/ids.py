"""Control ids as vendors write them in a questionnaire's id column, read to the control they
name: NIST SP 800-53 (`AC-2`, `AC-02 (01)`, `ac-2.1`, FedRAMP's parts `AC-2(a)`), ISO/IEC
27001 Annex A of 2013 (`A.9.4.2`) and of 2022 (`A.5.15`), and CSA CAIQ questions
(`IAM-02.1`).

The layout the id was read under settles what the shape alone cannot: a bare `5.15` is an ISO
27001:2022 control only in a statement of applicability (a layout naming ISO 27001), since
SIG questions are numbered alike, and under a SIG layout no id is an ISO one; a CAIQ id is of
v3.1 under a layout naming CAIQ v3, else of v4 (of v3.1 still where only v3.1 has its domain,
as `EKM-01.1`). HECVAT ids (`GNRL-01`) are HECVAT's own questions and name no control.

Only what exists is read: an 800-53 id whose control is in the shipped catalog, an Annex A id
the standard's structure has (the counts of controls per clause below are facts of the
standard, not its text), a CAIQ id of a domain of its version. Anything else is None. An
800-53 part is kept as written: FedRAMP's `AC-2(1)(a)` is part a of AC-2(1) whether or not
NIST's statement letters its items."""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.controls.catalog import nist_catalog
from core.controls.crosswalk import iso2013_to_nist

NIST_FRAMEWORK = "NIST SP 800-53 Rev. 5"
ISO2013_FRAMEWORK = "ISO/IEC 27001:2013"
ISO2022_FRAMEWORK = "ISO/IEC 27001:2022"
CAIQ_V4_FRAMEWORK = "CSA CAIQ v4"
CAIQ_V3_FRAMEWORK = "CSA CAIQ v3.1"

# ISO/IEC 27001:2013 Annex A: (clause, objective) -> how many controls it has (114 in all).
ISO2013_ANNEX_A: dict[tuple[int, int], int] = {
    (5, 1): 2, (6, 1): 5, (6, 2): 2, (7, 1): 2, (7, 2): 3, (7, 3): 1, (8, 1): 4, (8, 2): 3,
    (8, 3): 3, (9, 1): 2, (9, 2): 6, (9, 3): 1, (9, 4): 5, (10, 1): 2, (11, 1): 6, (11, 2): 9,
    (12, 1): 4, (12, 2): 1, (12, 3): 1, (12, 4): 4, (12, 5): 1, (12, 6): 2, (12, 7): 1,
    (13, 1): 3, (13, 2): 4, (14, 1): 3, (14, 2): 9, (14, 3): 1, (15, 1): 3, (15, 2): 2,
    (16, 1): 7, (17, 1): 3, (17, 2): 1, (18, 1): 5, (18, 2): 3,
}
# ISO/IEC 27001:2022 Annex A: theme -> how many controls it has (93 in all).
ISO2022_ANNEX_A: dict[int, int] = {5: 37, 6: 8, 7: 14, 8: 34}

CAIQ_V4_DOMAINS = frozenset(
    "A&A AIS BCR CCC CEK DCS DSP GRC HRS IAM IPY I&S LOG SEF STA TVM UEM".split())
CAIQ_V3_DOMAINS = frozenset(
    "AAC AIS BCR CCC DCS DSI EKM GRM HRS IAM IPY IVS MOS SEF STA TVM".split())


@dataclass(frozen=True)
class ControlRef:
    """The control an id names."""

    # "NIST SP 800-53 Rev. 5" | "ISO/IEC 27001:2013" | "ISO/IEC 27001:2022" | "CSA CAIQ v4"
    # (or "CSA CAIQ v3.1")
    framework: str
    id: str  # canonical as the framework writes it: "AC-2(1)", "A.9.4.2", "A.5.15", "IAM-02.1"
    # Globally unique link key: "sp800-53:ac-2.1", "iso27001-2013:a.9.4.2",
    # "iso27001-2022:a.5.15", "caiq-v4:iam-02.1"
    key: str
    title: str | None  # 800-53: the catalog's title; others None (their text is licensed)
    # "a" for "AC-2(a)" / "AC-2 a.", "a.1" for "AC-1(a)(1)": a part of the control's
    # statement, not an enhancement
    part: str | None = None


_DASHES = re.compile(r"[\u2010-\u2015\u2212\ufe58\ufe63\uff0d]")
# AC-2, AC-02, AC-2(1), AC-2 (1), AC-02 (01), ac-2.1; then a part: (a), (a)(1), " a.", "a.1"
_NIST = re.compile(
    r"^(?P<family>[a-z]{2})\s*-\s*0*(?P<number>\d{1,3})"
    r"(?:\.0*(?P<dotted>\d{1,3})|\s*\(\s*0*(?P<enhancement>\d{1,3})\s*\))?"
    r"(?:\s*\(\s*(?P<part>[a-z])\s*\)(?:\s*\(\s*0*(?P<item>\d{1,2})\s*\))?"
    r"|[\s.]?\s*(?P<letter>[a-z])(?:\.\s*0*(?P<number_item>\d{1,2}))?\.?)?$")
_ISO = re.compile(r"^(?P<annex>a\s*\.?\s*)?0*(\d{1,2})\.0*(\d{1,2})(?:\.0*(\d{1,2}))?$")
_CAIQ = re.compile(r"^(?P<domain>[a-z&]{3})\s*-\s*0*(?P<control>\d{1,2})\.0*(?P<question>\d{1,3})$")


def _layout_kind(layout: str | None) -> str | None:
    """What the layout names: "hecvat", "sig", "iso", "caiq-v3", "caiq-v4", "other" or
    None for no layout."""
    if not layout:
        return None
    text = layout.lower()
    if re.search(r"hecvat|k-12\s*cvat", text):
        return "hecvat"
    if re.search(r"\bsig\b", text):
        return "sig"
    if re.search(r"\biso\s*(?:/\s*iec\s*)?27001", text):
        return "iso"
    if re.search(r"\bcaiq[\s_-]*v?\s*3\b", text):
        return "caiq-v3"
    if "caiq" in text:
        return "caiq-v4"
    return "other"


def _nist_ref(text: str) -> ControlRef | None:
    match = _NIST.match(text)
    if match is None:
        return None
    key = f"{match['family']}-{int(match['number'])}"
    enhancement = match["dotted"] or match["enhancement"]
    if enhancement:
        key = f"{key}.{int(enhancement)}"
    control = nist_catalog().get(key)
    if control is None:
        return None
    letter = match["part"] or match["letter"]
    item = match["item"] or match["number_item"]
    part = (f"{letter}.{int(item)}" if item else letter) if letter else None
    return ControlRef(framework=NIST_FRAMEWORK, id=control.id, key=f"sp800-53:{key}",
                      title=control.title, part=part)


def _iso_ref(text: str, kind: str | None) -> ControlRef | None:
    match = _ISO.match(text)
    if match is None or kind == "sig" or (not match["annex"] and kind != "iso"):
        return None
    first, second, third = (int(n) if n else None for n in match.groups()[1:])
    if third is not None:
        if not 1 <= third <= ISO2013_ANNEX_A.get((first, second), 0):
            return None
        iso_id = f"A.{first}.{second}.{third}"
        return ControlRef(framework=ISO2013_FRAMEWORK, id=iso_id,
                          key=f"iso27001-2013:{iso_id.lower()}", title=None)
    if not 1 <= second <= ISO2022_ANNEX_A.get(first, 0):
        return None
    iso_id = f"A.{first}.{second}"
    return ControlRef(framework=ISO2022_FRAMEWORK, id=iso_id,
                      key=f"iso27001-2022:{iso_id.lower()}", title=None)


def _caiq_ref(text: str, kind: str | None) -> ControlRef | None:
    match = _CAIQ.match(text)
    if match is None:
        return None
    domain = match["domain"].upper()
    if kind == "caiq-v3":
        version = "v3" if domain in CAIQ_V3_DOMAINS else None
    else:
        version = ("v4" if domain in CAIQ_V4_DOMAINS
                   else "v3" if domain in CAIQ_V3_DOMAINS else None)
    if version is None:
        return None
    caiq_id = f"{domain}-{int(match['control']):02d}.{int(match['question'])}"
    framework = CAIQ_V4_FRAMEWORK if version == "v4" else CAIQ_V3_FRAMEWORK
    return ControlRef(framework=framework, id=caiq_id, key=f"caiq-{version}:{caiq_id.lower()}",
                      title=None)


def parse_control_id(text: str, layout: str | None = None) -> ControlRef | None:
    """The control an id names, read under the questionnaire's layout ("CAIQ v4.0.3", "ISO
    27001 statement of applicability", "SIG questionnaire (...)"); None for an id that names
    no known control."""
    kind = _layout_kind(layout)
    if kind == "hecvat" or not text:
        return None
    cleaned = " ".join(_DASHES.sub("-", str(text)).split()).lower()
    if not cleaned or len(cleaned) > 32:
        return None
    return _nist_ref(cleaned) or _caiq_ref(cleaned, kind) or _iso_ref(cleaned, kind)


def nist_keys(ref: ControlRef) -> tuple[str, ...]:
    """The 800-53 keys a ref stands for: its own for an 800-53 control, NIST's crosswalk for
    an ISO/IEC 27001:2013 one, none for any other."""
    if ref.framework == NIST_FRAMEWORK:
        return (ref.key.removeprefix("sp800-53:"),)
    if ref.framework == ISO2013_FRAMEWORK:
        return iso2013_to_nist(ref.id)
    return ()
