"""A real ChromaDB server (`chroma run`) on 127.0.0.1 for the tests that need one."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ChromaServer:
    """Starts `chroma run --path DIR --host 127.0.0.1 --port N`; stop() ends it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.port = free_port()
        chroma = Path(sys.executable).with_name("chroma")
        self.log = open(path.parent / "chroma-server.log", "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [str(chroma), "run", "--path", str(path), "--host", "127.0.0.1",
             "--port", str(self.port)],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        self._wait_until_up()

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

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
