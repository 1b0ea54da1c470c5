"""Builds the package's two data files from NIST's own sources:

    python -m core.controls.build_data CATALOG.json MAPPING.docx OUTDIR

`CATALOG.json` is the SP 800-53 Rev. 5 catalog in OSCAL JSON (usnistgov/oscal-content,
`nist.gov/SP800-53/rev5/json/NIST_SP-800-53_rev5_catalog.json`); `MAPPING.docx` is NIST's
"NIST SP 800-53, Revision 5 Control Mappings to ISO/IEC 27001". OUTDIR receives
`nist-sp800-53-rev5.json.gz` (the catalog, compacted to what `catalog` reads) and
`iso27001-2013-to-sp800-53r5.csv` (the crosswalk, ids only). Both are written byte for byte
the same from the same inputs. `--commit` and `--path` name where the catalog came from;
the file's git blob hash is recorded beside them, so the pairing can be checked.

Nothing imports this module at run time: it is how the shipped files were made, kept so they
can be made again from a newer catalog."""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CATALOG_FILE = "nist-sp800-53-rev5.json.gz"
CROSSWALK_FILE = "iso27001-2013-to-sp800-53r5.csv"
CROSSWALK_COLUMNS = ("sp800_53_key", "iso27001_2013_id", "partial", "tables")

REPOSITORY = "https://github.com/usnistgov/oscal-content"
CATALOG_PATH = "nist.gov/SP800-53/rev5/json/NIST_SP-800-53_rev5_catalog.json"
# Release 5.0.1 (2021-06-08), the catalog the shipped file was built from (SOURCES.md says why).
CATALOG_COMMIT = "a849dbca4649e0cc626fefdd46cf5232c8308f4c"
TERMS = "public domain (a work of the US government, 17 U.S.C. 105)"

_INSERT = re.compile(r"\{\{\s*insert:\s*param,\s*([\w.\-]+)\s*\}\}")
_LINK = re.compile(r"\[([^\[\]]+)\]\(([^()\s]+)\)")
_CONTROL_HREF = re.compile(r"^#([a-z]{2}(?:-\d+(?:\.\d+)?)?)(?:_smt[\w.]*)?$")


# The catalog ------------------------------------------------------------------------------


def _prop(item: Mapping[str, Any], name: str) -> str | None:
    for prop in item.get("props", ()):
        if prop.get("name") == name:
            return str(prop.get("value"))
    return None


def _tidy(text: str) -> str:
    """Spaces and line breaks folded to one space; paragraph breaks kept."""
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n\s*\n", text))
    return "\n\n".join(p for p in paragraphs if p)


def _title(text: str) -> str:
    """A title cased as NIST prints it: the 5.0.1 file lowercases the word after "(" or "/"
    ("Identification and Authentication (organizational Users)") and writes SCRM "Scrm";
    NIST's later releases read "(Organizational Users)" and "SCRM"."""
    cased = re.sub(r"(?<=[(/])[a-z]", lambda m: m.group().upper(), _tidy(text))
    return re.sub(r"\bScrm\b", "SCRM", cased)


def _markdown_links(text: str) -> str:
    """`[AU-2](#au-2)` reads "AU-2" (a control, as NIST prints it); `[OMB A-130](#uuid)`
    reads "[OMB A-130]" (a reference of the back matter, as NIST cites it); a web link
    reads as its text."""
    def plain(match: re.Match[str]) -> str:
        text, href = match.group(1), match.group(2)
        if _CONTROL_HREF.match(href) or not href.startswith("#"):
            return text
        return f"[{text}]"
    return _LINK.sub(plain, text)


def _param_text(param_id: str, params: Mapping[str, Mapping[str, Any]], depth: int = 0) -> str:
    """A parameter as NIST prints it in the statement: "[Assignment: organization-defined
    number]", or "[Selection (one or more): a; b [Assignment: ...]]"."""
    if depth > 5:
        raise ValueError(f"parameter {param_id!r} nests selections too deep")
    param = params.get(param_id)
    if param is None:
        raise ValueError(f"statement names the unknown parameter {param_id!r}")
    select = param.get("select")
    if select is not None:
        choices = "; ".join(_prose(c, params, depth + 1) for c in select.get("choice", ()))
        how_many = select.get("how-many")
        kind = "Selection" if not how_many or how_many == "one" else (
            f"Selection ({how_many.replace('-', ' ')})")
        return f"[{kind}: {choices}]"
    label = param.get("label")
    if not label:
        raise ValueError(f"parameter {param_id!r} has neither a label nor a selection")
    return f"[Assignment: {label}]"


