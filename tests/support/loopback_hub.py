"""A loopback Hugging Face hub: an HTTP server on 127.0.0.1 answering the routes huggingface_hub's client uses.

Routes (as huggingface_hub 2.x asks them; read from its hf_api.py and file_download.py):
- GET /api/models/{owner}/{name}[/revision/{rev}][?blobs=true]: the model info, with each file's size,
  git blob id and, for weights, the LFS sha256 (the checksums a client can verify), the card's licence
  and whether the repo is gated.
- HEAD and GET /{owner}/{name}/resolve/{rev}/{path}: ETag (the LFS sha256 for weights, the git blob id
  otherwise), X-Repo-Commit, X-Linked-Etag and X-Linked-Size for weights, Content-Length, and Range
  requests answered with 206 and Content-Range (what a resumed download sends).
Errors carry the hub's X-Error-Code header (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo),
which huggingface_hub turns into its typed errors.

Faults a test can set on a repo: `corrupt` (a file served with one byte changed, the listing keeps the
true checksum), `hold_at` (serve a file up to N bytes, then wait for `release` before the rest: a
download caught mid-file, deterministically), `drop_at` (serve N bytes, then close the connection:
a lost connection, `drops_left` times) and `gated` (the info is public, the files answer 403).
Every request is recorded (method, path, Range) so tests can check what the client asked.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin", ".gguf")
HOLD_LIMIT_S = 60.0  # a held file is never held longer than this (a test that forgot to release still ends)


def git_blob_id(data: bytes) -> str:
    """Git's object id for a file's bytes: what the hub lists as blobId and sends as a small file's ETag."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class HubRepo:
    """One model repository at one commit: its files (name -> bytes) and the faults set on it."""

    repo_id: str
    files: dict[str, bytes]
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    revisions: tuple[str, ...] = ("main",)
    license: str | None = "apache-2.0"
    gated: bool = False
    corrupt: set[str] = field(default_factory=set)
    hold_at: dict[str, int] = field(default_factory=dict)
    drop_at: dict[str, int] = field(default_factory=dict)  # close the connection after N bytes of the file
    drops_left: int = 1  # how many answers are cut short (then the file is served whole)
    release: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def from_folder(cls, repo_id: str, folder: Path, **kwargs: object) -> HubRepo:
        files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        return cls(repo_id, files, **kwargs)  # type: ignore[arg-type]

    def knows(self, revision: str) -> bool:
        return revision in self.revisions or revision == self.commit

    def is_lfs(self, name: str) -> bool:
        return name.endswith(LFS_SUFFIXES)

    def etag(self, name: str) -> str:
        data = self.files[name]
        return hashlib.sha256(data).hexdigest() if self.is_lfs(name) else git_blob_id(data)

    def served_bytes(self, name: str) -> bytes:
        data = self.files[name]
        if name in self.corrupt:
            middle = len(data) // 2
            return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
        return data

    def info(self, with_blobs: bool) -> dict[str, object]:
        siblings: list[dict[str, object]] = []
        for name, data in self.files.items():
            sibling: dict[str, object] = {"rfilename": name}
            if with_blobs:
                sibling |= {"size": len(data), "blobId": git_blob_id(data)}
                if self.is_lfs(name):
                    sibling["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
            siblings.append(sibling)
        card = {"license": self.license} if self.license else {}
        return {
            "id": self.repo_id,
            "modelId": self.repo_id,
            "sha": self.commit,
            "private": False,
            "gated": "manual" if self.gated else False,
            "disabled": False,
            "cardData": card,
            "tags": [f"license:{self.license}"] if self.license else [],
            "siblings": siblings,
        }


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    range: str | None


class LoopbackHub:
    """The server; `url` is what HF_ENDPOINT is set to."""

    def __init__(self, *repos: HubRepo) -> None:
        self.repos = {repo.repo_id: repo for repo in repos}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: the requests are recorded in `hub.requests` instead."""

            def do_GET(self) -> None:
                hub._answer(self, with_body=True)

            def do_HEAD(self) -> None:
                hub._answer(self, with_body=False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="loopback-hub", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> LoopbackHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        for repo in self.repos.values():
            repo.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def file_requests(self, name: str, method: str = "GET") -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.method == method and r.path.endswith("/" + name)]

    # --- routing ---------------------------------------------------------------------------------

    _INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?$")
    _RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<name>.+)$")

    def _answer(self, handler: BaseHTTPRequestHandler, *, with_body: bool) -> None:
        parts = urlsplit(handler.path)
        path = unquote(parts.path)
        with self._lock:
            self.requests.append(Request(handler.command, path, handler.headers.get("Range")))
        if match := self._INFO.match(path):
            repo = self._repo(handler, match["repo"])
            if repo is None:
                return
            revision = match["rev"] or "main"
            if not repo.knows(revision):
                _error(handler, 404, "RevisionNotFound", f"Invalid rev id: {revision}")
                return
            body = json.dumps(repo.info("blobs=true" in parts.query)).encode()
            _send(handler, 200, {"Content-Type": "application/json"}, body if with_body else None, len(body))
            return
        if match := self._RESOLVE.match(path):
            repo = self._repo(handler, match["repo"])
            if repo is None:
                return
            if not repo.knows(match["rev"]):
                _error(handler, 404, "RevisionNotFound", f"Invalid rev id: {match['rev']}")
                return
            if repo.gated:
                _error(handler, 403, "GatedRepo", f"Access to model {repo.repo_id} is restricted.")
                return
            name = match["name"]
            if name not in repo.files:
                _error(handler, 404, "EntryNotFound", f"{name} does not exist on {match['rev']}")
                return
            self._file(handler, repo, name, with_body=with_body)
            return
        _error(handler, 404, "", "not a route of this hub")

    def _repo(self, handler: BaseHTTPRequestHandler, repo_id: str) -> HubRepo | None:
        repo = self.repos.get(repo_id)
        if repo is None:
            _error(handler, 401, "RepoNotFound", "Repository not found")
        return repo

    def _file(self, handler: BaseHTTPRequestHandler, repo: HubRepo, name: str, *, with_body: bool) -> None:
        data = repo.served_bytes(name)
        headers = {"ETag": f'"{repo.etag(name)}"', "X-Repo-Commit": repo.commit, "Accept-Ranges": "bytes"}
        if repo.is_lfs(name):
            headers |= {"X-Linked-Etag": f'"{repo.etag(name)}"', "X-Linked-Size": str(len(data))}
        start = 0
        wanted = handler.headers.get("Range")
        status = 200
        if wanted and (match := re.fullmatch(r"bytes=(\d+)-", wanted)):
            start = int(match[1])
            status = 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        body = data[start:]
        if not with_body:
            _send(handler, 200, headers, None, len(data))
            return
        drop = repo.drop_at.get(name)
        if drop is not None and repo.drops_left > 0 and drop > start:
            repo.drops_left -= 1
            _send_head(handler, status, headers, len(body))
            try:
                handler.wfile.write(body[: drop - start])
                handler.wfile.flush()
            except OSError:
                pass
            handler.close_connection = True  # a lost connection: fewer bytes than Content-Length said
            return
        hold = repo.hold_at.get(name)
        if hold is None or hold <= start:
            _send(handler, status, headers, body, len(body))
            return
        _send_head(handler, status, headers, len(body))
        try:
            handler.wfile.write(body[: hold - start])
            handler.wfile.flush()
            repo.release.wait(HOLD_LIMIT_S)
            handler.wfile.write(body[hold - start :])
        except OSError:  # the client went away mid-file (a killed download): nothing more to send
            handler.close_connection = True


def _send_head(handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], length: int) -> None:
    handler.send_response(status)
    for key, value in headers.items():
        handler.send_header(key, value)
    handler.send_header("Content-Length", str(length))
    handler.end_headers()


def _send(
    handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes | None, length: int
) -> None:
    _send_head(handler, status, headers, length)
    if body is not None:
        try:
            handler.wfile.write(body)
        except OSError:
            handler.close_connection = True


def _error(handler: BaseHTTPRequestHandler, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = {"Content-Type": "application/json", "X-Error-Message": message}
    if code:
        headers["X-Error-Code"] = code
    _send(handler, status, headers, body if handler.command != "HEAD" else None, len(body))


@contextmanager
def running_hub(*repos: HubRepo) -> Iterator[LoopbackHub]:
    hub = LoopbackHub(*repos).start()
    try:
        yield hub
    finally:
        hub.stop()
