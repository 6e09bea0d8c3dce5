"""nmem records in the row shapes claude-mem answers with.

claude-mem's rows carry `created_at` (ISO text) and `created_at_epoch` (milliseconds), an
observation's `type`, `title`, `subtitle`, `files_read`/`files_modified` and `concepts`, a
session summary's `request`/`completed`/`files_edited`, a prompt's `prompt_text`. nmem keeps
its own names beside them (`obs_type`, `urn`, `kind`) so a row can be opened with `nmem get`.
`index` rows are compact (previews); `full` rows add the whole text and nmem's fields.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nmem.compat.claude_mem.typemap import shown_type
from nmem.models import Memory, Observation, Prompt, Session, preview, role_fields
from nmem.service.relpaths import preview_of, relative, relative_summary

READS = frozenset(("file_read",))
WRITES = frozenset(("file_write", "file_edit"))


def _when(ts: int) -> dict[str, Any]:
    return {"created_at": datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "created_at_epoch": ts * 1000}


def observation(obs: Observation, full: bool = False, root: str | None = None) -> dict[str, Any]:
    """An observation as claude-mem's row: its title and subtitle name paths relative to `root`
    (its session's project root), as every listing does; `files_*` keep them whole for filters."""
    path = obs.file_path
    row: dict[str, Any] = {
        "kind": "observation", "id": obs.id, "type": shown_type(obs.obs_type), "obs_type": obs.obs_type,
        "title": preview_of(obs, root),
        "subtitle": relative(path, root) if path else obs.tool_name or obs.source_event,
        "project": obs.project, "memory_session_id": obs.session_id,
        "files_read": [path] if path and obs.obs_type in READS else [],
        "files_modified": [path] if path and obs.obs_type in WRITES else [],
        "concepts": [], **_when(obs.timestamp), "urn": obs.urn,
    }
    if full:
        row.update(text=obs.content, narrative=obs.content, facts=[], prompt_id=obs.prompt_id,
                   tool_name=obs.tool_name, metadata=obs.metadata, is_pinned=obs.is_pinned)
    return row


def memory(mem: Memory, full: bool = False) -> dict[str, Any]:
    domain = mem.domain
    row: dict[str, Any] = {
        "kind": "memory", "id": mem.id, "type": shown_type(namespace=mem.namespace, tags=mem.tags),
        "namespace": mem.namespace,
        "title": mem.summary, "subtitle": preview(mem.content) if not full else mem.namespace,
        "project": domain[len("project:"):] if domain.startswith("project:") else domain,
        "memory_session_id": None, "files_read": [], "files_modified": [], "concepts": list(mem.tags),
        **_when(mem.updated_at or mem.created_at), "urn": mem.urn,
    }
    if full:
        row.update(text=mem.content, narrative=mem.content, facts=[], domain=domain, tier=mem.tier,
                   is_pinned=mem.is_pinned, relates_to=list(mem.relates_to), source=mem.source)
    return row


def session(sess: Session, full: bool = False, root: str | None = None) -> dict[str, Any]:
    """A session as claude-mem's summary row; its notes, errors and commands name paths relative
    to `root`, `files_edited` keeps them whole (as an observation's `files_*`)."""
    whole = sess.summary if isinstance(sess.summary, dict) else {}
    summary = relative_summary(whole, root) if whole else whole
    commits = summary.get("commits") or []
    row: dict[str, Any] = {
        "kind": "session", "id": sess.id, "memory_session_id": sess.id, "project": sess.project,
        "request": sess.intent or None,
        "completed": "; ".join(str(c) for c in commits) or None,
        "files_edited": list(whole.get("files_changed") or []),
        "status": "completed" if sess.ended_at is not None else "active",
        **_when(sess.started_at), "urn": sess.urn,
    }
    if full:
        row.update(investigated=None, learned=None, next_steps=None,
                   notes=summary.get("text") if summary else (str(sess.summary) if sess.summary else None),
                   errors=list(summary.get("errors") or []), commands=list(summary.get("commands") or []),
                   ended_at=sess.ended_at, signature=sess.signature)
    return row


def prompt(p: Prompt, full: bool = False) -> dict[str, Any]:
    return {
        "kind": "prompt", "id": p.id, "content_session_id": p.session_id, "project": p.project,
        "prompt_text": p.content if full else preview(p.content), "source": p.source, **role_fields(p.source),
        **_when(p.timestamp), "urn": p.urn,
    }


def of(record: Observation | Prompt | Session | Memory, full: bool = False, root: str | None = None) -> dict[str, Any]:
    if isinstance(record, Observation):
        return observation(record, full, root)
    if isinstance(record, Memory):
        return memory(record, full)
    if isinstance(record, Session):
        return session(record, full, root)
    return prompt(record, full)
