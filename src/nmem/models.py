"""Records that cross the service boundary, and the URNs that name them.

Every record renders to the stable JSON shape documented in docs/json.md via `to_dict()`.
Records are plain classes with slots rather than dataclasses: the hook path builds them,
and `dataclasses` (with `inspect`, `typing` and `ast` behind it) costs more to import than
a hook may spend. Treat them as immutable.
"""

from __future__ import annotations

from nmem import jsonlite as json
from nmem import text as cut
from nmem.capture.errorline import key_line
from nmem.text import joined

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, Self

FAILED_MARK = "✗"
# Every preview is cut the same way (nmem.text: at a word boundary, `…` marking the cut).
PREVIEW_CHARS = cut.PREVIEW_CHARS
preview = cut.preview
# Every preview is cut the same way (nmem.text: at a word boundary, `…` marking the cut).
__all__ = ["PREVIEW_CHARS", "preview"]

OBS_TYPES: tuple[str, ...] = (
    "file_read", "file_write", "file_edit", "file_error", "search", "command", "command_error",
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


SPEC_TAG = "spec:"  # subcog's `--spec <name>` is kept as the tag `spec:<name>`


def spec_tag(spec: str) -> str:
    return SPEC_TAG + spec.strip()


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


# The ids people see (`nmem get` reads each back, `nmem.refs`): an observation is its bare
# number, a prompt `p42`, a session `s` + its id (text tables show the first 8 characters),
# a memory its ULID.
SESSION_REF_CHARS = 8


def prompt_ref(prompt_id: int) -> str:
    return f"p{prompt_id}"


# Who wrote a prompt row (its `source`): the user, the agent (a reply or a thinking block), or a
# subagent (`subagent` or `subagent:<type>`, e.g. `subagent:Explore`). Sessions recorded before
# thinking and subagents were told apart hold them as `agent`.
USER, REPLY, THINKING, SUBAGENT = "user", "agent", "thinking", "subagent"
ROLES = {USER: "user", REPLY: "reply", THINKING: "thinking", SUBAGENT: "subagent"}


def subagent_source(agent_type: str | None) -> str:
    kind = " ".join((agent_type or "").split())[:60]
    return f"{SUBAGENT}:{kind}" if kind else SUBAGENT


def prompt_role(source: str) -> str:
    """`user`, `reply` (the agent's text), `thinking` or `subagent`: what a viewer badges."""
    return ROLES[SUBAGENT] if source.startswith(SUBAGENT) else ROLES.get(source, source)


def agent_type(source: str) -> str | None:
    """A subagent's type (`Explore`) from its prompt's source, else None."""
    _, sep, kind = source.partition(":")
    return kind or None if sep and source.startswith(SUBAGENT) else None


def prompt_label(source: str) -> str:
    """How a listing names a prompt's writer: `user`, `reply`, `thinking`, `↳ Explore`."""
    if source.startswith(SUBAGENT):
        return "↳ " + (agent_type(source) or "subagent")
    return prompt_role(source)


def role_fields(source: str) -> dict[str, Any]:
    """What every surface adds to a prompt row: its role, and a subagent's type."""
    fields: dict[str, Any] = {"role": prompt_role(source), "label": prompt_label(source)}
    if fields["role"] == ROLES[SUBAGENT]:
        fields["agent_type"] = agent_type(source)
    return fields


def session_ref(session_id: str, short: bool = False) -> str:
    return "s" + (session_id[:SESSION_REF_CHARS] if short else session_id)


# subcog's URIs (`subcog://{domain}/{namespace}/{id}`) name what the same nmem:// URN names.
URN_SCHEMES = ("nmem://", "subcog://")


def is_urn(text: str) -> bool:
    return text.startswith(URN_SCHEMES)


def urn_parts(ref: str) -> list[str] | None:
    """The domain, namespace and id a URN names (one to three of them), from either form and
    either scheme (`subcog://` is an alias of `nmem://`); None if it is no URN.

    A `:` left in the authority marks the form nmem writes (`nmem://project:web/…`), taken
    verbatim (a project may be called `a%20b`); otherwise it is the RFC 3986 form MCP clients
    get (`nmem://project%3Aweb/…`) and each part is %-decoded after the split, so a project
    called `acme/web` travels as `project%3Aacme%2Fweb`."""
    ref = ref.strip()
    scheme = next((s for s in URN_SCHEMES if ref.startswith(s)), None)
    if scheme is None:
        return None
    body = ref[len(scheme):]
    parts = (body[:-1] if body.endswith("/") else body).split("/")
    if not 1 <= len(parts) <= 3 or not all(parts):
        return None
    if ":" not in parts[0] and "%" in body:
        from urllib.parse import unquote  # only for the encoded form: the hook path never needs it

        parts = [unquote(p) for p in parts]
    return parts


def _json_or_none(text: str | None) -> Any:
    if text is None or text == "":
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


if TYPE_CHECKING:
    from typing import dataclass_transform
else:
    def dataclass_transform(**_: object) -> Any:  # the checker's view only; no `typing` on the hook path
        return lambda cls: cls


_MISSING = object()


@dataclass_transform(eq_default=True)
class _RecordType(type):
    """Builds a record class from its annotated fields, as `dataclasses` would, without importing
    it (the hook path): `__slots__` in field order, and an `__init__` assigning each field, a
    default taken from the class body (a list or dict default copied per instance). A class
    that writes its own `__slots__` is left as written."""

    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> _RecordType:
        build: tuple[list[str], dict[str, Any]] | None = None
        if "__slots__" not in ns:
            fields = [f for f, hint in ns.get("__annotations__", {}).items()
                      if not str(hint).startswith(("ClassVar", "typing.ClassVar"))]
            defaults = {f: ns.pop(f) for f in fields if f in ns}
            ns["__slots__"] = tuple(fields)
            if "__init__" not in ns:
                build = (fields, defaults)
        cls = super().__new__(mcls, name, bases, ns)
        if build is not None:
            type.__setattr__(cls, "__init__", _deferred_init(cls, name, *build))
        return cls


COMPILE_AFTER = 8   # instances a record class builds field by field before it compiles its __init__


def _deferred_init(owner: type, name: str, fields: list[str], defaults: dict[str, Any]) -> Any:
    """An `__init__` that sets the fields one by one for a record class's first few instances,
    then compiles the real one and puts it on the class: a hook defines every record class at
    import but builds only a few instances, and `exec` costs ~0.1 ms a class; a reader building
    thousands gets the compiled one after COMPILE_AFTER."""
    built = 0

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal built
        built += 1
        if built > COMPILE_AFTER:
            init = _make_init(name, fields, defaults)
            type.__setattr__(owner, "__init__", init)
            init(self, *args, **kwargs)
            return
        if len(args) > len(fields):
            raise TypeError(f"{name}() takes {len(fields)} positional arguments but {len(args)} were given")
        for field, value in zip(fields, args, strict=False):
            if field in kwargs:
                raise TypeError(f"{name}() got multiple values for argument {field!r}")
            setattr(self, field, value)
        for field in fields[len(args):]:
            if field in kwargs:
                value = kwargs.pop(field)
            elif field in defaults:
                value = defaults[field]
                if isinstance(value, (list, dict, set)):
                    value = type(value)(value)
            else:
                raise TypeError(f"{name}() missing required argument: {field!r}")
            setattr(self, field, value)
        if kwargs:
            raise TypeError(f"{name}() got an unexpected keyword argument {next(iter(kwargs))!r}")

    __init__.__qualname__ = f"{name}.__init__"
    return __init__


def _make_init(name: str, fields: list[str], defaults: dict[str, Any]) -> Any:
    params, body = [], []
    for field in fields:
        if field not in defaults:
            params.append(field)
            body.append(f"    self.{field} = {field}")
        elif isinstance(defaults[field], (list, dict, set)):
            params.append(f"{field}=_MISSING")
            body.append(f"    self.{field} = type(_d_{field})(_d_{field}) if {field} is _MISSING else {field}")
        else:
            params.append(f"{field}=_d_{field}")
            body.append(f"    self.{field} = {field}")
    source = f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or "    pass")
    scope: dict[str, Any] = {"_MISSING": _MISSING, **{f"_d_{f}": v for f, v in defaults.items()}}
    exec(source, scope)  # what dataclasses does: one function per record class
    init = scope["__init__"]
    init.__qualname__ = f"{name}.__init__"
    return init


