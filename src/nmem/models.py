"""Frozen records that cross the service boundary, and the URNs that name them.

Every record renders to the stable JSON shape documented in docs/json.md via `to_dict()`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

PREVIEW_CHARS = 120

OBS_TYPES: tuple[str, ...] = (
    "file_read", "file_write", "file_edit", "search", "command", "command_error",
    "git_commit", "git_push", "web_fetch", "web_search", "task_spawn", "mcp_call",
    "tool_other", "session_start", "session_resume", "session_compact", "session_clear",
    "session_end",
)

NAMESPACES: tuple[str, ...] = (
    "decisions", "learnings", "patterns", "blockers", "progress", "context", "tech-debt",
    "apis", "config", "security", "testing", "gotchas", "conventions",
    "file-patterns", "api-behaviors", "system-quirks", "naming-conventions",
)

TIERS: tuple[str, ...] = ("hot", "warm", "cold", "archived")
SCOPES: tuple[str, ...] = ("observations", "prompts", "sessions", "memories", "all")
ORDERS: tuple[str, ...] = ("relevance", "date_desc", "date_asc")


def preview(text: str, size: int = PREVIEW_CHARS) -> str:
    return text if len(text) <= size else text[:size]


def project_domain(project: str) -> str:
    return f"project:{project}"


def observation_urn(project: str, obs_id: int) -> str:
    return f"nmem://project:{project}/observations/{obs_id}"


def prompt_urn(project: str, prompt_id: int) -> str:
    return f"nmem://project:{project}/prompts/{prompt_id}"


def session_urn(project: str, session_id: str) -> str:
    return f"nmem://project:{project}/sessions/{session_id}"


def memory_urn(domain: str, namespace: str, uid: str) -> str:
    return f"nmem://{domain}/{namespace}/{uid}"


def _json_or_none(text: str | None) -> Any:
    if text is None or text == "":
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class Observation:
    id: int
    session_id: str
    project: str
    prompt_id: int | None
    timestamp: int
    obs_type: str
    source_event: str
    tool_name: str | None
    file_path: str | None
    content: str
    metadata: dict[str, Any] | None
    is_pinned: bool = False

    @property
    def urn(self) -> str:
        return observation_urn(self.project, self.id)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["urn"] = self.urn
        return d

    def index_entry(self) -> dict[str, Any]:
        return {
            "id": self.id, "timestamp": self.timestamp, "obs_type": self.obs_type,
            "content_preview": preview(self.content), "file_path": self.file_path,
            "session_id": self.session_id, "project": self.project, "urn": self.urn,
        }

    @classmethod
    def from_row(cls, row: Any) -> Observation:
        return cls(
            id=row["id"], session_id=row["session_id"], project=row["project"],
            prompt_id=row["prompt_id"], timestamp=row["timestamp"], obs_type=row["obs_type"],
            source_event=row["source_event"], tool_name=row["tool_name"],
            file_path=row["file_path"], content=row["content"],
            metadata=_json_or_none(row["metadata"]), is_pinned=bool(row["is_pinned"]),
        )


@dataclass(frozen=True)
class Prompt:
    id: int
    session_id: str
    project: str
    timestamp: int
    source: str
    content: str

    @property
    def urn(self) -> str:
        return prompt_urn(self.project, self.id)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["urn"] = self.urn
        return d

    def index_entry(self) -> dict[str, Any]:
        return {
            "id": self.id, "timestamp": self.timestamp, "source": self.source,
            "content_preview": preview(self.content), "session_id": self.session_id,
            "project": self.project, "urn": self.urn,
        }

    @classmethod
    def from_row(cls, row: Any) -> Prompt:
        return cls(row["id"], row["session_id"], row["project"], row["timestamp"],
                   row["source"], row["content"])


@dataclass(frozen=True)
class Session:
    id: str
    project: str
    started_at: int
    ended_at: int | None
    signature: dict[str, Any] | None
    summary: Any

    @property
    def urn(self) -> str:
        return session_urn(self.project, self.id)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["urn"] = self.urn
        return d

    def index_entry(self) -> dict[str, Any]:
        summary = self.summary
        if isinstance(summary, dict):
            text = str(summary.get("intent") or summary.get("text") or "")
        else:
            text = str(summary or "")
        return {
            "id": self.id, "timestamp": self.started_at, "ended_at": self.ended_at,
            "content_preview": preview(text), "project": self.project, "urn": self.urn,
        }

    @classmethod
    def from_row(cls, row: Any) -> Session:
        return cls(row["id"], row["project"], row["started_at"], row["ended_at"],
                   _json_or_none(row["signature"]), _json_or_none(row["summary"]))


@dataclass(frozen=True)
class Memory:
    """A curated memory: a decision, learning, gotcha... chosen to be remembered."""

    id: str
    domain: str
    namespace: str
    summary: str
    content: str
    tags: list[str] = field(default_factory=list)
    source: str | None = None
    relates_to: list[str] = field(default_factory=list)
    tier: str = "warm"
    is_pinned: bool = False
    created_at: int = 0
    updated_at: int = 0
    accessed_at: int | None = None
    access_count: int = 0
    deleted_at: int | None = None

    @property
    def urn(self) -> str:
        return memory_urn(self.domain, self.namespace, self.id)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["urn"] = self.urn
        return d

    def index_entry(self) -> dict[str, Any]:
        return {
            "id": self.id, "timestamp": self.updated_at, "domain": self.domain,
            "namespace": self.namespace, "summary": self.summary,
            "content_preview": preview(self.content), "tags": list(self.tags),
            "tier": self.tier, "urn": self.urn,
        }

    @classmethod
    def from_row(cls, row: Any) -> Memory:
        return cls(
            id=row["uid"], domain=row["domain"], namespace=row["namespace"],
            summary=row["summary"], content=row["content"],
            tags=list(json.loads(row["tags"] or "[]")), source=row["source"],
            relates_to=list(json.loads(row["relates_to"] or "[]")), tier=row["tier"],
            is_pinned=bool(row["is_pinned"]), created_at=row["created_at"],
            updated_at=row["updated_at"], accessed_at=row["accessed_at"],
            access_count=row["access_count"], deleted_at=row["deleted_at"],
        )


@dataclass(frozen=True)
class SearchHit:
    """One search result: what kind of record, its score and the record itself."""

    kind: str  # observation | prompt | session | memory
    score: float
    record: Observation | Prompt | Session | Memory

    def to_dict(self, full: bool = False) -> dict[str, Any]:
        body = self.record.to_dict() if full else self.record.index_entry()
        return {"kind": self.kind, **body, "score": round(self.score, 4)}
