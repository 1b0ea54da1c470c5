"""New processes that start warm: forked from a server process that has already imported the
`evidence` command and ChromaDB.

A test that runs `evidence` as a user does wants a separate process: its own store
connections, its own exit code, its own stdout and stderr, killable with SIGKILL. Starting
Python and importing the command and ChromaDB costs about two seconds of CPU each time, which
the suite paid several hundred times. Here each process is forked from a forkserver
(`multiprocessing`'s, started once per test process) whose only work was those imports: no
store opened, no thread started, no model loaded (the model libraries read their settings
from the environment as they are imported, so they are left for the child to import).

The child then takes the environment, working folder, argv and standard streams it was given,
runs, flushes, runs the interpreter's exit handlers, and exits with the command's code, as a
fresh `python -m core.cli` would. Settings the imports themselves put into the environment
(`os.environ.setdefault` in the imported modules) are put back after the environment is
replaced, as a fresh process would have them."""

from __future__ import annotations

import atexit
import contextlib
import io
import multiprocessing
import os
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

# What the forkserver imports once; each child starts with these already in memory.
PRELOAD = "tests.support.warm_preload"

# A fresh process reads these when Python starts (the streams' encoding, UTF-8 mode, hash
# seed, warnings): a child asked for any of them is started cold instead.
_INTERPRETER_SETTINGS = ("PYTHONIOENCODING", "PYTHONUTF8", "PYTHONHASHSEED", "PYTHONWARNINGS",
                         "PYTHONPATH", "PYTHONSAFEPATH", "PYTHONDONTWRITEBYTECODE", "LC_ALL",
                         "LC_CTYPE", "LANG", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONOPTIMIZE")

_context: Any = None


def _forkserver() -> Any:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([PRELOAD])
        _context = context
    return _context


def starts_warm(env: Mapping[str, str]) -> bool:
    """Whether a child with `env` behaves as a fresh process would when forked warm: the
    interpreter's own start-up settings are the same as this process's."""
    return all(env.get(name) == os.environ.get(name) for name in _INTERPRETER_SETTINGS)


def _child(target: str, args: Sequence[Any], env: dict[str, str], cwd: str,
           stdin: str | None, stdout: str, stderr: str) -> None:
    """In the forked child: become the process that was asked for, run, exit like Python."""
    from tests.support.warm_preload import IMPORT_DEFAULTS

    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for name, value in IMPORT_DEFAULTS.items():
        os.environ.setdefault(name, value)
    for fd, path, flags in ((0, stdin or os.devnull, os.O_RDONLY),
                            (1, stdout, os.O_WRONLY | os.O_TRUNC),
                            (2, stderr, os.O_WRONLY | os.O_TRUNC)):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                  write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", write_through=True)
    code: Any = 1
    try:
        module, _, name = target.rpartition(".")
        function: Callable[..., Any] = getattr(__import__(module, fromlist=[name]), name)
        code = function(*args)
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            atexit._run_exitfuncs()
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):  # a stream already closed
                    stream.flush()
            if code is None:
                code = 0
            elif not isinstance(code, int):
                print(code, file=sys.stderr)
                code = 1
            os._exit(code & 0xFF)


@contextlib.contextmanager
def _no_main_script():
    """While a child is started, a `__main__` with no file behind it. multiprocessing has each
    child run the parent's `__main__` file again before its target; Streamlit's script runner
    installs the page it ran as `__main__` and leaves it there, so after a dashboard test every
    child would run that page, in bare mode, with the default store."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


class Started:
    """A warm process that was started and not yet waited for."""

    def __init__(self, target: str, args: Sequence[Any], *, env: Mapping[str, str], cwd: Path,
                 text: bool = True, input: str | bytes | None = None) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="warm-")
        folder = Path(self._folder.name)
        self._paths = {name: folder / name for name in ("stdin", "stdout", "stderr")}
        for name in ("stdout", "stderr"):
            self._paths[name].touch()
        stdin = None
        if input is not None:
            self._paths["stdin"].write_bytes(input if isinstance(input, bytes)
                                             else input.encode("utf-8"))
            stdin = str(self._paths["stdin"])
        self.args = [target, *map(str, args)]
        self._text = text
        self.process = _forkserver().Process(
            target=_child, args=(target, list(args), dict(env), str(cwd), stdin,
                                 str(self._paths["stdout"]), str(self._paths["stderr"])))
        with _no_main_script():
            self.process.start()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def wait(self) -> subprocess.CompletedProcess:
        """Its exit code (a process killed by a signal has the negative signal number), and
        its stdout and stderr, as `subprocess.run` gives them."""
        self.process.join()
        try:
            out = self._paths["stdout"].read_bytes()
            err = self._paths["stderr"].read_bytes()
        finally:
            self._folder.cleanup()
        if self._text:
            return subprocess.CompletedProcess(
                self.args, self.process.exitcode, out.decode("utf-8").replace("\r\n", "\n"),
                err.decode("utf-8", "backslashreplace").replace("\r\n", "\n"))
        return subprocess.CompletedProcess(self.args, self.process.exitcode, out, err)


def run(target: str, args: Sequence[Any], *, env: Mapping[str, str], cwd: Path,
        text: bool = True, input: str | bytes | None = None) -> subprocess.CompletedProcess:
    """`target(*args)` (a dotted function name) in a new process forked warm, with exactly
    `env` and `cwd`, waited for."""
    return Started(target, args, env=env, cwd=cwd, text=text, input=input).wait()


def script_main(path: str, argv: list[str]) -> None:
    """What `python PATH ARGV` runs."""
    import runpy

    sys.argv = [path, *argv]
    runpy.run_path(path, run_name="__main__")


def start_script(path: Path, *argv: str, env: Mapping[str, str], cwd: Path,
                 text: bool = True) -> Started:
    """`python PATH ARGV` started in a new process forked warm (the script's imports of the
    project and of ChromaDB are already done); `.wait()` for its result."""
    return Started("tests.support.warm.script_main", [str(path), list(argv)], env=env, cwd=cwd,
                   text=text)


def run_script(path: Path, *argv: str, env: Mapping[str, str], cwd: Path,
               text: bool = True) -> subprocess.CompletedProcess:
    """`python PATH ARGV` in a new process forked warm, waited for."""
    return start_script(path, *argv, env=env, cwd=cwd, text=text).wait()


def cli_main(argv: list[str]) -> int:
    """What `python -m core.cli ARGV` runs."""
    from core.cli.run import main

    return main(argv)


def run_cli(argv: Sequence[str | bytes], *, env: Mapping[str, str], cwd: Path,
            text: bool = True) -> subprocess.CompletedProcess:
    """`python -m core.cli ARGV` in a new process: forked warm when nothing in `env` changes
    how Python itself starts, started cold otherwise. An argument given as bytes reaches the
    command as Python would have decoded it from the command line (`os.fsdecode`)."""
    if starts_warm(env):
        return run("tests.support.warm.cli_main", [[os.fsdecode(arg) for arg in argv]],
                   env=env, cwd=cwd, text=text)
    return subprocess.run([sys.executable, "-m", "core.cli", *argv], env=dict(env), cwd=cwd,
                          capture_output=True, text=text)
