"""Control implementation statements read as a round: what a vendor's system says it does for
each control of a standard, one answer per control id, in the forms compliance tools write:

- OpenControl components (YAML). A system's `opencontrol.yaml` names it and lists its
  component folders, each holding a `component.yaml`: a bare list of controls
  (`control_key: AC-2 (1)`, `standard_key`, `implementation_status`, `narrative: [{key: a,
  text: ...}]`, or one part without a key), or a mapping with the component's `name` and such
  a list under `satisfies`, as the file merged from every family is (its families sometimes
  left as further YAML documents of the file, each a bare list).
- OSCAL component definitions (`components[].control-implementations[]
  .implemented-requirements[]`, each with its `description` and `statements` by statement id
  `ac-2.1_smt.a`) and system security plans (`control-implementation
  .implemented-requirements[]`, what each component of the system does under the requirement
  and under each of its statements), in JSON, YAML or XML. A parameter the file sets
  (`{{ insert: param, ac-1_prm_1 }}`) reads as its value.

An answer is keyed by the control id as the file writes it ("AC-2 (1)", "ac-2.1", "CIS-1.2.1").
Its parts (narrative keys, statement ids) are joined under it in order, each
labelled ("Part a: ..."); where several components speak to a control each says so under its
name; and the implementation status leads the answer, as a reviewer reads it first. The files
of one system (one `opencontrol.yaml`, one OSCAL system name or definition title) make one
round: an OSCAL document in several forms (JSON, YAML, XML) is read once, two files saying
the same of a control read it once, and two saying different things of one control for one
component are refused.

Every file keeps the line of each thing it holds, so an answer names the line it was read
from and a file that is not what it claims is refused naming the line; XML that declares a
document type or entities is refused unread."""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import os
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.controls.answers import control_question
from core.errors import UserInputError, shown_path
from core.ingest import decode_utf8, read_user_file
from core.ingest.rounds.answers import Layout, LayoutAnswer, LayoutRead
from core.ingest.rounds.table_round import SpreadsheetRound, layout_round
from core.models import PayloadLimits

STATEMENT_SUFFIXES = (".yaml", ".yml", ".json", ".xml")
MANIFEST_NAMES = ("opencontrol.yaml", "opencontrol.yml")
COMPONENT_NAMES = ("component.yaml", "component.yml")
OSCAL_NAMESPACE = "http://csrc.nist.gov/ns/oscal/1.0"
_MANIFEST_DEPTH = 4  # folders above a component file searched for its system's manifest
_LISTED_IDS = 6  # control ids a note names before it counts the rest

_LAYOUT = Layout(key="control-statements", family="control implementation statements",
                 id_pattern=re.compile(r".+"), headers={}, required=())
_KINDS = {"component-definition": "OSCAL component definition",
          "system-security-plan": "OSCAL system security plan"}
_PARAMETER = re.compile(r"\{\{\s*insert:\s*param\s*,\s*([^\s}]+)\s*\}\}")
_STATEMENT_PART = re.compile(r"_s(?:m|tm)t((?:\.[^.]*)*)$")
# JSON that means to be an OSCAL plan or definition, though it cannot be read as JSON.
_OSCAL_KEY = re.compile(r'^\s*\{\s*"(?:component-definition|system-security-plan)"\s*:')
_WORDS = re.compile(r"[\W_]+")  # what is not a word: markup, punctuation, spaces
_PART_KEY = re.compile(r"[A-Za-z0-9]{1,4}(?:\.[A-Za-z0-9]{1,4})*")


def is_statement_file(path: Path | str) -> bool:
    """Whether a file may hold control implementation statements, by its name alone."""
    return Path(path).suffix.lower() in STATEMENT_SUFFIXES


def is_manifest(path: Path | str) -> bool:
    return Path(path).name.lower() in MANIFEST_NAMES


# What a file holds, with the lines it was read from ------------------------------------


class _Map(dict):
    """A mapping read from a file, with the line it begins on and its keys' lines."""

    line: int | None = None
    key_lines: dict[str, int]

    def line_of(self, key: str) -> int | None:
        return getattr(self, "key_lines", {}).get(key, self.line)


class _List(list):
    line: int | None = None


class _Malformed(Exception):
    """A file that is not what it claims: what is wrong, and where (None where nothing read
    gives a line)."""

    def __init__(self, problem: str, line: int | None):
        super().__init__(problem)
        self.problem = problem
        self.line = line


def _malformed(problem: str, node: Any, key: str | None = None) -> _Malformed:
    if isinstance(node, _Map) and key is not None:
        return _Malformed(problem, node.line_of(key))
    return _Malformed(problem, getattr(node, "line", None))


