"""A real ChromaDB server (`chroma run`) on 127.0.0.1 for the tests that need one."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_environment() -> dict[str, str]:
    """The server's environment: product telemetry off, and no tracing exporter configured."""
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    for name in [n for n in env if n.startswith("OTEL_")]:
        del env[name]
    return env


class ChromaServer:
    """Starts `chroma run --path DIR --host 127.0.0.1 --port N`; stop() ends it.

    `wrapper` is a command prefix (e.g. strace) run around the server; the server's own
    process is then the wrapper's child, and stop()/kill() signal that child."""

    def __init__(self, path: Path, *, wrapper: Sequence[str] = ()) -> None:
        self.path = path
        self.port = free_port()
        chroma = Path(sys.executable).with_name("chroma")
        path.parent.mkdir(parents=True, exist_ok=True)
        # Appended, so a server restarted on the same folder keeps the earlier run's log.
        self.log_path = path.parent / "chroma-server.log"
        self.log = open(self.log_path, "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [*wrapper, str(chroma), "run", "--path", str(path), "--host", "127.0.0.1",
             "--port", str(self.port)],
            stdout=self.log, stderr=subprocess.STDOUT, env=server_environment(),
        )
        self._wrapped = bool(wrapper)
        self._wait_until_up()
        self.pid = self._server_pid()

    def _wait_until_up(self) -> None:
        # Bounded by attempts, not by a time limit: the server answers once it is ready.
        url = f"http://127.0.0.1:{self.port}/api/v2/heartbeat"
        for _ in range(600):
            if self.process.poll() is not None:
                raise RuntimeError(f"chroma run exited with {self.process.returncode}")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("chroma run did not answer its heartbeat")

    def _server_pid(self) -> int:
        if not self._wrapped:
            return self.process.pid
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return int(children.read_text().split()[0])

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def _signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def stop(self) -> None:
        """SIGTERM, the way a service manager stops the server; safe to call twice."""
        if self.running:
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait()
        self.log.close()

    def kill(self) -> None:
        """SIGKILL: the server dies at once, as in a crash or an out-of-memory kill."""
        if self.running:
            self._signal(signal.SIGKILL)
            self.process.wait()
        self.log.close()
