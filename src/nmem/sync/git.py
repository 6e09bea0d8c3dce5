"""The git command line, as sync uses it: a private bare repository, plumbing only.

No work tree, no merge, no rebase, no force push: fetch the branch, read blobs, build a
commit on top of the fetched tip with a temporary index, push it as a fast-forward. Errors
reaching or updating the remote are `NetworkError` (exit 5); a missing git is a `ConfigError`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping

from nmem.capture.privacy import redact_url
from nmem.errors import ConfigError, NetworkError, StorageError

ALLOWED_PROTOCOLS = "file:git:http:https:ssh"
_REJECTED = ("[rejected]", "non-fast-forward", "fetch first")
# Another push updated the branch between the remote's check and its ref update: a race, not a refusal.
_RACED = ("but expected", "cannot lock ref", "failed to update ref")


class GitRepo:
    """nmem's private bare repository and the remote it syncs with."""

    def __init__(self, path: str, url: str, branch: str, timeout: float, identity: str) -> None:
        if url.startswith("-"):
            raise ConfigError(f"invalid sync remote {url!r}")
        self.path = path
        self.url = url
        self.branch = branch
        self.timeout = timeout
        self.tracking = f"refs/remotes/sync/{branch}"
        git = shutil.which("git")
        if git is None:
            raise ConfigError("sync needs git on PATH; install git, then run `nmem sync` again")
        self.git = git
        self.env = {
            **os.environ,
            "GIT_DIR": path,
            "GIT_TERMINAL_PROMPT": "0",        # a background sync must never wait for a password
            "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS,
            "LC_ALL": "C",                     # messages read below are git's English ones
            "GIT_AUTHOR_NAME": "nmem", "GIT_AUTHOR_EMAIL": f"{identity}@nmem.invalid",
            "GIT_COMMITTER_NAME": "nmem", "GIT_COMMITTER_EMAIL": f"{identity}@nmem.invalid",
        }
        for name in ("GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE"):
            self.env.pop(name, None)

    @property
    def shown_url(self) -> str:
        return redact_url(self.url)

    # -- running git -----------------------------------------------------------------------------

    def _run(self, args: list[str], *, stdin: bytes = b"", env: Mapping[str, str] | None = None,
             network: bool = False) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run([self.git, *args], input=stdin, capture_output=True, env=env or self.env,
                                  timeout=self.timeout, check=False, start_new_session=True)
        except subprocess.TimeoutExpired:
            what = f"git {args[0]} {self.shown_url}" if network else f"git {args[0]}"
            raise NetworkError(f"{what} timed out after {self.timeout:g} s") from None
        except OSError as exc:
            raise ConfigError(f"cannot run git: {exc.strerror}") from exc

    def _local(self, args: list[str], *, stdin: bytes = b"", env: Mapping[str, str] | None = None) -> bytes:
        done = self._run(args, stdin=stdin, env=env)
        if done.returncode != 0:
            raise StorageError(f"git {args[0]} failed in {self.path}: {_tail(done.stderr)}")
        return done.stdout

    # -- the private repository -------------------------------------------------------------------

    def ensure(self) -> None:
        """Create the bare repository on first use; clear git lock files a killed sync left (only
        one sync at a time holds the data dir's lock, so any lock file found is stale)."""
        if not os.path.isfile(os.path.join(self.path, "HEAD")):
            os.makedirs(self.path, mode=0o700, exist_ok=True)
            self._local(["init", "--quiet", "--bare", self.path])
        for root, _dirs, files in os.walk(self.path):
            for name in files:
                if name.endswith(".lock"):
                    try:
                        os.unlink(os.path.join(root, name))
                    except FileNotFoundError:
                        pass

    # -- the remote -------------------------------------------------------------------------------

    def fetch(self) -> str | None:
        """The remote branch's tip after fetching it, or None when the branch does not exist yet."""
        done = self._run(["fetch", "--quiet", "--no-tags", self.url,
                          f"+refs/heads/{self.branch}:{self.tracking}"], network=True)
        if done.returncode != 0:
            message = _tail(done.stderr)
            if "couldn't find remote ref" in message:
                return None
            raise NetworkError(f"cannot fetch from {self.shown_url}: {self._redact(message)}")
        return self._local(["rev-parse", "--verify", "--quiet", f"{self.tracking}^{{commit}}"]).decode().strip()

    def push(self, commit: str) -> bool:
        """Push `commit` as the branch's new tip. False when the remote moved on (fetch and retry)."""
        done = self._run(["-c", f"core.hooksPath={os.devnull}", "push", "--porcelain", "--quiet", self.url,
                          f"{commit}:refs/heads/{self.branch}"], network=True)
        if done.returncode == 0:
            self._local(["update-ref", self.tracking, commit])
            return True
        report = done.stdout.decode("utf-8", "replace") + done.stderr.decode("utf-8", "replace")
        if any(marker in report for marker in _REJECTED) and "remote rejected" not in report:
            return False
        if any(marker in report for marker in _RACED):
            return False
        raise NetworkError(f"cannot push to {self.shown_url}: {self._redact(_tail(report.encode()))}")

    def _redact(self, message: str) -> str:
        return message.replace(self.url, self.shown_url) if self.url != self.shown_url else message

    # -- reading ----------------------------------------------------------------------------------

    def list_files(self, commit: str) -> dict[str, str]:
        """path → blob id of every file at `commit`."""
        out = self._local(["ls-tree", "-r", "-z", "--full-tree", commit])
        files: dict[str, str] = {}
        for entry in out.split(b"\0"):
            if not entry:
                continue
            meta, _, path = entry.partition(b"\t")
            _mode, kind, blob = meta.split(b" ")
            if kind == b"blob":
                files[path.decode("utf-8", "surrogateescape")] = blob.decode()
        return files

    def read_blobs(self, blobs: list[str]) -> dict[str, bytes]:
        """The contents of blobs, read in one `git cat-file --batch`."""
        if not blobs:
            return {}
        out = self._local(["cat-file", "--batch"], stdin="".join(f"{b}\n" for b in blobs).encode())
        contents: dict[str, bytes] = {}
        pos = 0
        for blob in blobs:
            header_end = out.index(b"\n", pos)
            header = out[pos:header_end].split(b" ")
            if len(header) != 3:
                raise StorageError(f"git cat-file: object {blob} is missing")
            size = int(header[2])
            start = header_end + 1
            contents[blob] = out[start:start + size]
            pos = start + size + 1
        return contents

    # -- writing ----------------------------------------------------------------------------------

    def commit_files(self, base: str | None, files: Mapping[str, bytes], message: str) -> tuple[str, dict[str, str]]:
        """A commit on `base` whose tree is base's with `files` written (whole contents).
        Returns the commit and each written file's blob id."""
        index = os.path.join(self.path, f"nmem-index-{os.getpid()}-{time.monotonic_ns()}")
        env = {**self.env, "GIT_INDEX_FILE": index}
        try:
            self._local(["read-tree", base] if base else ["read-tree", "--empty"], env=env)
            blobs = {path: self._local(["hash-object", "-w", "--stdin"], stdin=data).decode().strip()
                     for path, data in files.items()}
            args = ["update-index", "--add"]
            for path, blob in blobs.items():
                args += ["--cacheinfo", f"100644,{blob},{path}"]
            self._local(args, env=env)
            tree = self._local(["write-tree"], env=env).decode().strip()
        finally:
            try:
                os.unlink(index)
            except FileNotFoundError:
                pass
        parents = ["-p", base] if base else []
        commit = self._local(["commit-tree", tree, *parents, "-m", message]).decode().strip()
        return commit, blobs


def _tail(stderr: bytes, lines: int = 3) -> str:
    text = stderr.decode("utf-8", "replace").strip()
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return " / ".join(kept) or "no message from git"
