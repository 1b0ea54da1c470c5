"""The architecture's Layout section (docs/architecture.md) is true: every module it names
exists, every module and package of `core/` and `dashboard/` is named, each folder imports
only from the folders listed above it, and the front door stays small. The README and the
docs link only to what the repository holds."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Layout"
# Where a line of the listing starts its description: entries are indented less.
DESCRIPTION_COLUMN = 20
MODULE = re.compile(r"\b\w+\.py\b")
FRONT_DOOR_MOST_LINES = 200


def layout_listing() -> list[str]:
    """The indented lines of the Layout section's listing, without its four-space indent."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split(f"\n{SECTION}\n", 1)[1].split("\n## ", 1)[0]
    return [line[4:] for line in section.splitlines() if line.startswith("    ")]


def named_in_layout() -> tuple[list[str], dict[str, list[str]]]:
    """(folders in the order listed, folder -> the modules named in it), each path relative to
    the repository; a folder holds the modules named on its line and the lines below it."""
    folders: list[str] = []
    modules: dict[str, list[str]] = {}
    stack: list[tuple[int, str]] = []
    current = ""
    for line in layout_listing():
        indent = len(line) - len(line.lstrip())
        if indent < DESCRIPTION_COLUMN:
            while stack and stack[-1][0] >= indent:
                stack.pop()
            first = line.split()[0]
            parent = stack[-1][1] if stack else ""
            if first.endswith("/"):
                current = parent + first
                stack.append((indent, current))
                folders.append(current)
            else:
                current = parent
        modules.setdefault(current, []).extend(MODULE.findall(line))
    return folders, modules


def test_every_module_named_exists() -> None:
    _, modules = named_in_layout()
    missing = [folder + name for folder, names in modules.items() for name in names
               if not (ROOT / folder / name).is_file()]
    assert modules["core/"] and modules["dashboard/views/"]
    assert missing == []


def test_every_package_and_module_is_named() -> None:
    folders, modules = named_in_layout()
    for top in ("core", "dashboard"):
        for init in sorted((ROOT / top).rglob("__init__.py")):
            folder = init.parent.relative_to(ROOT).as_posix() + "/"
            assert folder in folders, f"the package {folder} is not in the Layout"
            unnamed = sorted(p.name for p in init.parent.glob("*.py")
                             if p.name not in ("__init__.py", "__main__.py")
                             and p.name not in modules.get(folder, []))
            assert unnamed == [], f"{folder} modules missing from the Layout"


def _room(module: str, rooms: list[str], ground: set[str]) -> str | None:
    """The listed folder (or top-level module) a dotted module name belongs to; "ground"
    for the ground's modules; None for the package faces."""
    parts = module.split(".")
    for depth in range(len(parts), 0, -1):
        folder = "/".join(parts[:depth]) + "/"
        if folder in rooms:
            return folder
        if depth == 2 and "/".join(parts[:2]) + ".py" in rooms:
            return "/".join(parts[:2]) + ".py"
    if len(parts) >= 2 and parts[0] == "core" and f"{parts[1]}.py" in ground:
        return "ground"
    return None


def test_folders_import_only_from_those_listed_above_them() -> None:
    folders, modules = named_in_layout()
    ground = set(modules["core/"])
    # The ground, then core's folders and top-level modules in the order listed, then the
    # dashboard: core's own entries are the ones one level below core/.
    core_entries = [entry for entry in _listed_entries() if entry != "core/"]
    order = ["ground", *core_entries, "dashboard/"]
    rooms = [r for r in order if r != "ground"]
    wrong = []
    for path in sorted([*(ROOT / "core").rglob("*.py"), *(ROOT / "dashboard").rglob("*.py")]):
        relative = path.relative_to(ROOT)
        if relative.as_posix() == "core/__init__.py":  # the package's face re-exports
            continue
        own = _room(".".join(relative.with_suffix("").parts), rooms, ground)
        assert own is not None, f"{relative} is in no listed folder"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] not in ("core", "dashboard") or name == "core":
                    continue
                target = _room(name, rooms, ground)
                if target is not None and order.index(target) > order.index(own):
                    wrong.append(f"{relative} imports {name} ({target}, listed after {own})")
    assert folders[0] == "core/" and "dashboard/" in folders
    assert wrong == []


def _listed_entries() -> list[str]:
    """core's entries one level below it (folders and top-level modules), in listed order."""
    entries = []
    for line in layout_listing():
        indent = len(line) - len(line.lstrip())
        if indent == 0 and line.split()[0] != "core/":
            break
        first = line.split()[0] if line.strip() else ""
        if indent == 2 and first != "config.py" and first.endswith(("/", ".py")):
            entries.append("core/" + first)
    return entries


def test_the_front_door_stays_small() -> None:
    lines = (ROOT / "core" / "workbench.py").read_text(encoding="utf-8").splitlines()
    assert len(lines) < FRONT_DOOR_MOST_LINES, (
        f"core/workbench.py is {len(lines)} lines; the front door composes, it holds no logic")


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", ["README.md", *sorted(
    p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))])
def test_links_stay_inside_the_repository(page: str) -> None:
    """A clone holds everything a page links to: the README links only to files of the
    repository, and every relative link of a page names a file or folder that exists."""
    text = (ROOT / page).read_text(encoding="utf-8")
    targets = [t for t in LINK.findall(text) if not t.startswith("#")]
    if page == "README.md":
        assert [t for t in targets if "://" in t] == []
    missing = [t for t in targets if "://" not in t
               and not (ROOT / page).parent.joinpath(t.split("#")[0]).exists()]
    assert missing == []
