"""The NIST SP 800-53 Rev. 5 catalog the package ships: every control and enhancement with its
id as NIST writes it, title, statement and discussion, read once per process from
`data/nist-sp800-53-rev5.json.gz` (built from NIST's OSCAL catalog by `build_data`; where it
comes from and its terms are in `data/SOURCES.md`).

A statement reads as NIST prints it: its items one a line after their labels ("a.", "1.",
"(a)"), each parameter as its assignment or selection ("[Assignment: organization-defined
number]", "[Selection (one or more): ...]"). A withdrawn control stays in the catalog, its
statement saying where it went ("[Withdrawn: Incorporated into AC-7.]") and `moved_to`
naming those controls' keys."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any

CATALOG_FILE = "nist-sp800-53-rev5.json.gz"


@dataclass(frozen=True)
class Control:
    """One control or enhancement of the catalog."""

    key: str  # "ac-7", "ac-2.1": the OSCAL id
    id: str  # "AC-7", "AC-2(1)": as NIST writes it
    title: str
    statement: str
    discussion: str
    family: str  # "Access Control"
    parent: str | None  # "ac-2" for "ac-2.1"
    withdrawn: bool = False
    # The keys of the controls a withdrawn one was incorporated into or moved to (SA-12,
    # incorporated into a whole family, names it in its statement only).
    moved_to: tuple[str, ...] = ()

    def search_text(self, words: int = 80) -> str:
        """"AC-7 Unsuccessful Logon Attempts. Enforce a limit of ...": the id, the title and
        at most `words` words of the statement, on one line; joined to the text an answer
        keyed by this control is searched by."""
        statement = " ".join(self.statement.split()[:max(words, 0)])
        return f"{self.id} {self.title}. {statement}".rstrip()


@dataclass(frozen=True)
class Catalog:
    """The catalog as shipped: its edition, where it was taken from, and its controls."""

    name: str  # "NIST SP 800-53 Rev. 5"
    version: str  # "5.0.1"
    last_modified: str  # the OSCAL file's last-modified timestamp
    # "usnistgov/oscal-content@a849dbca, nist.gov/SP800-53/rev5/json/..."
    source: str
    terms: str
    controls: Mapping[str, Control]  # by key, in catalog order

    def get(self, key: str) -> Control | None:
        return self.controls.get(key)

    def current(self) -> list[Control]:
        """The controls and enhancements not withdrawn, in catalog order."""
        return [c for c in self.controls.values() if not c.withdrawn]


def _source_text(source: Mapping[str, str]) -> str:
    repository = source["repository"].removeprefix("https://github.com/").rstrip("/")
    return f"{repository}@{source['commit'][:8]}, {source['path']}"


def catalog_from(data: Mapping[str, Any]) -> Catalog:
    """A catalog from the compact form `build_data` writes."""
    families = data["families"]
    controls = {
        c["key"]: Control(key=c["key"], id=c["id"], title=c["title"], statement=c["statement"],
                          discussion=c["discussion"], family=families[c["family"]],
                          parent=c["parent"], withdrawn=bool(c["withdrawn"]),
                          moved_to=tuple(c["moved_to"]))
        for c in data["controls"]
    }
    return Catalog(name=data["name"], version=data["version"],
                   last_modified=data["last_modified"], source=_source_text(data["source"]),
                   terms=data["terms"], controls=MappingProxyType(controls))


def catalog_data() -> dict[str, Any]:
    """The shipped file as written, read afresh: for what `Catalog` leaves out (the OSCAL
    version, the source's full commit and blob hash, the families' codes)."""
    packed = (resources.files("core.controls") / "data" / CATALOG_FILE).read_bytes()
    return json.loads(gzip.decompress(packed))


@lru_cache(maxsize=1)
def nist_catalog() -> Catalog:
    """The shipped NIST SP 800-53 Rev. 5 catalog, read once per process."""
    return catalog_from(catalog_data())
