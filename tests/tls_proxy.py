"""A shared ChromaDB server as a team runs one: nginx on 127.0.0.1 terminating TLS with a
certificate of a private CA and checking a bearer token, in front of a `chroma run`."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

from tests.chroma_server import ChromaServer, free_port


def nginx_binary() -> str | None:
    """nginx, on PATH or where Debian puts it (/usr/sbin is not on every user's PATH)."""
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None


def _openssl(*args: str | Path, cwd: Path) -> None:
    done = subprocess.run(["openssl", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {done.stderr.strip()}")


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA (self-signed) and a certificate it signed for 127.0.0.1 (an IP SAN): the CA's PEM,
    the server's certificate and its key."""
    folder.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=Evidence workbench test CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=folder)
    _openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj",
             "/CN=127.0.0.1", cwd=folder)
    (folder / "server.ext").write_text(
        "basicConstraints = critical, CA:FALSE\n"
        "keyUsage = critical, digitalSignature\n"
        "extendedKeyUsage = serverAuth\n"
        "subjectAltName = IP:127.0.0.1\n"
        "subjectKeyIdentifier = hash\n"
        "authorityKeyIdentifier = keyid, issuer\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext",
             cwd=folder)
    return folder / "ca.pem", folder / "server.pem", folder / "server.key"


NGINX_CONFIG = """\
daemon off;
master_process off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;

events {{
    worker_connections 256;
}}

http {{
    access_log {root}/access.log;
    client_body_temp_path {root}/tmp/client_body;
    proxy_temp_path {root}/tmp/proxy;
    fastcgi_temp_path {root}/tmp/fastcgi;
    uwsgi_temp_path {root}/tmp/uwsgi;
    scgi_temp_path {root}/tmp/scgi;

{server_block}
}}
"""

# The server block docs/deployment.md shows, with the test's paths and ports.
SERVER_BLOCK = """\
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate     {certificate};
        ssl_certificate_key {key};

        # Chunk batches are large; long answers (a big upsert) are waited for.
        client_max_body_size 100m;

        location / {{
            if ($http_authorization != "Bearer {token}") {{
                return 401;
            }}
            proxy_pass http://127.0.0.1:{chroma_port};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_read_timeout 300s;
            proxy_send_timeout 300s;
        }}
    }}"""


class TlsProxy:
    """nginx on 127.0.0.1:<free port>, TLS with a certificate of its own CA (`ca_bundle`),
    answering 401 unless `Authorization: Bearer <token>`, in front of a `chroma run` on
    `data`; stop() ends both."""

    def __init__(self, root: Path, data: Path, token: str) -> None:
        binary = nginx_binary()
        if binary is None:
            raise RuntimeError("nginx is not installed (make system-packages installs it)")
        self.root = root
        self.token = token
        (root / "tmp").mkdir(parents=True, exist_ok=True)
        self.ca_bundle, certificate, key = make_certificates(root / "certs")
        self.chroma = ChromaServer(data)
        try:
            self.port = free_port()
            server_block = SERVER_BLOCK.format(port=self.port, certificate=certificate,
                                               key=key, token=token,
                                               chroma_port=self.chroma.port)
            config = root / "nginx.conf"
            config.write_text(NGINX_CONFIG.format(root=root, server_block=server_block))
            self.error_log = root / "error.log"
            self._log = open(root / "nginx.out", "ab")  # noqa: SIM115
            self.process = subprocess.Popen(
                [binary, "-p", str(root), "-c", str(config), "-e", str(self.error_log)],
                stdout=self._log, stderr=subprocess.STDOUT)
            self._wait_until_up()
        except BaseException:
            self.chroma.stop()
            raise

    def _wait_until_up(self) -> None:
        # Bounded by attempts: nginx listens within a moment of starting.
        context = ssl.create_default_context(cafile=str(self.ca_bundle))
        for _ in range(300):
            if self.process.poll() is not None:
                log = self.error_log.read_text() if self.error_log.exists() else ""
                raise RuntimeError(f"nginx exited with {self.process.returncode}: {log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock, \
                        context.wrap_socket(sock, server_hostname="127.0.0.1"):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("nginx did not accept a TLS connection")

    def stop(self) -> None:
        """Ends nginx, then the ChromaDB server; safe to call twice."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        self.chroma.stop()
