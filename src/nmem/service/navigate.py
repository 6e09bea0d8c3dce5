"""Navigation: records by id or URN, the timeline around one, a session's trace, a file's
history, sessions by prefix, and the recorded file a relative path names."""

from __future__ import annotations

import os
import time

from nmem.capture.events import CLAUDE_CODE
from nmem.capture.project import git_toplevel
from nmem.errors import Ambiguous, InvalidArgument, NotFound
from nmem.models import (
    SESSION_REF_CHARS,
    Memory,
    Observation,
    Prompt,
    Session,
    is_urn,
    preview,
    prompt_ref,
    role_fields,
    session_ref,
)
from nmem.refs import MEMORY, OBSERVATION, PROMPT, SESSION, Ref, parse_ref
from nmem.service.args import MAX_IDS, MAX_LIMIT, agents
from nmem.service.base import Base
from nmem.service.relpaths import Roots, preview_of, relative, relative_summary
from nmem.store import SearchFilters
from nmem.util.numbers import as_int, clamp
from nmem.util.timeutil import parse_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

CANDIDATES_SHOWN = 10   # sessions or paths an ambiguous prefix or suffix lists
PATH_CANDIDATES = 200   # recorded paths a suffix is checked against
AnyRecord = Observation | Prompt | Session | Memory