def _yaml_documents(name: str, text: str) -> list[Any]:
    """Every YAML document of the file (PyYAML's safe loader), mappings and lists knowing
    their lines; a syntax error is refused naming its line."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[valid-type, misc]
        # A plain scalar is the text written ("1.10", "No", "2024-01-31"), or nothing when
        # left empty: YAML's guesses at numbers, booleans and dates would change an id or a
        # narrative, and these files hold text.
        yaml_implicit_resolvers = {
            first: [(tag, pattern) for tag, pattern in found if tag.endswith(":null")]
            for first, found in base.yaml_implicit_resolvers.items()}

    def mapping(loader: Any, node: Any) -> _Map:
        out = _Map(loader.construct_mapping(node, deep=True))
        out.line = node.start_mark.line + 1
        out.key_lines = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            if isinstance(key, str):
                out.key_lines.setdefault(key, key_node.start_mark.line + 1)
        return out

    def sequence(loader: Any, node: Any) -> _List:
        out = _List(loader.construct_sequence(node, deep=True))
        out.line = node.start_mark.line + 1
        return out

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, sequence)
    try:
        # An alias repeats what its anchor holds without writing it out: a few lines can
        # stand for more than any file holds, so a file that uses one is refused.
        alias = next((e for e in yaml.parse(text, Loader=base)
                      if isinstance(e, yaml.AliasEvent)), None)
        if alias is not None:
            raise UserInputError(
                f"{name} uses a YAML alias (*{alias.anchor} at line "
                f"{alias.start_mark.line + 1}), which the workbench does not read; write "
                "the value out where it is used.")
        return list(yaml.load_all(text, Loader=Loader))  # noqa: S506 - a safe loader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(str(exc.problem or exc.context or "it cannot be read").split())
        raise UserInputError(f"{name} is not valid YAML ({problem}{where}).") from None
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        raise UserInputError(f"{name} is not valid YAML ({problem}).") from None
    except RecursionError:
        problem = "it is nested too deeply to read"
        raise UserInputError(f"{name} is not valid YAML ({problem}).") from None


def _json_value(text: str, *, lined: bool) -> Any:
    """The file's JSON; with `lined`, objects and arrays knowing their lines (read by the
    Python scanner, whose hooks see where each begins)."""
    if not lined:
        return json.loads(text)
    starts = [0, *(m.end() for m in re.finditer("\n", text))]

    def parse_object(s_and_end: tuple[str, int], *args: Any) -> tuple[_Map, int]:
        value, end = json.decoder.JSONObject(s_and_end, *args)
        out = _Map(value)
        out.line = bisect_right(starts, s_and_end[1] - 1)
        return out, end

    def parse_array(s_and_end: tuple[str, int], *args: Any) -> tuple[_List, int]:
        value, end = json.decoder.JSONArray(s_and_end, *args)
        out = _List(value)
        out.line = bisect_right(starts, s_and_end[1] - 1)
        return out, end

    decoder = json.JSONDecoder()
    decoder.parse_object = parse_object  # type: ignore[attr-defined]
    decoder.parse_array = parse_array  # type: ignore[attr-defined]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    return decoder.decode(text)


# XML: OSCAL's elements as the JSON model names them ---------------------------------------

# Elements that repeat, under the plural name OSCAL's JSON gives their array.
_PLURAL = {"component": "components", "control-implementation": "control-implementations",
           "implemented-requirement": "implemented-requirements", "statement": "statements",
           "by-component": "by-components", "prop": "props", "set-parameter": "set-parameters",
           "value": "values", "link": "links", "responsible-role": "responsible-roles"}
_MARKUP = {"description", "remarks", "purpose"}  # multi-line markup: paragraphs, lists
_BLOCKS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "table", "tr"}
_INLINE = {"a", "b", "i", "em", "strong", "code", "q", "sub", "sup", "span", "img", "insert"}


@dataclass
class _Element:
    tag: str  # the local name
    namespace: str
    attrs: dict[str, str]
    line: int
    content: list[Any] = field(default_factory=list)  # text and child elements, in order

    def children(self) -> list[_Element]:
        return [c for c in self.content if isinstance(c, _Element)]


class _Declared(Exception):
    def __init__(self, line: int):
        self.line = line


class _Other(Exception):
    """The root element is no OSCAL plan or definition: the rest is not read."""


def _xml_root(name: str, data: bytes) -> _Element | None:
    """The root element of an OSCAL plan or definition, read by expat with every element's
    line; None for any other XML (read no further than its root). A document type or entity
    declaration is refused before anything it declares could be expanded."""
    from xml.parsers import expat

    parser = expat.ParserCreate(namespace_separator=" ")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.buffer_text = True
    stack: list[_Element] = []
    roots: list[_Element] = []

    def declared(*_: Any) -> None:
        raise _Declared(parser.CurrentLineNumber)

    def start(tag: str, attrs: dict[str, str]) -> None:
        namespace, _, local = tag.rpartition(" ")
        if not stack and (local not in _KINDS or namespace not in (OSCAL_NAMESPACE, "")):
            raise _Other
        element = _Element(local, namespace, {k.rpartition(" ")[2]: v for k, v in attrs.items()},
                           parser.CurrentLineNumber)
        (stack[-1].content if stack else roots).append(element)
        stack.append(element)

    def end(_tag: str) -> None:
        stack.pop()

    def text(data: str) -> None:
        if stack:
            stack[-1].content.append(data)

    parser.StartDoctypeDeclHandler = declared
    parser.EntityDeclHandler = declared
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    try:
        parser.Parse(data, True)
    except _Other:
        return None
    except _Declared as exc:
        raise UserInputError(
            f"{name} declares a document type or entities (line {exc.line}), which OSCAL XML "
            "does not use and the workbench does not read; remove the declaration.") from None
    except expat.ExpatError as exc:
        raise UserInputError(
            f"{name} is not well-formed XML ({expat.ErrorString(exc.code)} at line "
            f"{exc.lineno}, column {exc.offset + 1}).") from None
    except RecursionError:
        raise UserInputError(f"{name} is not well-formed XML (it is nested too deeply to "
                             "read).") from None
    return roots[0]


def _inline_text(element: _Element) -> str:
    """An inline element's text; an `insert` as the marker JSON writes for it."""
    if element.tag == "insert":
        return (f"{{{{ insert: {element.attrs.get('type', 'param')}, "
                f"{element.attrs.get('id-ref', '')} }}}}")
    return "".join(item if isinstance(item, str) else _inline_text(item)
                   for item in element.content)


def _markup_text(element: _Element) -> str:
    """OSCAL markup (paragraphs, headings, lists, inline emphasis) as plain paragraphs."""
    paragraphs: list[str] = []
    current: list[str] = []

    def flush() -> None:
        text = " ".join("".join(current).split())
        if text:
            paragraphs.append(text)
        current.clear()

    def walk(node: _Element) -> None:
        for item in node.content:
            if isinstance(item, str):
                current.append(item)
            elif item.tag == "li":
                flush()
                current.append("- ")
                walk(item)
                flush()
            elif item.tag in ("ul", "ol") or item.tag in _BLOCKS:
                flush()
                walk(item)
                flush()
            else:
                current.append(_inline_text(item))

    walk(element)
    flush()
    return "\n\n".join(paragraphs)