def _prose(text: str, params: Mapping[str, Mapping[str, Any]], depth: int = 0) -> str:
    inserted = _INSERT.sub(lambda m: _param_text(m.group(1), params, depth), text)
    return _tidy(_markdown_links(inserted))


def _statement_lines(part: Mapping[str, Any], params: Mapping[str, Mapping[str, Any]]
                     ) -> list[str]:
    """A statement part and its items, in order, each item after its label ("a.", "1.",
    "(a)")."""
    lines = []
    prose = _prose(part.get("prose", ""), params)
    label = _prop(part, "label") if part.get("name") == "item" else None
    if label or prose:
        lines.append(" ".join(t for t in (label, prose) if t))
    for child in part.get("parts", ()):
        if child.get("name") == "item":
            lines += _statement_lines(child, params)
    return lines


def _walk(controls: Iterable[Mapping[str, Any]], parent: str | None = None
          ) -> Iterable[tuple[Mapping[str, Any], str | None]]:
    for control in controls:
        yield control, parent
        yield from _walk(control.get("controls", ()), control["id"])


def _target_name(href: str, labels: Mapping[str, str]) -> tuple[str | None, str]:
    """A withdrawn control's link target: (the control key it names, or None for a family;
    how NIST prints it: "AC-7", "AC-2k", "SR Family")."""
    target = href.lstrip("#")
    key, _, part = target.partition("_smt")
    if key in labels:
        return key, labels[key] + part.lstrip(".").replace(".", "")
    if re.fullmatch(r"[a-z]{2}", target):
        return None, f"{target.upper()} Family"
    raise ValueError(f"a withdrawn control links to the unknown {href!r}")


def compact_catalog(oscal: Mapping[str, Any], source: Mapping[str, str]) -> dict[str, Any]:
    """The catalog as `core.controls.catalog` reads it: per control its key, label, title,
    family, parent, statement (items flattened, parameters as NIST prints them), discussion,
    and for a withdrawn control where it went."""
    catalog = oscal["catalog"]
    metadata = catalog["metadata"]
    groups = catalog["groups"]
    everything = [(c, p, g["id"]) for g in groups for c, p in _walk(g.get("controls", ()))]
    params = {p["id"]: p for c, _, _ in everything for p in c.get("params", ())}
    labels = {c["id"]: _prop(c, "label") or c["id"].upper() for c, _, _ in everything}
    controls = []
    for control, parent, family in everything:
        parts = {p["name"]: p for p in control.get("parts", ())}
        withdrawn = _prop(control, "status") == "withdrawn"
        statement = "\n".join(_statement_lines(parts["statement"], params)) if (
            "statement" in parts) else ""
        moved_to: list[str] = []
        if withdrawn:
            targets = [(link["rel"], *_target_name(link["href"], labels))
                       for link in control.get("links", ())
                       if link.get("rel") in ("incorporated-into", "moved-to")]
            moved_to = list(dict.fromkeys(key for _, key, _ in targets if key))
            said = "; ".join(
                ("Incorporated into " if rel == "incorporated-into" else "Moved to ")
                + ", ".join(name for r, _, name in targets if r == rel)
                for rel in dict.fromkeys(rel for rel, _, _ in targets))
            reason = statement.rstrip(".") or said
            statement = f"[Withdrawn: {reason}.]" if reason else "[Withdrawn.]"
        controls.append({
            "key": control["id"],
            "id": labels[control["id"]],
            "title": _title(control["title"]),
            "family": family,
            "parent": parent,
            "statement": statement,
            "discussion": _prose(parts["guidance"]["prose"], params) if (
                "guidance" in parts) else "",
            "withdrawn": withdrawn,
            "moved_to": moved_to,
        })
    return {
        "name": "NIST SP 800-53 Rev. 5",
        "title": metadata["title"],
        "version": metadata["version"],
        "oscal_version": metadata["oscal-version"],
        "last_modified": metadata["last-modified"],
        "source": dict(source),
        "terms": TERMS,
        "families": {g["id"]: g["title"] for g in groups},
        "controls": controls,
    }


# The crosswalk ----------------------------------------------------------------------------