class Navigate(Base):
    def get(self, refs: Sequence[str]) -> tuple[list[AnyRecord], list[str]]:
        """The records ids and URNs name, in the order asked, and the ids that name nothing."""
        if isinstance(refs, (str, bytes)):
            raise InvalidArgument("refs must be a list of ids, not a string")
        if not refs:
            raise InvalidArgument("give at least one id")
        if len(refs) > MAX_LIMIT:
            raise InvalidArgument(f"at most {MAX_LIMIT} ids per request (got {len(refs)})")
        resolved: list[tuple[str, Ref | None]] = []
        for asked in refs:
            try:
                resolved.append((str(asked), self.resolve(str(asked))))
            except NotFound:
                resolved.append((str(asked), None))
        wanted = [r for _, r in resolved if r is not None]
        trail: dict[tuple[str, int | str], AnyRecord] = {}
        for obs in self.store.get_observations([int(r.key) for r in wanted if r.kind == OBSERVATION]):
            trail[OBSERVATION, obs.id] = obs
        for prompt in self.store.get_prompts([int(r.key) for r in wanted if r.kind == PROMPT]):
            trail[PROMPT, prompt.id] = prompt
        records: list[AnyRecord] = []
        missing: list[str] = []
        for text, ref in resolved:
            record: AnyRecord | None = None
            if ref is None:
                pass
            elif ref.kind == MEMORY:
                try:
                    record = self.api.get_memory(str(ref.key))
                except NotFound:
                    record = None
            elif ref.kind == SESSION:
                record = self.store.get_session(str(ref.key))
            else:
                record = trail.get((ref.kind, ref.key))
            if record is not None and ref is not None and ref.project is not None \
                    and getattr(record, "project", None) != ref.project:
                record = None  # a URN naming another project's record
            if record is None:
                missing.append(text)
            else:
                records.append(record)
        self.touch([str(r.id) for r in records if isinstance(r, Memory)])
        return records, missing

    def get_observations(self, ids: Sequence[Any]) -> list[Observation]:
        if isinstance(ids, (str, bytes)):
            raise InvalidArgument("ids must be a list of observation ids, not a string")
        if ids is None or len(ids) == 0:
            raise InvalidArgument("ids array must not be empty")
        if len(ids) > MAX_IDS:
            raise InvalidArgument(f"at most {MAX_IDS} ids per request (got {len(ids)})")
        return self.store.get_observations([as_int(i, "id") for i in ids])

    def timeline(self, anchor: Any = None, *, query: str | None = None, before: int | None = 5,
                 after: int | None = 5, project: str | None = None, prefer_project: str | None = None,
                 agent: Any = None, obs_type: Any = None, tags: Any = None, files: Any = None,
                 date_start: Any = None, date_end: Any = None, cwd: str | None = None) -> dict[str, Any]:
        """Observations around an anchor in its session (anchor by id, or the best match of a
        query). The filters `search` takes (types, tags, files, date bounds, `agent`) narrow the
        anchor's search and the neighbours: the nearest that pass, not the nearest overall. An
        anchor given by id is shown whatever they say, but a session `agent` did not run is
        NotFound. Tags belong to curated memories only, so with them no observation passes.
        The result names the session's agent."""
        if anchor is None and not (query and query.strip()):
            raise InvalidArgument("timeline needs an anchor id or a query")
        filters = self.api._filters(project=project, obs_type=obs_type, tags=tags, files=files,
                                    date_start=date_start, date_end=date_end, agent=agent, cwd=cwd)
        if anchor is None:
            found = self.api._found("observations", query, filters, "relevance", 1, 0, prefer_project=prefer_project)
            if not found.hits:
                narrowed = filters.replace(project=None, agents=()) != SearchFilters()
                raise NotFound(f"no observation matches {query!r}" + (" with those filters" if narrowed else ""))
            anchor_obs = found.hits[0].record
            assert isinstance(anchor_obs, Observation)
        else:
            rows = self.store.get_observations([as_int(anchor, "anchor")])
            if not rows:
                raise NotFound("anchor observation not found")
            anchor_obs = rows[0]
        session = self.store.get_session(anchor_obs.session_id)
        ran = session.agent if session else None
        if filters.agents and (ran or CLAUDE_CODE) not in filters.agents:
            raise NotFound(f"observation {anchor_obs.id} was recorded by {ran or CLAUDE_CODE}, "
                           f"not {', '.join(filters.agents)}")
        b = clamp(before, 0, MAX_LIMIT, 5, "before")
        a = clamp(after, 0, MAX_LIMIT, 5, "after")
        # The neighbours share the anchor's session, so its project: one given by id shows its own.
        prev, nxt = self.store.neighbours(anchor_obs, b, a, filters.replace(project=None))
        roots = Roots(self.store, [o.session_id for o in (anchor_obs, *prev, *nxt)])
        return {
            "agent": ran,
            "anchor": roots.apply(anchor_obs.to_dict()),
            "before": [roots.apply(o.to_dict()) for o in prev],
            "after": [roots.apply(o.to_dict()) for o in nxt],
        }

    def session_trace(self, session_id: str | None = None, *, before: Any = None, after: Any = None,
                      project: str | None = None, agent: Any = None) -> dict[str, Any]:
        """A session's prompts in order, each with the observations it led to. The session is
        named by id, unique prefix or URN; without one, the latest of `project` (or of all) with
        content, not one that has only started, and that `agent` (one name or a list) ran, if given.
        The trace names the session's agent."""
        wanted = agents(agent)
        session = self.session(session_id) if session_id else self.latest_session(project, agent=wanted)
        if wanted and (session.agent or CLAUDE_CODE) not in wanted:
            raise NotFound(f"session {session.ref} was run by {session.agent or CLAUDE_CODE}, "
                           f"not {', '.join(wanted)}")
        session_id = session.id
        b = parse_time(before, name="before")
        a = parse_time(after, name="after")
        prompts = self.store.session_prompts(session_id, b, a)
        observations = self.store.session_observations(session_id, b, a)
        root = Roots(self.store, [session_id]).of(session_id, session.project)
        by_prompt: dict[int | None, list[dict[str, Any]]] = {}
        for obs in observations:
            by_prompt.setdefault(obs.prompt_id, []).append(relative_row({
                "id": obs.id, "timestamp": obs.timestamp, "obs_type": obs.obs_type,
                "file_path": obs.file_path, "content_preview": preview_of(obs, root),
                "is_pinned": obs.is_pinned, **({"subagent": by} if (by := obs.subagent) is not None else {}),
            }, root))
        entries: list[dict[str, Any]] = []
        orphans = by_prompt.pop(None, [])
        if orphans:
            entries.append({"prompt_id": None, "ref": None, "timestamp": orphans[0]["timestamp"], "source": "system",
                            "role": "system", "label": "system", "content": "session events",
                            "observation_count": len(orphans),
                            "observations": orphans})
        known = {p.id for p in prompts}
        for prompt in prompts:
            obs_list = by_prompt.get(prompt.id, [])
            entries.append({"prompt_id": prompt.id, "ref": prompt.ref, "timestamp": prompt.timestamp,
                            "source": prompt.source, **role_fields(prompt.source), "content": prompt.content,
                            "observation_count": len(obs_list), "observations": obs_list})
        # Observations whose prompt lies outside the window still belong to the trace.
        for pid, obs_list in by_prompt.items():
            if pid not in known:
                entries.append({"prompt_id": pid, "ref": prompt_ref(pid) if pid is not None else None,
                                "timestamp": obs_list[0]["timestamp"],
                                "source": "system", "role": "system", "label": "system",
                                "content": "(prompt outside the window)",
                                "observation_count": len(obs_list), "observations": obs_list})
        entries.sort(key=lambda e: (e["timestamp"], e["prompt_id"] or 0))
        return {
            "session_id": session.id, "ref": session.ref, "project": session.project, "urn": session.urn,
            "root": root, "agent": session.agent, "started_at": session.started_at, "ended_at": session.ended_at,
            "signature": session.signature, "summary": relative_summary(session.summary, root), "prompts": entries,
        }

    def file_history(self, file_path: str, *, before: Any = None, after: Any = None,
                     limit: int | None = 10, cwd: str | None = None) -> dict[str, Any]:
        """Every session that touched a file, newest first, with the intent behind each touch.
        A relative path is read as `resolve_file` reads it."""
        if not file_path:
            raise InvalidArgument("file_path is required")
        path = self.resolve_file(file_path, cwd=cwd)
        lim = clamp(limit, 1, MAX_IDS, 10, "limit")
        touches = self.store.file_touches(path, parse_time(before, name="before"),
                                          parse_time(after, name="after"), lim)
        sessions: dict[str, dict[str, Any]] = {}
        roots = Roots(self.store, [obs.session_id for obs, _ in touches])
        for obs, prompt_content in touches:
            entry = sessions.get(obs.session_id)
            if entry is None:
                session = self.store.get_session(obs.session_id)
                summary = session.summary if session else None
                entry = sessions[obs.session_id] = {
                    "session_id": obs.session_id, "ref": session_ref(obs.session_id), "project": obs.project,
                    "rel_path": relative(path, roots.of(obs.session_id, obs.project)),
                    "started_at": session.started_at if session else None,
                    "summary_intent": summary.get("intent") if isinstance(summary, dict) else None,
                    "touches": [],
                }
            entry["touches"].append({
                "observation_id": obs.id, "timestamp": obs.timestamp, "obs_type": obs.obs_type,
                "content_preview": preview_of(obs, roots.of(obs.session_id, obs.project)),
                "prompt_content": prompt_content,
                "is_pinned": obs.is_pinned, "urn": obs.urn,
            })
        return {"file_path": path, "sessions": list(sessions.values())}

    def resolve(self, ref: str) -> Ref:
        """What an id or URN nmem printed names (`nmem.refs`): its kind and key, a session's
        whole id found from its prefix. A session that is not there is NotFound, a prefix
        several sessions share Ambiguous; other kinds are checked when read (`get`)."""
        parsed = parse_ref(ref)
        if parsed.kind != SESSION:
            return parsed
        key = str(parsed.key)
        if parsed.prefix:  # s1a2b3c4d: session 1a2b3c4d…, or a whole id that starts with an s
            found = self._find_session(parsed.text, [key, parsed.text], [key], None)
        else:
            found = self._find_session(parsed.text, [key], [], parsed.project)
        return parsed.resolved(found.id)

    def session(self, ref: str | None) -> Session:
        """A session by whole id, unique prefix of it (with or without the `s` nmem shows) or URN."""
        text = (ref or "").strip()
        if not text:
            raise InvalidArgument("a session id is required")
        if is_urn(text):
            parsed = parse_ref(text)
            if parsed.kind != SESSION:
                raise InvalidArgument(f"{text} names {parsed.kind} {parsed.key}, not a session")
            return self._find_session(text, [str(parsed.key)], [], parsed.project)
        forms = [text, text[1:]] if text[0] in "sS" and len(text) > 1 else [text]
        return self._find_session(text, forms, forms, None)

    def _find_session(self, text: str, whole: Sequence[str], prefixes: Sequence[str],
                      project: str | None) -> Session:
        """The first session whose id is one of `whole` (a whole id wins over a prefix), else
        the only one whose id starts with one of `prefixes`, of `project` if given."""
        store = self.store
        found = next(([s] for s in map(store.get_session, whole) if s is not None), [])
        if not found:
            candidates: dict[str, Session] = {}
            for prefix in prefixes:
                for session in store.sessions_by_prefix(prefix, CANDIDATES_SHOWN + 1):
                    candidates.setdefault(session.id, session)
            found = list(candidates.values())
        if project is not None:
            found = [s for s in found if s.project == project]
        if not found:
            raise NotFound(f"session not found: {text}")
        if len(found) > 1:
            # each as `s` + as much of its id as tells it from the others (at least what tables show)
            size = max(SESSION_REF_CHARS, _shared_length([s.id for s in found]) + 1)
            shown = ", ".join(f"s{s.id[:size]} ({s.project}, {_local_time(s.started_at)})"
                              for s in found[:CANDIDATES_SHOWN])
            more = " and more" if len(found) > CANDIDATES_SHOWN else ""
            raise Ambiguous(f"session {text} is ambiguous: it starts {shown}{more}; give more of the id")
        return found[0]

    def latest_session(self, project: str | None = None, *, agent: Any = None) -> Session:
        """The session of `project` (of any, if None) that started last and has content (a prompt
        or an action; not the one whose SessionStart was just recorded), of `agent`'s if given."""
        rows = self.store.list_sessions(project or None, None, 1, active=True, agents=agents(agent))
        if not rows:
            raise NotFound(f"no session recorded for project {project}" if project else "no session recorded")
        return rows[0].session

    def sessions(self, project: str | None = None, *, since: Any = None,
                 limit: int | None = 20, agent: Any = None) -> list[dict[str, Any]]:
        """Sessions newest first (of `project`, or of all; of `agent`'s, if given), each with
        its agent, counts and intent."""
        lim = clamp(as_int(limit, "limit") if limit is not None else None, 1, MAX_LIMIT, 20)
        wanted = agents(agent)
        rows = self.store.list_sessions(project or None, parse_time(since, name="since"), lim, agents=wanted)
        out = []
        for row in rows:
            session = row.session
            ended = session.ended_at
            out.append({
                "id": session.id, "ref": session.ref, "project": session.project, "agent": session.agent,
                "started_at": session.started_at, "ended_at": ended,
                "duration": ended - session.started_at if ended is not None else None,
                "prompts": row.prompts, "actions": row.actions,
                "intent": preview(session.intent or row.first_prompt or ""), "urn": session.urn,
            })
        return out

    def resolve_file(self, path: str, *, cwd: str | None = None, project: str | None = None) -> str:
        """The recorded file a path names. An absolute path is itself. A relative one is read
        from the project root (the git top-level of `cwd`, not the subdirectory), else as the
        end of a recorded path (`invoice.py` finds `/repo/billing/invoice.py`): one under the
        project root wins, else the only one anywhere; several are Ambiguous, listed. When no
        recorded path fits, the root-relative path (which matches nothing yet)."""
        text = (path or "").strip()
        if not text:
            raise InvalidArgument("a file path is required")
        if os.path.isabs(text):
            return os.path.normpath(text)
        base = os.path.abspath(cwd or os.getcwd())
        root = git_toplevel(base) or base
        joined = os.path.normpath(os.path.join(root, text))
        suffix = os.path.normpath(text)
        store = self.store
        if store.recorded_paths(joined, project, 1) or suffix.startswith(".."):
            return joined
        found = store.recorded_paths(suffix, project, PATH_CANDIDATES)
        candidates = [p for p in found if p.startswith(root.rstrip(os.sep) + os.sep)] or found
        if not candidates:
            return joined
        if len(candidates) > 1:
            shown = ", ".join(candidates[:CANDIDATES_SHOWN])
            more = f" and {len(candidates) - CANDIDATES_SHOWN} more" if len(candidates) > CANDIDATES_SHOWN else ""
            raise Ambiguous(f"{text} is ambiguous: it ends {len(candidates)} recorded paths: {shown}{more}; "
                            "give more of the path")
        return candidates[0]


def relative_row(row: dict[str, Any], root: str | None) -> dict[str, Any]:
    """A trace's observation row with `rel_path` (see `relpaths`)."""
    if row.get("file_path"):
        row["rel_path"] = relative(row["file_path"], root)
    return row


def _local_time(ts: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _shared_length(texts: Sequence[str]) -> int:
    """How many leading characters all the texts share."""
    first, last = min(texts), max(texts)
    size = 0
    while size < min(len(first), len(last)) and first[size] == last[size]:
        size += 1
    return size
