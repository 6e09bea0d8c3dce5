"""Backfill from Gemini CLI's chat files, as if its hooks had seen them.

Where they are (google-gemini/gemini-cli, packages/core/src/services/chatRecordingService.ts,
chatRecordingTypes.ts, config/storage.ts, config/projectRegistry.ts):
- `~/.gemini/tmp/<project>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl`: JSON Lines. The first
  line is the metadata (`sessionId`, `projectHash`, `startTime`, `kind`, `directories`); then
  message records (`id`, `timestamp`, `type`, `content`, ...) appended whole each time they change
  (a message that gains tool calls is written again with the same id: the last one counts, in
  the place of the first); `{"$set": {...}}` updates the metadata (a `messages` list there
  replaces them all); `{"$rewindTo": id}` drops that message and the ones after it.
- `session-<...>.json` (older versions): one JSON object, the whole `ConversationRecord`.
- `chats/<parent session id>/<session id>.jsonl`: a subagent's chat, recorded under its parent.
Messages: `user` (`content`, and `displayContent`: what was typed, when the content was expanded),
`gemini` (`content` the reply, `thoughts` [{subject, description, timestamp}], `toolCalls`
[{id, name, args, result (functionResponse parts), status, timestamp}]), and `info`/`error`/
`warning` (the CLI's own notes, not recorded).

The project a chat belongs to is not in the file, only `projectHash` (sha256 of the project
directory in older versions) and the folder it sits in (a short name since the project
registry). It is taken from, in order: `--project` (trusted for every file given); the
folder's `.project_root` marker; `~/.gemini/projects.json` (`projects`: directory → short
name); a directory named in the file (or `--project`) whose sha256 is the `projectHash`.
A chat whose project none of these gives is left out and reported, never guessed.

Tool calls go through Gemini's hook adapter (`nmem.capture.gemini`) and so through the same
extractors as the hooks'; a call is recorded once it has finished (success, error, cancelled).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from nmem import jsonlite
from nmem.capture import agents
from nmem.capture import events as ev
from nmem.capture.gemini import AGENT
from nmem.capture.transcript import REASONING_CHARS, _epoch
from nmem.errors import InvalidArgument
from nmem.portable.limits import InputLimits, Skipped, decode, json_document, json_line, read_file
from nmem.portable.sources.snapshots import SessionRead

FINISHED = frozenset({"success", "error", "cancelled"})


def default_root(home: Path | None = None) -> Path:
    return (home or Path.home()) / ".gemini" / "tmp"


def find_chats(root: Path) -> list[Path]:
    """Chat files under `~/.gemini/tmp` (or one project's folder, or its chats/), or one file;
    the main sessions first, then the subagents' (recorded under their parent)."""
    if root.is_file():
        return [root]
    if not root.is_dir():
        return []
    mains = sorted(p for p in root.rglob("session-*.json*") if p.suffix in (".json", ".jsonl"))
    subagents = sorted(p for p in root.rglob("*.jsonl") if p.parent.parent.name == "chats" and p not in mains)
    return mains + subagents


def project_hash(directory: str) -> str:
    return hashlib.sha256(directory.encode("utf-8")).hexdigest()


class ProjectMap:
    """Which directory a chats folder stands for (see the module's docstring)."""

    def __init__(self, project: str | None = None) -> None:
        self.project = project
        self._registries: dict[Path, dict[str, str]] = {}

    def _registry(self, gemini_home: Path) -> dict[str, str]:
        if gemini_home not in self._registries:
            names: dict[str, str] = {}
            try:
                data = json.loads((gemini_home / "projects.json").read_text(encoding="utf-8"))
                projects = data.get("projects") if isinstance(data, dict) else None
                if isinstance(projects, dict):
                    names = {v: k for k, v in projects.items() if isinstance(k, str) and isinstance(v, str)}
            except (OSError, ValueError):
                pass
            self._registries[gemini_home] = names
        return self._registries[gemini_home]

    def cwd(self, chat: Path, meta: dict[str, Any]) -> str | None:
        if self.project:
            return self.project
        chats = next((p for p in chat.parents if p.name == "chats"), None)
        folder = chats.parent if chats is not None else None
        if folder is not None:
            marker = folder / ".project_root"
            if marker.is_file():
                try:
                    owner = marker.read_text(encoding="utf-8").strip()
                except OSError:
                    owner = ""
                if owner:
                    return owner
            by_name = self._registry(folder.parent.parent)   # ~/.gemini/tmp/<name> → ~/.gemini
            if folder.name in by_name:
                return by_name[folder.name]
            wanted = meta.get("projectHash")
            for directory in by_name.values():
                if project_hash(directory) == wanted:
                    return directory
        wanted = meta.get("projectHash")
        dirs = meta.get("directories")
        for directory in dirs if isinstance(dirs, list) else []:
            if isinstance(directory, str) and project_hash(directory) == wanted:
                return directory
        return None


def read_chat(path: Path, limits: InputLimits) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """(metadata, messages in order, what was skipped) of one chat file, either form."""
    text = decode(read_file(str(path), limits), str(path))
    if path.suffix == ".json":
        data = json_document(text, limits)
        if not isinstance(data, dict) or not isinstance(data.get("sessionId"), str):
            raise InvalidArgument("not a Gemini CLI chat file (no sessionId)")
        listed = data.get("messages")
        return data, [m for m in listed if isinstance(m, dict)] if isinstance(listed, list) else [], []
    meta: dict[str, Any] = {}
    messages: dict[str, dict[str, Any]] = {}
    skipped: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json_line(line, limits)
        except ValueError:
            skipped.append(f"line {number}: not JSON; skipped")
            continue
        if isinstance(record, Skipped):
            skipped.append(f"line {number}: {record.reason}; skipped")
            continue
        if not isinstance(record, dict):
            skipped.append(f"line {number}: not a record; skipped")
        elif isinstance(record.get("$rewindTo"), str):
            ids = list(messages)
            cut = ids.index(record["$rewindTo"]) if record["$rewindTo"] in ids else 0
            for dropped in ids[cut:]:
                del messages[dropped]
        elif isinstance(record.get("$set"), dict):
            update = record["$set"]
            if isinstance(update.get("messages"), list):
                messages = {m["id"]: m for m in update["messages"]
                        if isinstance(m, dict) and isinstance(m.get("id"), str)}
            meta.update({k: v for k, v in update.items() if k != "messages"})
        elif isinstance(record.get("id"), str):
            messages[record["id"]] = record
        elif isinstance(record.get("sessionId"), str):
            meta.update(record)
    return meta, list(messages.values()), skipped


def _text(content: Any) -> str:
    """The text of a PartListUnion: a string, a part, or a list of them (function calls and
    responses are the tool calls' own; thought parts are in `thoughts`)."""
    if isinstance(content, str):
        return content.strip()
    parts = content if isinstance(content, list) else [content]
    return "\n".join(str(p["text"]) for p in parts
                     if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")).strip()


def _result(result: Any) -> tuple[str, str | None]:
    """(the text the model saw, an error) from a tool call's functionResponse parts."""
    parts = result if isinstance(result, list) else [result] if result is not None else []
    texts: list[str] = []
    error: str | None = None
    for part in parts:
        if not isinstance(part, dict):
            continue
        response = part.get("functionResponse")
        if isinstance(response, dict):
            body = response.get("response")
            if isinstance(body, dict):
                if isinstance(body.get("error"), str):
                    error = body["error"]
                out = body.get("output", body.get("error"))
                texts.append(out if isinstance(out, str) else jsonlite.dumps(body))
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "\n".join(texts), error


def chat_sessions(path: Path, limits: InputLimits, projects: ProjectMap) -> list[SessionRead]:
    meta, messages, skipped = read_chat(path, limits)
    own_id = meta.get("sessionId")
    if not isinstance(own_id, str) or not own_id:
        raise InvalidArgument("not a Gemini CLI chat file (no sessionId)")
    cwd = projects.cwd(path, meta)
    if cwd is None:
        raise InvalidArgument("its project directory is not known (no .project_root beside chats/, not in "
                              "~/.gemini/projects.json, no directory matching its projectHash): give it with --project")
    subagent = meta.get("kind") == "subagent" or (path.parent.name != "chats" and path.parent.parent.name == "chats")
    session_id = path.parent.name if subagent and path.parent.name != "chats" else own_id
    agent_id = own_id if session_id != own_id else None
    read = SessionRead(session_id=session_id, cwd=cwd, where=str(path), skipped=skipped, final=agent_id is None)
    base: dict[str, Any] = {"session_id": session_id, "cwd": cwd}
    ts = _epoch(meta.get("startTime"), 0)
    for message in messages:
        mid = str(message["id"])
        ts = _epoch(message.get("timestamp"), ts)
        kind = message.get("type")
        if kind == "user":
            typed = _text(message.get("displayContent")) or _text(message.get("content"))
            if typed:
                event = agents.parse({**base, "hook_event_name": "BeforeAgent", "prompt": typed}, AGENT, now=ts)
                read.add(mid, _as_sub(event, agent_id))
        elif kind == "gemini":
            thoughts = message.get("thoughts")
            for i, thought in enumerate(thoughts if isinstance(thoughts, list) else []):
                if not isinstance(thought, dict):
                    continue
                said = ": ".join(str(thought[k]).strip() for k in ("subject", "description")
                                 if isinstance(thought.get(k), str) and thought[k].strip())
                if said:
                    read.add(f"{mid}:thought:{i}", _as_sub(ev.HookEvent(
                        kind=ev.REASONING, hook_event_name="Transcript", assistant_message=said[:REASONING_CHARS],
                        timestamp=_epoch(thought.get("timestamp"), ts), agent=AGENT, **base), agent_id))
            calls = message.get("toolCalls")
            for call in calls if isinstance(calls, list) else []:
                if isinstance(call, dict) and call.get("status") in FINISHED and isinstance(call.get("id"), str):
                    read.add(f"tool:{call['id']}", _as_sub(_tool_event(call, base, ts), agent_id))
            reply = _text(message.get("content"))
            if reply:
                read.add(f"{mid}:text", _as_sub(ev.HookEvent(
                    kind=ev.REPLY, hook_event_name="Transcript", assistant_message=reply, timestamp=ts,
                    agent=AGENT, **base), agent_id))
    return [read]


def _tool_event(call: dict[str, Any], base: dict[str, Any], ts: int) -> ev.HookEvent:
    output, error = _result(call.get("result"))
    if call.get("status") == "error" and error is None:
        error = output or "failed"
    if call.get("status") == "cancelled" and error is None:
        error = "cancelled"
    response: dict[str, Any] = {"llmContent": output, "returnDisplay": output}
    if error is not None:
        response["error"] = error
    args = call.get("args")
    return agents.parse({**base, "hook_event_name": "AfterTool", "tool_name": str(call.get("name") or ""),
                         "tool_input": args if isinstance(args, dict) else {}, "tool_response": response},
                        AGENT, now=_epoch(call.get("timestamp"), ts))


def _as_sub(event: ev.HookEvent, agent_id: str | None) -> ev.HookEvent:
    event.agent_id = agent_id
    return event


def reader(limits: InputLimits, project: str | None = None) -> Any:
    projects = ProjectMap(os.path.abspath(project) if project else None)
    return lambda source: chat_sessions(Path(source), limits, projects)
