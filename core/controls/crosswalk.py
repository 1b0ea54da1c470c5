"""ISO/IEC 27001:2013 Annex A controls and the NIST SP 800-53 Rev. 5 controls NIST maps them
to, read once per process from `data/iso27001-2013-to-sp800-53r5.csv`: ids only, since ISO's
text is licensed and never ships.

The pairs are those of NIST's "NIST SP 800-53, Revision 5 Control Mappings to ISO/IEC 27001":
Table 1 (each base control to the ISO ids that satisfy its intent) and Table 2 (each ISO id to
800-53 controls), the two agreeing on most pairs and each holding a few the other has not; a
row's `tables` says which. `partial` is NIST's asterisk, on either table: the ISO control
does not fully satisfy the intent of the 800-53 control.

An enhancement does not inherit its base control's ISO ids. NIST's document says so in as
many words: an ISO id mapped to a base control "is relevant only to the Special Publication
800-53 base control", and where an ISO control satisfies an enhancement only, Table 2 names
the enhancement (A.11.1.5 to AC-19(4), A.12.1.3 to CP-2(2) and SC-5(2), ...). So
`nist_to_iso2013("ac-2.1")` is empty, and `nist_to_iso2013("ac-19.4")` is ("A.11.1.5",).

Left out (SOURCES.md counts them): the ISO/IEC 27001 main clauses 4-10, which both tables
map too; Table 1's "A.12.x" for SC-38, which names no control; Table 2's "Appendix J Privacy
controls" for A.18.1.4, an appendix Rev. 5 no longer has. ISO/IEC 27001:2022 ids are not
crosswalked."""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

CROSSWALK_EDITION = "ISO/IEC 27001:2013"
CROSSWALK_SOURCE = ("NIST's \"NIST SP 800-53, Revision 5 Control Mappings to ISO/IEC 27001\" "
                    "(its Tables 1 and 2, Annex A control ids only).")
CROSSWALK_FILE = "iso27001-2013-to-sp800-53r5.csv"

_ANNEX_A_2013 = re.compile(r"^a\s*\.?\s*0*(\d{1,2})\.0*(\d{1,2})\.0*(\d{1,2})$")


@dataclass(frozen=True)
class CrosswalkRow:
    """One pair of the crosswalk."""

    sp800_53_key: str  # "ac-7"
    iso27001_2013_id: str  # "A.9.4.2"
    partial: bool  # NIST's asterisk: the ISO control does not fully satisfy the 800-53 one
    tables: tuple[str, ...]  # the NIST tables that hold the pair: ("1",), ("2",), ("1", "2")


def iso2013_id(text: str) -> str | None:
    """"a.09.4.2 " -> "A.9.4.2": an Annex A id of the 2013 edition as the standard writes it;
    None for anything else (a main clause such as "9.2" is no Annex A id)."""
    match = _ANNEX_A_2013.match(" ".join(str(text).split()).lower())
    return "A." + ".".join(str(int(n)) for n in match.groups()) if match else None


@lru_cache(maxsize=1)
def crosswalk_rows() -> tuple[CrosswalkRow, ...]:
    """Every pair, in catalog order of the 800-53 key, each key's ISO ids in the standard's
    order."""
    text = (resources.files("core.controls") / "data" / CROSSWALK_FILE).read_text("utf-8")
    return tuple(
        CrosswalkRow(sp800_53_key=row["sp800_53_key"], iso27001_2013_id=row["iso27001_2013_id"],
                     partial=row["partial"] == "true", tables=tuple(row["tables"].split("+")))
        for row in csv.DictReader(io.StringIO(text)))


@lru_cache(maxsize=1)
def _indexes() -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    by_iso: dict[str, list[str]] = defaultdict(list)
    by_key: dict[str, list[str]] = defaultdict(list)
    for row in crosswalk_rows():
        by_iso[row.iso27001_2013_id].append(row.sp800_53_key)
        by_key[row.sp800_53_key].append(row.iso27001_2013_id)
    return ({k: tuple(v) for k, v in by_iso.items()}, {k: tuple(v) for k, v in by_key.items()})


def iso2013_to_nist(iso_id: str) -> tuple[str, ...]:
    """The 800-53 keys NIST maps this ISO/IEC 27001:2013 Annex A control to ("A.9.4.2" ->
    ("ac-7", "ac-8", "ac-9", "ia-6")), in catalog order; () for an id it maps to nothing."""
    canonical = iso2013_id(iso_id)
    return _indexes()[0].get(canonical, ()) if canonical else ()


def nist_to_iso2013(key: str) -> tuple[str, ...]:
    """The ISO/IEC 27001:2013 Annex A ids NIST maps this 800-53 control ("ac-7", "ac-19.4")
    to, in the standard's order; () for a control with none of its own (see above)."""
    return _indexes()[1].get(str(key).strip().lower(), ())