def _xml_value(element: _Element) -> Any:
    """An element as OSCAL's JSON has it: markup as text, a plain element as its text, any
    other as a mapping of its attributes and children (repeated ones as lists)."""
    if element.tag in _MARKUP:
        return _markup_text(element)
    children = element.children()
    if not element.attrs and all(c.tag in _INLINE for c in children):
        return " ".join(_inline_text(element).split())
    out = _Map(element.attrs)
    out.line = element.line
    out.key_lines = {}
    for child in children:
        # A definition's component has control implementations; a plan has one.
        plural = (_PLURAL.get(child.tag) if child.tag != "control-implementation"
                  or element.tag == "component" else None)
        if plural is not None:
            if plural not in out:
                out[plural] = _List()
                out[plural].line = child.line
            out[plural].append(_xml_value(child))
        elif child.tag not in out:
            out[child.tag] = _xml_value(child)
        out.key_lines.setdefault(plural or child.tag, child.line)
    return out


# The statements read ----------------------------------------------------------------------


@dataclass
class _Said:
    """What one file says of one control for one component (None where it names none)."""

    control_id: str
    component: str | None
    line: int
    statuses: list[str] = field(default_factory=list)
    parts: list[tuple[str | None, str]] = field(default_factory=list)  # (part key, text)
    extras: dict[str, list[str]] = field(default_factory=dict)

    def take(self, other: _Said) -> None:
        """Join what the file says of the control elsewhere (another implementation)."""
        _add(self.statuses, other.statuses)
        _add(self.parts, other.parts)
        for key, values in other.extras.items():
            _add(self.extras.setdefault(key, []), values)

    def content(self) -> tuple[Any, ...]:
        """What the statement says, whatever its markup ("**how**", `code`, an escaped
        quote): two files that differ only there say the same."""
        return (tuple(self.statuses),
                tuple((key, _WORDS.sub("", text).lower()) for key, text in self.parts))


def _add(into: list[Any], items: Iterable[Any]) -> None:
    for item in items:
        if item not in into:
            into.append(item)


@dataclass(frozen=True)
class StatementFile:
    """One file read: a system's OpenControl manifest (`components` lists its component
    folders), or statements of controls."""

    path: Path
    name: str  # as sentences name it
    kind: str  # opencontrol-system | opencontrol | component-definition | system-security-plan
    layout: str  # "OpenControl component (NIST-800-53)", "OSCAL system security plan 1.0.4"
    title: str | None  # the system's name, the component's, or the definition's title
    said: list[_Said] = field(default_factory=list)
    document: str | None = None  # an OSCAL document's uuid: its other forms share it
    components: list[Path] = field(default_factory=list)  # a manifest's component folders

    @property
    def group_key(self) -> tuple[str, str] | None:
        """OSCAL files of one system, or of one definition's title, are read together."""
        if self.kind in _KINDS and self.title:
            return (self.kind, self.title)
        return None


