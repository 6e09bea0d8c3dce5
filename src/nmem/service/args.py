"""The arguments every surface passes to the service, read once: counts, lists, tags, the
slugs and ids nmem accepts, and which projects a request covers (`ProjectScope`)."""

from __future__ import annotations

from nmem.capture.agents import AGENTS
from nmem.errors import InvalidArgument
from nmem.models import spec_tag

MAX_LIMIT = 100
MAX_IDS = 50
SUMMARY_CHARS = 100
QUERY_CHARS = 10_000   # a search query's limit: past it a search is refused before it starts
ALL_PROJECTS = ("", "*")   # what a surface passes for "every project alike"
CURRENT_PROJECT = "."
# What every surface says about its `project` argument (CLI --project, MCP and REST `project`).
SEARCH_PROJECT_HELP = ("Only this project ('.' = the current one). Default: every project, the current one's "
                       "results first; '*' (or empty, or null): every project alike.")
BOUND_PROJECT_HELP = ("Only this project ('.' = the current one; default: the current one); '*' (or empty, "
                      "or null): every project.")
RECALL_PROJECT_HELP = ("Whose memories, besides the user's and the org's ('.' = the current project; default: "
                       "the current one); '*' (or empty, or null): every project's.")
_SLUG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
_UID_CHARS = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")  # ULIDs: Crockford's base32


def is_slug(text: str) -> bool:
    return 0 < len(text) <= 40 and "a" <= text[0] <= "z" and all(c in _SLUG_CHARS for c in text)


def is_uid(text: str) -> bool:
    return len(text) == 26 and text[0] in "01234567" and all(c in _UID_CHARS for c in text)


def as_list(value: object, name: str) -> tuple[str, ...]:
    """Accept a list or a comma-separated string (claude-mem sends `files: "a.ts,b.ts"`)."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise InvalidArgument(f"{name} must be a string or a list of strings")


def tags_and_spec(tags: object, spec: object) -> list[str]:
    """`tags` (`as_list`) and, given a `spec`, its tag `spec:<name>` (subcog's `--spec`): what
    `capture` stores and `recall` filters on."""
    wanted = list(as_list(tags, "tags"))
    if spec is not None:
        if not str(spec).strip():
            raise InvalidArgument("spec must not be empty")
        wanted.append(spec_tag(str(spec)))
    return wanted


SOURCE_CHARS = 100


def source(value: object, default: str) -> str:
    """Who a memory comes from (srvrmgr's `rule_name`, a session id, `cli`): a caller may name
    it; one line of at most SOURCE_CHARS characters, else `default`."""
    if value is None or value == "":
        return default
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument("source (rule_name) must be a non-empty text")
    text = value.strip()
    if len(text) > SOURCE_CHARS or not text.isprintable():
        raise InvalidArgument(f"source (rule_name) must be one printable line of at most {SOURCE_CHARS} "
                              "characters")
    return text



AGENT_HELP = ("Only what these coding agents recorded (one name or a list): " + ", ".join(AGENTS)
              + ". Curated memories belong to no agent and are left out.")


def agents(value: object) -> tuple[str, ...]:
    """The `agent` argument of every surface: one agent's name, a list, or a comma-separated
    string; an unknown name is an error that lists the known ones."""
    names = tuple(dict.fromkeys(name.lower() for name in as_list(value, "agent")))
    unknown = [name for name in names if name not in AGENTS]
    if unknown:
        raise InvalidArgument(f"unknown agent {', '.join(map(repr, unknown))}; known agents: {', '.join(AGENTS)}")
    return names


class ProjectScope:
    """Which projects one request reads: `only` this project, or every project with `first`'s
    records first (ADR-006: a project match is a boost, not a filter). The one reading of a
    `project` argument; every surface (CLI, MCP, REST, claude-mem routes) passes it here.

    - a name: only that project; `.` the current one;
    - `*` or empty: every project alike (an adapter whose protocol has null maps it to `*`);
    - missing (None): for searches (`search`, `timeline`), every project with the current one
      first; for reads bound to a project (`bound=True`: `recall`, `recent`, `trace`,
      `sessions`), the current project only. Recall then adds the user's and the
      organisation's memories, which belong to no project.
    """

    __slots__ = ("first", "only")

    def __init__(self, only: str | None, first: str | None) -> None:
        self.only = only
        self.first = first

    @classmethod
    def parse(cls, value: object, current: str | None, *, bound: bool = False) -> ProjectScope:
        if value is None:
            return cls(current, None) if bound else cls(None, current)
        if not isinstance(value, str):
            raise InvalidArgument(f"project must be a name, '*' or empty, got {value!r}")
        name = value.strip()
        if name == CURRENT_PROJECT:
            return cls(current, None)
        return cls(None, None) if name in ALL_PROJECTS else cls(name, None)

    def __repr__(self) -> str:
        return f"ProjectScope(only={self.only!r}, first={self.first!r})"


def checked_query(query: str | None) -> str | None:
    """A search query within `QUERY_CHARS`, else InvalidArgument (HTTP 400, an MCP error, exit 2):
    the one check every search and recall passes, whatever surface it came from."""
    if query is not None and len(query) > QUERY_CHARS:
        raise InvalidArgument(f"the query is {len(query):,} characters; the limit is {QUERY_CHARS}")
    return query