class Record(metaclass=_RecordType):
    """Equality, repr and a plain-data `to_dict` over `__slots__`, as a frozen dataclass gives.
    A subclass lists its fields as annotations (defaults allowed) and gets `__init__` and
    `__slots__` made from them."""

    __slots__: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((self.__class__, self._values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{self.__class__.__name__}({fields})"

    def replace(self, **changes: Any) -> Self:
        """A copy with some fields changed (what `dataclasses.replace` does)."""
        values = {name: getattr(self, name) for name in self.__slots__}
        unknown = set(changes) - set(values)
        if unknown:
            raise TypeError(f"{self.__class__.__name__} has no field {sorted(unknown)[0]!r}")
        values.update(changes)
        return self.__class__(**values)

    def fields(self) -> dict[str, Any]:
        """Field name → value, containers copied (what `dataclasses.asdict` returns)."""
        return {name: _plain(getattr(self, name)) for name in self.__slots__}


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


class Observation(Record):
    kind = "observation"
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

    @property
    def ref(self) -> str:
        return str(self.id)

    @property
    def subagent(self) -> str | None:
        """The type of the subagent that made this call (`Explore`; `subagent` when its type is
        unknown), None for the session's own agent."""
        meta = self.metadata if isinstance(self.metadata, dict) else {}
        if not meta.get("agent_id"):
            return None
        kind = meta.get("agent_type")
        return kind if isinstance(kind, str) and kind else SUBAGENT

    def to_dict(self) -> dict[str, Any]:
        d = self.fields()
        if (by := self.subagent) is not None:
            d["subagent"] = by
        d["urn"] = self.urn
        d["ref"] = self.ref
        return d

    def preview(self, size: int = PREVIEW_CHARS) -> str:
        """One line for index results and tables: `subject → result` when the row has a result
        (a failure's key line marked ✗, an answer's excerpt), else the content on one line, cut.

        Rows stored before failures kept their key line (`error_line`) get it from their error."""
        subject, _, rest = self.content.partition("\n")
        meta = self.metadata if isinstance(self.metadata, dict) else {}
        if meta.get("error") or meta.get("error_line"):
            key = str(meta.get("error_line") or "") or key_line(str(meta["error"]),
                                                                last=self.obs_type == "command_error")
            return joined(subject, f"{FAILED_MARK} {key}" if key else FAILED_MARK, size, self.file_path)
        result = rest.partition("\n")[0]
        if result.startswith("→ "):
            return joined(subject, result[2:], size)
        return preview(" ".join(self.content.split()), size)

    def index_entry(self) -> dict[str, Any]:
        return {
            "id": self.id, "timestamp": self.timestamp, "obs_type": self.obs_type,
            "content_preview": self.preview(), "file_path": self.file_path,
            "session_id": self.session_id, "project": self.project, "urn": self.urn, "ref": self.ref,
            **({"subagent": by} if (by := self.subagent) is not None else {}),
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


class Prompt(Record):
    kind = "prompt"
    id: int
    session_id: str
    project: str
    timestamp: int
    source: str
    content: str

    @property
    def urn(self) -> str:
        return prompt_urn(self.project, self.id)

    @property
    def ref(self) -> str:
        return prompt_ref(self.id)

    def to_dict(self) -> dict[str, Any]:
        d = self.fields()
        d.update(role_fields(self.source))
        d["urn"] = self.urn
        d["ref"] = self.ref
        return d

    def index_entry(self) -> dict[str, Any]:
        return {
            "id": self.id, "timestamp": self.timestamp, "source": self.source, **role_fields(self.source),
            "content_preview": preview(self.content), "session_id": self.session_id,
            "project": self.project, "urn": self.urn, "ref": self.ref,
        }

    @classmethod
    def from_row(cls, row: Any) -> Prompt:
        return cls(row["id"], row["session_id"], row["project"], row["timestamp"],
                   row["source"], row["content"])


class Session(Record):
    kind = "session"
    id: str
    project: str
    started_at: int
    ended_at: int | None
    signature: dict[str, Any] | None
    summary: Any
    agent: str | None = None   # the coding agent that ran it; None for sessions from before nmem kept it

    @property
    def urn(self) -> str:
        return session_urn(self.project, self.id)

    @property
    def ref(self) -> str:
        return session_ref(self.id)

    @property
    def intent(self) -> str:
        """What the session was for: its summary's intent (or text), once it has ended."""
        summary = self.summary
        if isinstance(summary, dict):
            return str(summary.get("intent") or summary.get("text") or "")
        return str(summary or "")

    def to_dict(self) -> dict[str, Any]:
        d = self.fields()
        if d["agent"] is None:
            del d["agent"]
        d["urn"] = self.urn
        d["ref"] = self.ref
        return d

    def index_entry(self) -> dict[str, Any]:
        return {
            "id": self.id, "timestamp": self.started_at, "ended_at": self.ended_at,
            "content_preview": preview(self.intent), "project": self.project, "urn": self.urn,
            "ref": self.ref,
        }

    @classmethod
    def from_row(cls, row: Any) -> Session:
        try:
            agent = row["agent"]
        except (IndexError, KeyError):  # a row selected without it
            agent = None
        return cls(row["id"], row["project"], row["started_at"], row["ended_at"],
                   _json_or_none(row["signature"]), _json_or_none(row["summary"]), agent)


class Memory(Record):
    """A curated memory: a decision, learning, gotcha... chosen to be remembered."""

    kind = "memory"

    id: str
    domain: str
    namespace: str
    summary: str
    content: str
    tags: list[str] = []  # noqa: RUF012 - a fresh copy per instance (Record)
    source: str | None = None
    relates_to: list[str] = []  # noqa: RUF012 - a fresh copy per instance (Record)
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

    @property
    def ref(self) -> str:
        return self.id

    def to_dict(self) -> dict[str, Any]:
        d = self.fields()
        d["urn"] = self.urn
        d["ref"] = self.ref
        return d

    def index_entry(self) -> dict[str, Any]:
        return {
            "id": self.id, "timestamp": self.updated_at, "domain": self.domain,
            "namespace": self.namespace, "summary": self.summary,
            "content_preview": preview(self.content), "tags": list(self.tags),
            "tier": self.tier, "urn": self.urn, "ref": self.ref,
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


class SearchHit(Record):
    """One search result: what kind of record, its score and the record itself."""

    kind: str  # observation | prompt | session | memory
    score: float
    record: Observation | Prompt | Session | Memory
    agent: str | None = None  # the coding agent whose session recorded it (the service fills it in)
    # (agent, project root) of its session when the store read them with the record; None: not read
    origin: tuple[str | None, str | None] | None = None

    def to_dict(self, full: bool = False) -> dict[str, Any]:
        body = self.record.to_dict() if full else self.record.index_entry()
        if self.agent is not None:
            body["agent"] = self.agent
        return {"kind": self.kind, **body, "score": round(self.score, 4)}