def _text(value: Any, problem: str, node: Any, key: str | None = None) -> str:
    """A scalar as text ("" for none); a list or mapping where text belongs is refused."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value).strip()
    raise _malformed(problem, node, key)


def _items(node: Any, key: str, what: str) -> list[Any]:
    """`node[key]` as a list (none for an absent key or an empty value)."""
    value = node.get(key) if isinstance(node, dict) else None
    if value is None:
        return []
    if not isinstance(value, list):
        raise _malformed(f"{what} is not a list", node, key)
    return value


def _mapping(value: Any, problem: str, parent: Any, key: str | None = None) -> dict:
    if not isinstance(value, dict):
        raise _malformed(problem, value if isinstance(value, _List) else parent, key)
    return value


def _line(node: Any) -> int:
    return getattr(node, "line", None) or 0


def _control_id(value: Any, what: str, node: Any, key: str) -> str:
    control_id = _text(value, f"{what} is not text", node, key)
    if not control_id:
        raise _malformed(f"{what} has no {key}", node, key if key in node else None)
    if len(control_id) > 64 or "\n" in control_id:
        raise _malformed(f"{what} has a {key} longer than one line of 64 characters", node, key)
    return control_id


_KEPT_LINE = re.compile(r"^(?:\s|[-*+>#|$]|\d+[.)]\s)")


def _unwrapped(text: str) -> str:
    """Prose as a reader sees it: the lines a file wraps a paragraph over joined, paragraphs
    kept apart; a paragraph of list items, commands or indented lines is kept as it is."""
    paragraphs = []
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        lines = [line.rstrip() for line in paragraph.split("\n")]
        if any(_KEPT_LINE.match(line) for line in lines[1:]) or _KEPT_LINE.match(lines[0]):
            paragraphs.append("\n".join(lines))
        else:
            paragraphs.append(" ".join(line.strip() for line in lines if line.strip()))
    return "\n\n".join(p for p in paragraphs if p)


def _opencontrol(documents: list[Any], listed: bool) -> tuple[str | None, list[_Said],
                                                             list[str]] | None:
    """An OpenControl component's controls, its name and its standards; None when the YAML
    is no component (nor listed as one by its system's manifest)."""
    first = next((d for d in documents if d is not None), None)
    recognised = listed or (isinstance(first, dict) and "satisfies" in first) or (
        isinstance(first, list)
        and any(isinstance(i, dict) and "control_key" in i for i in first))
    if not recognised:
        return None
    name: str | None = None
    said: list[_Said] = []
    standards: list[str] = []
    for document in documents:
        if document is None:
            continue
        if isinstance(document, dict):
            if "satisfies" not in document:
                raise _malformed("a YAML document of the file has no satisfies (the list of "
                                 "controls)", document)
            name = name or _text(document.get("name"), "name is not text", document,
                                 "name") or None
            controls = _items(document, "satisfies", "satisfies")
            where: Any = document.get("satisfies") or document
        elif isinstance(document, list):
            controls, where = document, document
        else:
            raise _malformed("a YAML document of the file is neither a component nor a list "
                             "of controls", first)
        for item in controls:
            control = _mapping(item, "an item of the list of controls is not a control (a "
                                     "mapping with control_key)", where)
            said.append(_opencontrol_control(control, name, standards))
    for one in said:
        one.component = name
    return name, said, standards


def _opencontrol_control(control: dict, name: str | None, standards: list[str]) -> _Said:
    control_id = _control_id(control.get("control_key"), "a control", control, "control_key")
    what = f"the narrative of {control_id}"
    standard = _text(control.get("standard_key"), f"the standard_key of {control_id} is not "
                     "text", control, "standard_key")
    status = _text(control.get("implementation_status"), f"the implementation_status of "
                   f"{control_id} is not text", control, "implementation_status")
    narrative = control.get("narrative")
    if isinstance(narrative, dict):
        narrative = [narrative]
    elif isinstance(narrative, str):
        narrative = [{"text": narrative}]
    elif narrative is None:
        narrative = []
    elif not isinstance(narrative, list):
        raise _malformed(f"{what} is not a list of parts (key, text)", control, "narrative")
    parts: list[tuple[str | None, str]] = []
    for part in narrative:
        if isinstance(part, str):
            part = {"text": part}
        if not isinstance(part, dict):
            raise _malformed(f"{what} is not a list of parts (key, text)", control,
                             "narrative")
        key = _text(part.get("key"), f"a part's key in {what} is not text", part, "key")
        text = _text(part.get("text"), f"a part's text in {what} is not text", part, "text")
        if text:
            parts.append((key or None, _unwrapped(text)))
    said = _Said(control_id, name, _line(control), [status] if status else [], parts)
    if standard:
        said.extras["standard"] = [standard]
        _add(standards, [standard])
    covered = [" / ".join(str(v) for v in c.values()) if isinstance(c, dict) else str(c)
               for c in _items(control, "covered_by", f"the covered_by of {control_id}")]
    if covered:
        said.extras["covered_by"] = covered
    return said


def _parameters(node: Any, into: dict[str, str]) -> dict[str, str]:
    """The parameters a requirement, statement or component sets, over those set above it."""
    found = dict(into)
    for setting in _items(node, "set-parameters", "set-parameters"):
        if isinstance(setting, dict) and isinstance(setting.get("param-id"), str):
            values = [str(v) for v in setting.get("values") or [] if isinstance(v, str | int)]
            if values:
                found[setting["param-id"]] = ", ".join(values)
    return found


def _filled(text: str, parameters: dict[str, str]) -> str:
    return _unwrapped(_PARAMETER.sub(lambda m: parameters.get(m.group(1), f"[{m.group(1)}]"),
                                     text))


def _props(node: Any, name: str) -> list[str]:
    return [str(p["value"]).strip() for p in _items(node, "props", "props")
            if isinstance(p, dict) and p.get("name") == name and p.get("value") is not None]


def _part(statement_id: str, control_id: str) -> str | None:
    """The part a statement id names: 'a' of ac-2_smt.a, 'a.1' of ac-1_smt.a.1, none of
    ac-2_smt (the whole control)."""
    found = _STATEMENT_PART.search(statement_id)
    if found is not None:
        return ".".join(p for p in found.group(1).split(".") if p) or None
    if statement_id.lower().startswith(control_id.lower()):
        return statement_id[len(control_id):].strip("._- ") or None
    return statement_id or None


def _description(node: dict, key: str, what: str) -> str:
    return _text(node.get(key), f"the {key} of {what} is not text", node, key)


def _oscal(root: dict, kind: str) -> tuple[str | None, str | None, list[_Said]]:
    """An OSCAL file's title (the system's name for a plan), OSCAL version and statements."""
    metadata = root.get("metadata") if isinstance(root.get("metadata"), dict) else {}
    version = _text(metadata.get("oscal-version"), "oscal-version is not text", metadata,
                    "oscal-version") or None
    said: list[_Said] = []
    if kind == "component-definition":
        title = _text(metadata.get("title"), "the title is not text", metadata, "title")
        for component in _items(root, "components", "components"):
            component = _mapping(component, "a component is not an object", root,
                                 "components")
            name = _text(component.get("title"), "a component's title is not text",
                         component, "title") or None
            for implementation in _items(component, "control-implementations",
                                         "control-implementations"):
                implementation = _mapping(implementation, "a control implementation is not "
                                          "an object", component, "control-implementations")
                parameters = _parameters(implementation, {})
                for requirement in _requirements(implementation):
                    said.append(_defined(requirement, name, parameters))
        return title or None, version, said
    characteristics = root.get("system-characteristics")
    title = _text(characteristics.get("system-name"), "system-name is not text",
                  characteristics, "system-name") if isinstance(characteristics, dict) else ""
    names = {}
    implementation = root.get("system-implementation")
    if isinstance(implementation, dict):
        for component in _items(implementation, "components", "components"):
            if isinstance(component, dict) and isinstance(component.get("uuid"), str):
                names[component["uuid"]] = _text(component.get("title"), "a component's "
                                                 "title is not text", component, "title")
    controls = root.get("control-implementation")
    if controls is None:
        return title or None, version, said
    controls = _mapping(controls, "control-implementation is not an object", root,
                        "control-implementation")
    parameters = _parameters(controls, {})
    for requirement in _requirements(controls):
        said.extend(_planned(requirement, names, parameters))
    return title or None, version, said


def _requirements(node: dict) -> list[dict]:
    found = _items(node, "implemented-requirements", "implemented-requirements")
    return [_mapping(r, "an implemented requirement is not an object", node,
                     "implemented-requirements") for r in found]


def _defined(requirement: dict, component: str | None, above: dict[str, str]) -> _Said:
    """A component definition's requirement: its description, then its statements."""
    control_id = _control_id(requirement.get("control-id"), "an implemented requirement",
                             requirement, "control-id")
    parameters = _parameters(requirement, above)
    said = _Said(control_id, component, _line(requirement),
                 [s for s in _props(requirement, "implementation-status") if s])
    text = _filled(_description(requirement, "description", control_id), parameters)
    if text:
        said.parts.append((None, text))
    for statement in _items(requirement, "statements", f"the statements of {control_id}"):
        statement = _mapping(statement, f"a statement of {control_id} is not an object",
                             requirement, "statements")
        statement_id = _text(statement.get("statement-id"), f"a statement-id of {control_id} "
                             "is not text", statement, "statement-id")
        text = _filled(_description(statement, "description", control_id),
                       _parameters(statement, parameters))
        if text:
            said.parts.append((_part(statement_id, control_id), text))
    return said


def _planned(requirement: dict, names: dict[str, str], above: dict[str, str]) -> list[_Said]:
    """A plan's requirement: what each component of the system does under it and under each
    statement, with the status the requirement or the component gives."""
    control_id = _control_id(requirement.get("control-id"), "an implemented requirement",
                             requirement, "control-id")
    parameters = _parameters(requirement, above)
    line = _line(requirement)
    whole = _Said(control_id, None, line,
                  [s for s in _props(requirement, "implementation-status") if s])
    origins = [o for o in _props(requirement, "control-origination") if o]
    if origins:
        whole.extras["control_origination"] = origins
    by_component: dict[str | None, _Said] = {}
    sources: list[tuple[str | None, dict]] = [(None, requirement)]  # (statement id, node)
    for statement in _items(requirement, "statements", f"the statements of {control_id}"):
        statement = _mapping(statement, f"a statement of {control_id} is not an object",
                             requirement, "statements")
        sources.append((_text(statement.get("statement-id"), f"a statement-id of "
                              f"{control_id} is not text", statement, "statement-id"),
                        statement))
    for statement_id, source in sources:
        part = _part(statement_id, control_id) if statement_id is not None else None
        for by in _items(source, "by-components", f"the by-components of {control_id}"):
            by = _mapping(by, f"a by-component of {control_id} is not an object", source,
                          "by-components")
            uuid = by.get("component-uuid")
            name = names.get(uuid) if isinstance(uuid, str) else None
            one = by_component.setdefault(name, _Said(control_id, name, line))
            text = _filled(_description(by, "description", control_id),
                           _parameters(by, _parameters(source, parameters)))
            if text:
                _add(one.parts, [(part, text)])
            status = by.get("implementation-status")
            state = status.get("state") if isinstance(status, dict) else status
            _add(one.statuses, [s for s in [_text(state, f"the implementation-status of "
                                                 f"{control_id} is not text", by,
                                                 "implementation-status")] if s])
            _add(one.statuses, [s for s in _props(by, "implementation-status") if s])
            if name:
                one.extras["component"] = [name]
    if not by_component:
        return [whole]
    for one in by_component.values():
        one.extras.update(whole.extras)
        if whole.statuses and not one.statuses:
            one.statuses = list(whole.statuses)
    return list(by_component.values())


# Reading a file -------------------------------------------------------------------------


def _standards_layout(standards: Sequence[str]) -> str:
    """"OpenControl component (NIST-800-53)": the standards its controls name."""
    return f"OpenControl component ({', '.join(standards)})" if standards else (
        "OpenControl component")


def _oscal_layout(kind: str, version: str | None) -> str:
    return f"{_KINDS[kind]} {version}" if version else _KINDS[kind]


def _refusal(name: str, what: str, exc: _Malformed) -> UserInputError:
    where = f"line {exc.line}: " if exc.line else ""
    return UserInputError(f"{name} is not a valid {what} ({where}{exc.problem}).")


def _manifest(path: Path, name: str, documents: list[Any]) -> StatementFile:
    """A system's opencontrol.yaml: its name and the component folders it lists."""
    document = next((d for d in documents if d is not None), None)
    try:
        if not isinstance(document, dict):
            raise _malformed("it is not a mapping with the system's name and components",
                             document)
        title = _text(document.get("name"), "name is not text", document, "name")
        folders = []
        for entry in _items(document, "components", "components"):
            if not isinstance(entry, str) or not entry.strip():
                raise _malformed("an entry of components is not a folder's path", document,
                                 "components")
            folders.append(Path(os.path.normpath(path.parent / entry.strip())))
    except _Malformed as exc:
        raise _refusal(name, "OpenControl system (opencontrol.yaml)", exc) from None
    return StatementFile(path, name, "opencontrol-system", "OpenControl system",
                         title or path.parent.name, components=folders)


def read_statement_data(path: Path, name: str, data: bytes, *, listed: bool = False
                        ) -> StatementFile | None:
    """The statements a file holds, or None when it is none of these formats (JSON that is
    not OSCAL, YAML that is neither OSCAL nor an OpenControl component unless `listed` by its
    system's manifest, XML that is no OSCAL plan or definition). A YAML or XML syntax error,
    or a structure that is not what it claims, is refused in one sentence naming the line;
    JSON that cannot be read at all is left to the payload's reader, which says where, unless
    it opens as a plan or definition."""
    suffix = path.suffix.lower()
    try:
        return _read_statements(path, name, data, suffix, listed)
    except RecursionError:
        raise UserInputError(f"{name} is nested too deeply to read.") from None


def _read_statements(path: Path, name: str, data: bytes, suffix: str, listed: bool
                     ) -> StatementFile | None:
    if suffix == ".xml":
        root = _xml_root(name, data)
        if root is None:
            return None
        return _oscal_file(path, name, {root.tag: _xml_value(root)}, root.tag)
    if suffix == ".json":
        try:
            tree = _json_value(data.decode("utf-8-sig"), lined=False)
        except json.JSONDecodeError as exc:
            if not _OSCAL_KEY.search(exc.doc[:4096]):
                return None  # the payload's reader says where it cannot be read
            raise UserInputError(
                f"{name} is not valid JSON ({exc.msg} at line {exc.lineno}, column "
                f"{exc.colno}).") from None
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None  # left to the payload's reader, as above
        kind = next((k for k in _KINDS if isinstance(tree, dict) and k in tree), None)
        if kind is None:
            return None
        # Read again, knowing lines (three times slower: only for a plan or definition).
        return _oscal_file(path, name, _json_value(data.decode("utf-8-sig"), lined=True), kind)
    if suffix not in (".yaml", ".yml"):
        return None
    documents = _yaml_documents(name, decode_utf8(name, data))
    if is_manifest(path):
        return _manifest(path, name, documents)
    first = next((d for d in documents if d is not None), None)
    kind = next((k for k in _KINDS if isinstance(first, dict) and k in first), None)
    if kind is not None:
        return _oscal_file(path, name, first, kind)
    try:
        found = _opencontrol(documents, listed)
    except _Malformed as exc:
        raise _refusal(name, "OpenControl component", exc) from None
    if found is None:
        return None
    title, said, standards = found
    return StatementFile(path, name, "opencontrol", _standards_layout(standards), title, said)


def _oscal_file(path: Path, name: str, tree: dict, kind: str) -> StatementFile:
    try:
        root = _mapping(tree[kind], f"{kind} is not an object", tree, kind)
        title, version, said = _oscal(root, kind)
    except _Malformed as exc:
        raise _refusal(name, _KINDS[kind], exc) from None
    uuid = root.get("uuid")
    return StatementFile(path, name, kind, _oscal_layout(kind, version), title, said,
                         document=(uuid.strip() or None) if isinstance(uuid, str) else None)


def read_statement_file(path: Path, limits: PayloadLimits, *, name: str | None = None,
                        listed: bool = False) -> StatementFile | None:
    """`read_statement_data` on a file on disk, at most the size of a questionnaire round."""
    data = read_user_file(path, max_bytes=limits.max_bytes, what="a questionnaire round")
    return read_statement_data(path, name or shown_path(path), data, listed=listed)


# The files of one system ------------------------------------------------------------------


@dataclass(frozen=True)
class StatementGroup:
    """Files read as one round: an OpenControl system's components (with its manifest), or
    OSCAL files of one system, or one file alone."""

    system: str  # the system's name, the definition's title, or the file's name
    files: list[StatementFile]  # the statement files, in order
    manifest: StatementFile | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def every_file(self) -> list[StatementFile]:
        return ([self.manifest] if self.manifest else []) + self.files


def _key(path: Path) -> Path:
    """A path as it compares with another: absolute, without `.` and `..` steps."""
    return Path(os.path.normpath(os.path.abspath(path)))


def _folder(path: Path) -> Path:
    return _key(path.parent)


def _lists(manifest: StatementFile, path: Path) -> bool:
    return path.name.lower() in COMPONENT_NAMES and _folder(path) in {
        _key(f) for f in manifest.components}


def _manifests_above(path: Path, stop: Path | None = None) -> list[Path]:
    """The system manifests in the folders above a file, nearest first, at most
    `_MANIFEST_DEPTH` folders up (or up to `stop`)."""
    found = []
    folder = _folder(path)
    for _ in range(_MANIFEST_DEPTH):
        for name in MANIFEST_NAMES:
            if (folder / name).is_file():
                found.append(folder / name)
        if (stop is not None and folder == stop) or folder.parent == folder:
            break
        folder = folder.parent
    return found


def questionnaire_groups(files: Sequence[Path], limits: PayloadLimits
                         ) -> dict[Path, StatementGroup]:
    """The files given to `ingest questionnaire` that hold control statements, each with the
    round it is read into: the components of one OpenControl system (by the manifest above
    them that lists them, else the nearest; a manifest given reads every component it lists),
    the OSCAL files of one system or definition title; any other file alone."""
    manifests: dict[Path, StatementFile | None] = {}

    def manifest_at(path: Path) -> StatementFile | None:
        if _key(path) not in manifests:
            manifests[_key(path)] = read_statement_file(path, limits)
        return manifests[_key(path)]

    groups: dict[Any, StatementGroup] = {}
    given: dict[Path, Any] = {}
    read_once: dict[Any, set[Path]] = {}

    def join(key: Any, system: str, manifest: StatementFile | None, read: StatementFile,
             file: Path | None) -> StatementGroup:
        group = groups.setdefault(key, StatementGroup(system, [], manifest))
        if file is not None:
            given[file] = key
        if _key(read.path) not in read_once.setdefault(key, set()):
            read_once[key].add(_key(read.path))
            group.files.append(read)
        return group

    for file in files:
        if not is_statement_file(file):
            continue
        if is_manifest(file):
            manifest = manifest_at(file)
            if manifest is None:
                continue
            key: Any = ("system", _key(file))
            group = groups.setdefault(key, StatementGroup(manifest.title or manifest.name, [],
                                                          manifest))
            given[file] = key
            for folder in manifest.components:
                component = next((folder / n for n in COMPONENT_NAMES
                                  if (folder / n).is_file()), None)
                if component is None:
                    group.notes.append(f"{manifest.name} lists the component "
                                       f"{shown_path(folder)}, which holds no component.yaml; "
                                       "it was left out.")
                    continue
                if _key(component) not in read_once.setdefault(key, set()):
                    found = read_statement_file(component, limits, listed=True)
                    if found is not None:
                        join(key, group.system, manifest, found, None)
            continue
        read = read_statement_file(file, limits)
        owner = None
        component = (read.kind == "opencontrol" if read is not None
                     else file.name.lower() in COMPONENT_NAMES)
        if component:  # placed by the manifest above it that lists it, else the nearest
            above = [m for m in map(manifest_at, _manifests_above(file)) if m is not None]
            owner = next((m for m in above if _lists(m, file)), above[0] if above else None)
            if read is None and owner is not None and _lists(owner, file):
                read = read_statement_file(file, limits, listed=True)
        if read is None:
            continue
        if read.kind == "opencontrol" and owner is not None:
            group = join(("system", _key(owner.path)), owner.title or owner.name, owner, read,
                         file)
            if not _lists(owner, file):
                group.notes.append(f"{read.name} is not among the components {owner.name} "
                                   "lists; it was read with them, as it was given.")
            continue
        join(read.group_key or ("file", _key(file)), read.title or read.name, None, read, file)
    return {file: groups[key] for file, key in given.items()}


@dataclass(frozen=True)
class PackageStatements:
    """The files of a package that hold control statements, grouped into rounds; the files
    that cannot be read (with why), and those left out (with why)."""

    groups: list[StatementGroup]
    unreadable: dict[Path, str]
    skipped: dict[Path, str]


def package_statements(folder: Path, paths: Sequence[Path], limits: PayloadLimits,
                       name_of: Callable[[Path], str]) -> PackageStatements:
    """The control statements of a package: each OpenControl system (its manifest and the
    components it lists; a component it does not list is left out), the OSCAL files of one
    system or definition title, and any other statement file alone. `name_of` names a file
    as the package's lines do."""
    candidates = [p for p in paths if is_statement_file(p) and not p.name.startswith((".", "~$"))]
    unreadable: dict[Path, str] = {}
    skipped: dict[Path, str] = {}
    manifests: dict[Path, StatementFile] = {}  # by _key
    failed: set[Path] = set()  # manifests that cannot be read, by _key
    for path in candidates:
        if is_manifest(path):
            try:
                read = read_statement_file(path, limits, name=name_of(path))
            except UserInputError as exc:
                unreadable[path] = str(exc)
                failed.add(_key(path))
                continue
            if read is not None:
                manifests[_key(path)] = read
    groups: dict[Any, StatementGroup] = {
        ("system", key): StatementGroup(m.title or m.name, [], m) for key, m in manifests.items()}
    broken: dict[Any, Path] = {}
    for path in candidates:
        if is_manifest(path):
            continue
        above = [p for p in _manifests_above(path, _key(folder))
                 if p in manifests or p in failed]
        owner = next((p for p in above if p in manifests and _lists(manifests[p], path)), None)
        try:
            read = read_statement_file(path, limits, name=name_of(path),
                                       listed=owner is not None)
        except UserInputError as exc:
            unreadable[path] = str(exc)
            if owner is not None:
                broken.setdefault(("system", owner), path)
            continue
        if read is None:
            continue
        if read.kind == "opencontrol" and not above:
            # Components no manifest gathers: the package's own system, one round.
            groups.setdefault(("components", None), StatementGroup(
                folder.name, [])).files.append(read)
        elif read.kind != "opencontrol":
            key = read.group_key or ("file", path)
            groups.setdefault(key, StatementGroup(read.title or read.name, [])).files.append(
                read)
        elif owner is None:
            nearest = manifests.get(above[0])
            skipped[path] = (
                f"{name_of(path)} is an OpenControl component that "
                + (f"{nearest.name} does not list" if nearest is not None else
                   "the opencontrol.yaml above it, which cannot be read, may list")
                + "; nothing in it was read.")
        else:
            groups[("system", owner)].files.append(read)
    for key, bad in broken.items():
        group = groups.pop(key)
        for file in group.every_file:
            skipped[file.path] = (
                f"{file.name} is part of the control statements of {group.system}, which were "
                f"not read, as {name_of(bad)} cannot be read.")
    for key, group in list(groups.items()):
        if group.manifest is not None and not group.files:
            groups.pop(key)
            skipped[group.manifest.path] = (
                f"{group.manifest.name} describes the OpenControl system {group.system}, but "
                "none of the components it lists is in the package; nothing was read.")
    return PackageStatements(list(groups.values()), unreadable, skipped)


# One round --------------------------------------------------------------------------------


@dataclass
class _Control:
    control_id: str
    by_component: dict[str | None, tuple[StatementFile, _Said]]


def _merged(group: StatementGroup) -> tuple[list[_Control], list[str]]:
    """Every control the group's files speak to, once: a file's several statements of one
    control for one component joined, the same statement in two files read once, two files
    saying different things of a control for one component refused."""
    controls: dict[str, _Control] = {}
    repeats: dict[tuple[str, str], list[str]] = {}
    forms: dict[tuple[str, str], StatementFile] = {}
    notes: list[str] = []
    for read in group.files:
        if read.document is not None:  # the same plan or definition in another form
            original = forms.setdefault((read.kind, read.document), read)
            if original is not read:
                notes.append(f"{read.name} is {original.name} in another form (the same "
                             f"OSCAL document, {read.document}); it was read once.")
                continue
        mine: dict[tuple[str, str | None], _Said] = {}
        for said in read.said:
            key = (said.control_id, said.component)
            if key in mine:
                mine[key].take(said)
            else:
                mine[key] = replace(said, statuses=list(said.statuses), parts=list(said.parts),
                                    extras={k: list(v) for k, v in said.extras.items()})
        for (control_id, component), said in mine.items():
            control = controls.setdefault(control_id, _Control(control_id, {}))
            earlier = control.by_component.get(component)
            if earlier is None:
                control.by_component[component] = (read, said)
            elif earlier[1].content() == said.content():
                _add(repeats.setdefault((read.name, earlier[0].name), []), [control_id])
            else:
                whose = f" for {component}" if component else ""
                raise UserInputError(
                    f"{read.name}, line {said.line}: control {control_id} is described again"
                    f"{whose}, differently from {earlier[0].name}, line {earlier[1].line}; "
                    "these files describe one system, so keep one of the two statements.")
    notes += [f"{later} says the same of {_ids(ids)} as {first}; "
              f"{'it was' if len(ids) == 1 else 'they were'} read once."
              for (later, first), ids in repeats.items()]
    return list(controls.values()), notes


def _ids(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_LISTED_IDS])
    more = f" and {len(ids) - _LISTED_IDS:,} more" if len(ids) > _LISTED_IDS else ""
    return f"control{'' if len(ids) == 1 else 's'} {shown}{more}"


