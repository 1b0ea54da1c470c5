"""The tests' warm processes (tests/support/warm.py) are the fresh processes they stand for:
nothing of the test process's own state runs in them."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

from tests.support import warm


def test_a_warm_child_does_not_run_the_page_a_dashboard_test_left_as_main(monkeypatch,
                                                                           tmp_path):
    # Streamlit's script runner installs the page it ran as `__main__` and leaves it there; a
    # child started after it must not run that page again before its own work.
    page = tmp_path / "page.py"
    page.write_text("from pathlib import Path\nPath('page-ran').write_text('ran')\n")
    left = types.ModuleType("__main__")
    left.__file__ = str(page)
    monkeypatch.setitem(sys.modules, "__main__", left)
    script = tmp_path / "work.py"
    script.write_text("print('done')\n")
    workdir = tmp_path / "work"
    workdir.mkdir()

    done = warm.run_script(script, env=dict(os.environ), cwd=workdir)

    assert (done.returncode, done.stdout) == (0, "done\n"), done.stderr
    assert not (workdir / "page-ran").exists() and not Path("page-ran").exists()
    assert sys.modules["__main__"] is left  # the test process's own module, given back
