"""What an id people see names: the syntax of the ids nmem prints (`nmem.models` writes them).

  42, o42, #42    an observation         p42        a prompt
  s1a2b3c4d       a session, by its id or a unique prefix of it
  01J…  (ULID)    a memory               nmem://…   any record, by its URN

Syntax only: `nmem.service.api.Service.resolve` looks sessions up and says what exists.
"""

from __future__ import annotations

from nmem.errors import InvalidArgument
from nmem.models import Record, is_urn, urn_parts
from nmem.util.numbers import as_int

OBSERVATION, PROMPT, SESSION, MEMORY = "observation", "prompt", "session", "memory"
TRAIL_KINDS = {"observations": OBSERVATION, "prompts": PROMPT, "sessions": SESSION}
_ULID_CHARS = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")  # Crockford's base 32


def _is_number(text: str) -> bool:  # ASCII digits only (str.isdigit also takes "²" and "٣")
    return text.isascii() and text.isdigit()


def _is_ulid(text: str) -> bool:
    return len(text) == 26 and _ULID_CHARS.issuperset(text)


class Ref(Record):
    """A parsed id: its kind and key (an observation or prompt id, a session id or prefix,
    a memory id or URN), the text as given, and for a trail URN the project it names."""

    kind: str
    key: int | str
    text: str
    project: str | None = None
    prefix: bool = False   # a session key that may be the start of an id (the `s…` form)

    def resolved(self, key: int | str) -> Ref:
        return self.replace(key=key, prefix=False)


def parse_ref(text: str) -> Ref:
    """The kind and key an id names. Text in no known form is taken as a whole session id
    (what `--format json` prints), so it is never read as another kind of record."""
    ref = (text or "").strip()
    if not ref:
        raise InvalidArgument("an id is required (42, p42, s1a2b3c4d, a memory id or a URN)")
    if _is_number(ref):
        return Ref(OBSERVATION, as_int(ref, "id"), ref)
    head, rest = ref[0].lower(), ref[1:]
    if head in "o#p" and _is_number(rest):
        return Ref(PROMPT if head == "p" else OBSERVATION, as_int(rest, "id"), ref)
    if is_urn(ref):
        return _parse_urn(ref)
    if _is_ulid(ref.upper()):
        return Ref(MEMORY, ref.upper(), ref)
    if head == "s" and rest:
        return Ref(SESSION, rest, ref, prefix=True)
    return Ref(SESSION, ref, ref)


def _parse_urn(ref: str) -> Ref:
    parts = urn_parts(ref)
    if parts is None or len(parts) != 3:
        raise InvalidArgument(f"{ref} names no single record: a record's URN has a domain, a kind and an id")
    domain, namespace, key = parts
    kind = TRAIL_KINDS.get(namespace) if domain.startswith("project:") else None
    if kind is None:
        return Ref(MEMORY, ref, ref)
    project = domain.removeprefix("project:")
    if kind == SESSION:
        return Ref(SESSION, key, ref, project)
    if not _is_number(key):
        raise InvalidArgument(f"{ref}: {namespace} are numbered")
    return Ref(kind, as_int(key, "id"), ref, project)