def _part_order(key: str | None) -> tuple[Any, ...]:
    """Parts in the order a control lists them: the whole first, then a, a.1, a.2, b, b.10."""
    if key is None:
        return ()
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p.lower())
                 for p in re.split(r"[.\s]+", key) if p)


def _label(key: str | None, components: Sequence[str]) -> str:
    part = "" if key is None else f"Part {key}" if _PART_KEY.fullmatch(key) else key
    named = ", ".join(components)
    if part and named:
        return f"{part} ({named}): "
    if part or named:
        return f"{part or named}: "
    return ""


def _answer(control: _Control) -> tuple[str, dict[str, str]]:
    """A control's answer: its implementation status, then each part labelled, in order,
    under each component's name where several components speak to it."""
    entries = [(component, said) for component, (_, said) in control.by_component.items()]
    speaking = {component for component, said in entries if said.parts}
    named = len(speaking) > 1
    statuses: list[tuple[str, str | None]] = []
    for component, said in entries:
        _add(statuses, [(status, component) for status in said.statuses])
    values = list(dict.fromkeys(status.rstrip(".") for status, _ in statuses))
    lines = []
    if len(values) == 1:
        lines.append(f"Implementation status: {values[0]}.")
    elif values:
        lines.append("Implementation status: " + ", ".join(
            f"{status.rstrip('.')} ({component})" if component else status.rstrip(".")
            for status, component in statuses) + ".")
    order: list[str | None] = []
    texts: dict[str | None, list[tuple[str, list[str]]]] = {}
    for component, said in entries:
        for key, text in said.parts:
            if key not in texts:
                order.append(key)
                texts[key] = []
            same = next((t for t in texts[key] if t[0] == text), None)
            if same is None:
                texts[key].append((text, [component] if component else []))
            elif component and component not in same[1]:
                same[1].append(component)
    if len(entries) > 1:  # each component's parts in their places: a, a.1, b, ..., c
        order.sort(key=_part_order)
    for key in order:
        for text, components in texts[key]:
            lines.append(_label(key, components if named else []) + text)
    extras: dict[str, list[str]] = {}
    if values:
        extras["implementation_status"] = values
    for _, said in entries:
        for name, found in said.extras.items():
            _add(extras.setdefault(name, []), found)
    components = [c for c, _ in entries if c]
    if components:
        extras["component"] = components
    return "\n\n".join(lines), {k: "; ".join(v) for k, v in extras.items() if v}