_ANNEX_A = re.compile(r"^A\.(\d{1,2})\.(\d{1,2})\.(\d{1,2})$")
_CLAUSE = re.compile(r"^\d{1,2}(?:\.\d{1,2}){0,2}$")
_NIST_ID = re.compile(r"^([A-Z]{2})-(\d{1,2})(?:\((\d{1,2})\))?$")
_ROW_ANNEX_A = re.compile(r"^(A\.\d{1,2}\.\d{1,2}\.\d{1,2})\s")
_ROW_CLAUSE = re.compile(r"^(\d{1,2}(?:\.\d{1,2}){1,2})\s")
_ALL_FIRST_CONTROLS = "all xx-1 controls"


@dataclass
class _Pair:
    partial: bool = False
    tables: set[str] = field(default_factory=set)


@dataclass
class MappingRead:
    """What the NIST document's two tables give, and what of them is left out."""

    pairs: dict[tuple[str, str], _Pair] = field(default_factory=dict)
    # table -> the pairs naming an ISO/IEC 27001 main clause (4-10), left out
    clause_pairs: dict[str, int] = field(default_factory=lambda: {"1": 0, "2": 0})
    clauses: set[str] = field(default_factory=set)
    left_out: list[str] = field(default_factory=list)  # cells that name no control

    def add(self, key: str, iso_id: str, partial: bool, table: str) -> None:
        pair = self.pairs.setdefault((key, iso_id), _Pair())
        pair.partial = pair.partial or partial
        pair.tables.add(table)


def nist_key(text: str) -> str | None:
    """"AC-19(4)" -> "ac-19.4"; None for text that is no 800-53 id."""
    match = _NIST_ID.match(re.sub(r"\s+", "", text).upper())
    if match is None:
        return None
    family, number, enhancement = match.groups()
    key = f"{family.lower()}-{int(number)}"
    return f"{key}.{int(enhancement)}" if enhancement else key


