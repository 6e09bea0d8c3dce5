"""Paths as people read them: relative to the project root of the session that recorded them.

Each session keeps its project root (the git top-level of where it started). Every surface that
lists observations (search, timeline, trace, file history; the CLI, MCP and REST alike) adds
`rel_path` beside the absolute `file_path` (which filters and `file_history` still take) and
shortens the root out of previews. A path outside the root, or of a session recorded before
roots were kept and of a project with no root at all, stays absolute.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from nmem.models import Observation
    from nmem.store.protocol import Store


def relative(path: str, root: str | None) -> str:
    """`path` relative to `root` (`.` for the root itself), else `path` unchanged."""
    if not root or len(root) < 2:
        return path
    base = root.rstrip("/")
    if path == base:
        return "."
    return path[len(base) + 1:] if path.startswith(base + "/") else path


def preview_of(obs: Observation, root: str | None) -> str:
    """An observation's preview with paths under `root` relative, shortened before it is cut
    (a long absolute path would otherwise be cut from the left: `…/code/shop/src/a.py`)."""
    if not root or len(root) < 2:
        return obs.preview()
    return obs.replace(content=shorten(obs.content, root),
                       file_path=relative(obs.file_path, root) if obs.file_path else None).preview()


def shorten(text: str, root: str | None) -> str:
    """Free text (a preview, a command) with the root's absolute prefix taken out."""
    if not root or len(root) < 2 or not text:
        return text
    return text.replace(root.rstrip("/") + "/", "")


def relative_summary(summary: Any, root: str | None) -> Any:
    """A session's summary (`capture.summary.summarize`) with its files relative to `root` and
    the root taken out of its text, errors and commands; anything else unchanged."""
    if not isinstance(summary, dict) or not root or len(root) < 2:
        return summary
    out = dict(summary)
    if isinstance(out.get("files_changed"), list):
        out["files_changed"] = [relative(p, root) if isinstance(p, str) else p for p in out["files_changed"]]
    for key in ("errors", "commands", "commits"):
        if isinstance(out.get(key), list):
            out[key] = [shorten(t, root) if isinstance(t, str) else t for t in out[key]]
    if isinstance(out.get("text"), str):
        out["text"] = shorten(out["text"], root)
    return out


class Roots:
    """The project roots of the sessions a listing shows, read once per listing."""

    __slots__ = ("_by_project", "_by_session", "_store")

    def __init__(self, store: Store, session_ids: Iterable[str] = (), known: Mapping[str, str] | None = None) -> None:
        """`known`: the sessions' roots when the caller read them already (`session_origins`)."""
        self._store = store
        self._by_session: dict[str, str] = (dict(known) if known is not None
                                            else store.session_roots(list(dict.fromkeys(session_ids))))
        self._by_project: dict[str, str | None] = {}

    def of(self, session_id: str | None, project: str | None = None) -> str | None:
        """The root of `session_id`, else the root `project`'s newest session recorded."""
        root = self._by_session.get(session_id or "")
        if root is None and project:
            if project not in self._by_project:
                self._by_project[project] = self._store.project_root(project)
            root = self._by_project[project]
        return root

    def read_projects(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Read at once, for the `rows` that will show a path or preview, the roots of the projects
        whose sessions recorded none (one statement for them all, where `of` read one a project)."""
        wanted = [str(row["project"]) for row in rows
                  if _shows_paths(row) and row.get("project") and row.get("session_id") not in self._by_session
                  and row["project"] not in self._by_project]
        if wanted:
            found = self._store.project_roots(wanted)
            self._by_project.update((project, found.get(project)) for project in wanted)

    def apply(self, row: dict[str, Any], record: Observation | None = None) -> dict[str, Any]:
        """A trail row's dict with `rel_path` and its preview relative (changed in place); the
        preview is made again from `record` when given, else shortened as it is. A row that shows
        neither a path nor a preview needs no root, and none is read for it."""
        if not _shows_paths(row):
            return row
        root = self.of(row.get("session_id"), row.get("project"))
        path = row.get("file_path")
        if isinstance(path, str) and path:
            row["rel_path"] = relative(path, root)
        if isinstance(row.get("content_preview"), str):
            row["content_preview"] = (preview_of(record, root) if record is not None
                                      else shorten(row["content_preview"], root))
        return row


def _shows_paths(row: Mapping[str, Any]) -> bool:
    """Whether a listing's row shows something a root shortens: a file path or a preview."""
    path = row.get("file_path")
    return (isinstance(path, str) and bool(path)) or isinstance(row.get("content_preview"), str)