def _layout_name(group: StatementGroup) -> str:
    first = group.files[0]
    if first.kind != "opencontrol":
        return first.layout
    standards: list[str] = []
    for read in group.files:
        for said in read.said:
            _add(standards, said.extras.get("standard", []))
    return _standards_layout(standards)


def _origin_names(group: StatementGroup) -> dict[str, str]:
    """Each file of the group as its answers name it: its name, or for a system's components
    its path under the system's folder (every component is a component.yaml)."""
    if group.manifest is None and len(group.files) == 1:
        return {group.files[0].name: group.files[0].path.name}
    base = _folder(group.manifest.path) if group.manifest is not None else None
    names = {}
    for read in group.files:
        path = Path(os.path.normpath(os.path.abspath(read.path)))
        if base is not None and path.is_relative_to(base):
            names[read.name] = path.relative_to(base).as_posix()
        else:
            names[read.name] = path.name
    return names


def statement_kind(group: StatementGroup, path: Path) -> str:
    """What a file of the group is, as a sentence about it says: "an OSCAL system security
    plan (control implementation statements)"."""
    read = next((f for f in group.every_file if _key(f.path) == _key(path)), None)
    kind = read.kind if read is not None else "opencontrol"
    what = (f"an {_KINDS[kind]}" if kind in _KINDS else "an OpenControl system's manifest"
            if kind == "opencontrol-system" else "an OpenControl component")
    return f"{what} (control implementation statements)"


