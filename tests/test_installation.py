"""The `core` package name: a second distribution providing it is named, not shadowed."""

from __future__ import annotations

import subprocess
import sys

from core.installation import clashing_distributions

FAKE_DIST = """Metadata-Version: 2.1
Name: other-core
Version: 1.0
"""


def fake_distribution(site, monkeypatch, *, top_level: bool = True, record: str = (
        "other_core-1.0.dist-info/METADATA,,\ncore/__init__.py,,\ncore/other.py,,\n")):
    """A distribution 'other-core' whose files include a top-level core/ package; without a
    top_level.txt (as wheels built by hatchling or poetry ship) only its RECORD says so."""
    info = site / "other_core-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(FAKE_DIST)
    if top_level:
        (info / "top_level.txt").write_text("core\n")
    (info / "RECORD").write_text(record)
    monkeypatch.syspath_prepend(str(site))


def test_the_workbench_alone_has_the_name_to_itself():
    assert clashing_distributions() == []


def test_another_distribution_with_a_top_level_core_is_named(tmp_path, monkeypatch):
    fake_distribution(tmp_path / "site", monkeypatch)
    assert clashing_distributions() == ["other-core"]


def test_a_distribution_without_top_level_txt_is_named_from_its_record(tmp_path, monkeypatch):
    fake_distribution(tmp_path / "site", monkeypatch, top_level=False)
    assert clashing_distributions() == ["other-core"]


def test_a_distribution_with_a_core_folder_below_its_own_package_is_not_named(
        tmp_path, monkeypatch):
    fake_distribution(tmp_path / "site", monkeypatch, top_level=False,
                      record="other/__init__.py,,\nother/core/__init__.py,,\n")
    assert clashing_distributions() == []


def test_the_cli_refuses_to_run_in_one_sentence(tmp_path):
    site = tmp_path / "site"
    info = site / "other_core-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(FAKE_DIST)
    (info / "top_level.txt").write_text("core\n")
    script = ("import sys; sys.path.append(sys.argv[1]); from core.cli import main; "
              "sys.exit(main(['strategies']))")
    done = subprocess.run([sys.executable, "-c", script, str(site)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evidence: error: Another installed "
                                                   "distribution (other-core)")
    assert done.stdout == ""
