"""The locked install: uv.lock matches pyproject.toml, the environment the tests run in holds
exactly what the lock holds, and torch is the CPU build whose hash the lock records."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "uv.lock"
VENV_BIN = Path(sys.executable).parent


def _locked() -> dict[str, dict]:
    return {package["name"]: package for package in tomllib.loads(LOCK.read_text())["package"]}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _makefile_value(name: str) -> str:
    match = re.search(rf"^{name} :?= (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, f"the Makefile sets no {name}"
    return match.group(1).strip()


def test_the_lock_matches_pyproject():
    """A dependency changed in pyproject.toml without `uv lock` fails here, not on a user's
    machine as `uv sync --locked` refusing to install."""
    uv = shutil.which("uv", path=str(VENV_BIN))
    if uv is None:
        pytest.skip("uv is not installed in this environment (install with `make install`)")
    done = subprocess.run([uv, "lock", "--check", "--offline"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_environment_holds_exactly_the_locked_versions():
    locked = _locked()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    installed = {_normal(dist.metadata["Name"]): dist.version
                 for dist in metadata.distributions()}
    wrong = {name: (installed.get(name), package["version"])
             for name, package in locked.items()
             if name != project and installed.get(name) != package["version"]}
    assert not wrong, f"installed against locked: {wrong}"
    # Nothing the lock does not hold, but the installers of the virtual environment itself.
    extra = set(installed) - set(locked) - {"pip", "setuptools", "wheel"}
    assert not extra, f"installed but not locked: {sorted(extra)}"


def test_torch_is_the_cpu_build_the_lock_names_by_hash():
    import torch

    assert torch.__version__ == "2.13.0+cpu"
    assert not torch.version.cuda
    torch_lock = _locked()["torch"]
    (wheel,) = torch_lock["wheels"]
    wheel_name = Path(wheel["path"]).name
    assert wheel_name == _makefile_value("TORCH_WHEEL")
    index = (ROOT / "wheels" / "index.html").read_text()
    listed = re.search(r'href="([^"#]+)#sha256=([0-9a-f]{64})"', index)
    assert listed and listed.group(1).replace("%2B", "+") == wheel_name
    assert wheel["hash"] == f"sha256:{listed.group(2)}"
    linked = ROOT / "wheels" / wheel_name
    if linked.exists():
        digest = hashlib.sha256(linked.read_bytes()).hexdigest()
        assert wheel["hash"] == f"sha256:{digest}"


def test_both_readme_commands_install_exactly_the_lock():
    makefile = (ROOT / "Makefile").read_text()
    assert "uv sync --locked --extra dev" in makefile
    for target in ("dashboard", "test"):
        prerequisites = re.search(rf"^{target}: (.*)$", makefile, re.MULTILINE)
        assert prerequisites and "install" in prerequisites.group(1).split()
    # uv is bootstrapped at the version the lock keeps, so `uv sync` leaves it in place.
    assert _locked()["uv"]["version"] == re.search(
        r'"uv==([0-9.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert "pip install" not in makefile.replace('pip install --quiet "uv==$(UV_VERSION)"', "")