def group_names(group: StatementGroup) -> str:
    """The group's files as a sentence names them."""
    names = [f.name for f in group.files]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"


def statement_round(group: StatementGroup, *, vendor_id: str, round_number: int,
                    timestamp: str | None, limits: PayloadLimits) -> SpreadsheetRound:
    """The group's statements as one round, validated as any round is: one answer per control
    id, its question the control id, each naming the file and line it was read from."""
    if not group.files:
        raise UserInputError(
            f"{group.manifest.name if group.manifest else group.system} lists no component "
            "folder that holds a component.yaml; there is nothing to ingest as a round.")
    controls, notes = _merged(group)
    answers: list[LayoutAnswer] = []
    files: list[str] = []
    empty: list[str] = []
    origin_names = _origin_names(group)
    for control in controls:
        text, extras = _answer(control)
        source, said = next(iter(control.by_component.values()))
        if not text:
            empty.append(control.control_id)
            continue
        if len(text) > limits.max_answer_chars:
            speaking = [c for c in control.by_component if c]
            fix = (f", as it joins what {len(speaking)} components say; give their files one "
                   "at a time, or raise EVIDENCE_MAX_ANSWER_CHARS" if len(speaking) > 1
                   else "; raise EVIDENCE_MAX_ANSWER_CHARS to read it")
            raise UserInputError(
                f"{source.name}, line {said.line}: the statement of control "
                f"{control.control_id} "
                f"is {len(text):,} characters long, and an answer may hold at most "
                f"{limits.max_answer_chars:,}{fix}.")
        answers.append(LayoutAnswer(questionnaire_id=control.control_id,
                                    question=control_question(control.control_id),
                                    answer=text, sheet="", row=said.line, extras=extras))
        files.append(origin_names[source.name])
    name = group.manifest.name if group.manifest is not None else group.files[0].name
    if not answers:
        raise UserInputError(
            f"{group_names(group)} {'holds' if len(group.files) == 1 else 'hold'} no control "
            "implementation statements (no control with a narrative, a description or an "
            "implementation status); there is nothing to ingest as a round.")
    if empty:
        listed = _ids(empty)
        notes.append(f"{listed[0].upper()}{listed[1:]} {'has' if len(empty) == 1 else 'have'} "
                     "neither a statement nor an implementation status; left out.")
    layout = _layout_name(group)
    read = layout_round(name, LayoutRead(layout=_LAYOUT, name=layout, sheets=[],
                                         answers=answers, notes=[]),
                        vendor_id=vendor_id, round_number=round_number, timestamp=timestamp,
                        limits=limits)
    responses = [r.model_copy(update={"origin": r.origin.model_copy(update={"file": file})})
                 if r.origin is not None else r
                 for r, file in zip(read.payload.responses, files, strict=True)]
    payload = read.payload.model_copy(update={"responses": responses})
    count = len(group.files)
    read_from = ("the file" if count == 1 else f"{count:,} files of {group.system}")
    first = (f"Read as {layout}: {len(answers):,} answer{'' if len(answers) == 1 else 's'} "
             f"from {read_from}, one per control id; each answer's question is its control "
             "id and, where the catalog has it, its title.")
    return replace(read, payload=payload, notes=[first, *group.notes, *notes])