def iso_sort_key(iso_id: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", iso_id))


def _cells(row: Any) -> list[str]:
    return [cell.text.strip() for cell in row.cells]


def _table_2_controls(cell: str, known: set[str], first_controls: Sequence[str]
                      ) -> Iterable[tuple[str | None, str, bool]]:
    """A Table 2 cell's 800-53 controls: (key, or None for text naming no control; the text;
    asterisk)."""
    for token in (t.strip() for t in cell.split(",")):
        if not token:
            continue
        partial = token.endswith("*")
        bare = token.rstrip("*").strip()
        if bare.lower() == _ALL_FIRST_CONTROLS:
            # Every family's policy-and-procedures control as Table 1 lists them: PT-1 maps
            # to nothing there (ISO/IEC 27001 does not address the processing of PII).
            for first in first_controls:
                if first != "pt-1":
                    yield first, token, partial
            continue
        key = nist_key(bare)
        if key is not None and key not in known:
            raise ValueError(f"Table 2 names {token!r}, which is no control of the catalog")
        yield key, token, partial


def read_mapping(path: Path, catalog_keys: Sequence[str]) -> MappingRead:
    """Table 1 (800-53 control -> ISO/IEC 27001) and Table 2 (ISO/IEC 27001 -> 800-53, where
    the few enhancements NIST maps are named) of NIST's document, as (800-53 key, Annex A id)
    pairs. An asterisk on either side marks the pair partial."""
    import docx  # python-docx: a dependency of the project already

    document = docx.Document(str(path))
    if len(document.tables) != 2:
        raise ValueError(f"{path.name}: expected NIST's two mapping tables, found "
                         f"{len(document.tables)}")
    known = set(catalog_keys)
    first_controls = [k for k in catalog_keys if re.fullmatch(r"[a-z]{2}-1", k)]
    read = MappingRead()
    table_1, table_2 = document.tables
    # Table 1: one row per base control; the third cell lists ISO ids, "None" or "---".
    for row in table_1.rows[1:]:
        nist, _title, iso = _cells(row)[:3]
        key = nist_key(nist)
        if key is None or key not in known:
            raise ValueError(f"Table 1 names {nist!r}, which is no control of the catalog")
        for token in re.split(r"[,\s]+", iso):
            bare = token.rstrip("*")
            if not bare or bare.lower() in ("none", "---"):
                continue
            if _ANNEX_A.match(bare):
                read.add(key, bare, token.endswith("*"), "1")
            elif _CLAUSE.match(bare):
                read.clause_pairs["1"] += 1
                read.clauses.add(bare)
            else:
                read.left_out.append(f"Table 1, {nist}: {token!r}")
    # Table 2: a row per ISO requirement or control, "A.9.4.2 Secure logon procedures".
    for row in table_2.rows:
        iso_cell, nist_cell = _cells(row)[:2]
        annex_a = _ROW_ANNEX_A.match(iso_cell + " ")
        clause = _ROW_CLAUSE.match(iso_cell + " ")
        if annex_a is None and clause is None:
            continue  # a heading row ("A.9.4 System and application access control")
        for key, token, partial in _table_2_controls(nist_cell, known, first_controls):
            if clause is not None:
                read.clause_pairs["2"] += 1
                read.clauses.add(clause.group(1))
            elif key is None:
                read.left_out.append(f"Table 2, {annex_a.group(1)}: {token!r}")
            else:
                read.add(key, annex_a.group(1), partial, "2")
    return read


def crosswalk_rows(read: MappingRead, catalog_keys: Sequence[str]) -> list[list[str]]:
    """The CSV's rows, in catalog order, each control's ISO ids in the standard's order."""
    order = {key: i for i, key in enumerate(catalog_keys)}
    rows = []
    for (key, iso_id), pair in sorted(read.pairs.items(),
                                      key=lambda kv: (order[kv[0][0]], iso_sort_key(kv[0][1]))):
        rows.append([key, iso_id, "true" if pair.partial else "false",
                     "+".join(sorted(pair.tables))])
    return rows


# Writing ----------------------------------------------------------------------------------


def git_blob_hash(data: bytes) -> str:
    """The hash git gives the file's content, so the source's version can be checked."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def write_catalog(compact: Mapping[str, Any], path: Path) -> None:
    text = json.dumps(compact, ensure_ascii=False, separators=(",", ":"))
    with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                                               compresslevel=9, mtime=0) as out:
        out.write(text.encode("utf-8"))


def write_crosswalk(rows: Sequence[Sequence[str]], path: Path) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CROSSWALK_COLUMNS)
    writer.writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")


def build(catalog_path: Path, mapping_path: Path, outdir: Path, commit: str = CATALOG_COMMIT,
          source_path: str = CATALOG_PATH) -> list[str]:
    """Writes both files; returns what was done and left out, a line each."""
    raw = catalog_path.read_bytes()
    source = {"repository": REPOSITORY, "path": source_path, "commit": commit,
              "blob": git_blob_hash(raw)}
    compact = compact_catalog(json.loads(raw), source)
    keys = [c["key"] for c in compact["controls"]]
    read = read_mapping(mapping_path, keys)
    rows = crosswalk_rows(read, keys)
    outdir.mkdir(parents=True, exist_ok=True)
    write_catalog(compact, outdir / CATALOG_FILE)
    write_crosswalk(rows, outdir / CROSSWALK_FILE)
    withdrawn = sum(c["withdrawn"] for c in compact["controls"])
    by_table = {t: sum(r[3] == t for r in rows) for t in ("1+2", "1", "2")}
    return [
        f"{CATALOG_FILE}: {compact['name']} {compact['version']} ({compact['last_modified']}),"
        f" {len(keys)} controls and enhancements ({withdrawn} withdrawn),"
        f" {len(compact['families'])} families",
        f"{CROSSWALK_FILE}: {len(rows)} pairs ({by_table['1+2']} in both tables,"
        f" {by_table['1']} in Table 1 only, {by_table['2']} in Table 2 only),"
        f" {sum(r[2] == 'true' for r in rows)} partial,"
        f" {len({r[0] for r in rows})} controls, {len({r[1] for r in rows})} Annex A ids",
        f"left out: {read.clause_pairs['1']} pairs of Table 1 and {read.clause_pairs['2']} of"
        f" Table 2 naming one of {len(read.clauses)} main clauses (4-10)",
        *(f"left out: {cell}" for cell in read.left_out),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.controls.build_data",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("catalog", type=Path, help="NIST_SP-800-53_rev5_catalog.json (OSCAL)")
    parser.add_argument("mapping", type=Path, help="NIST's 800-53 Rev. 5 to ISO/IEC 27001 docx")
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--commit", default=CATALOG_COMMIT,
                        help="the usnistgov/oscal-content commit the catalog was taken from")
    parser.add_argument("--path", default=CATALOG_PATH, dest="source_path",
                        help="the catalog's path in that repository")
    args = parser.parse_args(argv)
    for line in build(args.catalog, args.mapping, args.outdir, args.commit, args.source_path):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
