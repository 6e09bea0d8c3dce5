"""subcog's hook output (access interface layer §5.3), printed when `hooks.profile = "subcog"`.

Every event prints one JSON object, `{"additionalContext": <XML>, "suppressSystemPrompt": bool}`:

- SessionStart: `<memory_context>` with the project, its git branch, the curated memories the
  context block shows as `<resource uri relevance>`, and nmem's own context block as `<activity>`;
- UserPromptSubmit: `<capture_detected>`, one `<signal>` per prompt marker, offered for the agent to
  confirm (nothing is stored as a memory: the prompt itself is kept in the trail as always);
- PostToolUse: `<related_memories>` for the file the tool touched (with `context.file_memories`);
- PreCompact: `<auto_captured>`, the checkpoint memory and how many key decisions were saved with it;
- Stop and every other event: empty context, and `suppressSystemPrompt` true for Stop as subcog's.

Standard library only: this runs on the hook path.
"""

from __future__ import annotations

from nmem import jsonlite
from nmem.capture import events as ev
from nmem.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from nmem.capture.markers import MarkedMemory
    from nmem.capture.recorder import RecordOutcome
    from nmem.config import Settings
    from nmem.models import Memory
    from nmem.service.core import CaptureService

PROFILES = ("nmem", "subcog")
SESSION_MEMORIES = 10   # subcog's `with_recent_memories(10)`
SUMMARY_CHARS = 100


def wanted(settings: Settings) -> bool:
    """Whether hooks print subcog's shape; an unknown `hooks.profile` is a configuration error."""
    profile = str(settings["hooks.profile"]).strip().lower()
    if profile not in PROFILES:
        raise ConfigError(f"hooks.profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    return profile == "subcog"


def dumps(context: str = "", *, suppress: bool = False) -> str:
    return jsonlite.dumps({"additionalContext": context, "suppressSystemPrompt": suppress}) + "\n"


def empty(event_name: str) -> str:
    """What an event with nothing to say prints: subcog's Stop suppresses the system prompt."""
    return dumps(suppress=event_name == "Stop")


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _clip(text: str, size: int = SUMMARY_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= size else line[:size - 1].rstrip() + "…"


def _memory_lines(tag: str, memory: Memory, relevance: float | None, indent: str = "  ") -> list[str]:
    score = f' relevance="{relevance:.2f}"' if relevance is not None else ""
    return [f'{indent}<{tag} uri="{_esc(memory.urn)}"{score}>',
            f"{indent}  <summary>{_esc(_clip(memory.summary))}</summary>",
            f"{indent}</{tag}>"]


def session_start(service: CaptureService, project: str, branch: str | None, block: str) -> str:
    """`<memory_context>`: the project's curated memories as resources, nmem's context block after."""
    from nmem.context.block import ranked_memories  # only SessionStart renders

    lines = ["<memory_context>", f"  <project>{_esc(project)}</project>"]
    if branch:
        lines.append(f"  <branch>{_esc(branch)}</branch>")
    chosen = ranked_memories(service.store, project, SESSION_MEMORIES)
    if chosen:
        lines.append("  <resources>")
        for memory, value in chosen:
            lines.extend(_memory_lines("resource", memory, value, "    "))
        lines.append("  </resources>")
    if block:
        lines.append(f"  <activity>{_esc(block)}</activity>")
    lines.append("</memory_context>")
    return dumps("\n".join(lines))


def _split_reason(text: str) -> tuple[str, str | None]:
    """subcog's signal: the summary, and the reason a `because` gives."""
    at = text.lower().find(" because ")
    if at <= 0:
        return text, None
    reason = text[at + len(" because "):].strip().removeprefix("of ").strip()
    return text[:at].strip(" ,;"), reason or None


def capture_detected(suggested: Sequence[MarkedMemory]) -> str:
    if not suggested:
        return empty("UserPromptSubmit")
    lines = ["<capture_detected>"]
    for marked in suggested:
        kind = marked.marker.strip("[]#:").strip() or marked.namespace
        summary, reason = _split_reason(marked.content)
        lines.append(f'  <signal type="{_esc(kind)}" namespace="{_esc(marked.namespace)}">')
        lines.append(f"    <summary>{_esc(_clip(summary))}</summary>")
        if reason:
            lines.append(f"    <reason>{_esc(_clip(reason))}</reason>")
        lines.append(f"    <action>Confirm to capture this {_esc(kind)} (memory.capture, or nmem capture "
                     f"{_esc(marked.namespace)} &quot;...&quot;)</action>")
        lines.append("  </signal>")
    lines.append("</capture_detected>")
    return dumps("\n".join(lines))


def related_memories(found: Sequence[tuple[Memory, float]]) -> str:
    """`<related_memories>`; relevance is each hit's BM25 score relative to the best one."""
    if not found:
        return empty("PostToolUse")
    best = max(abs(score) for _, score in found) or 1.0
    lines = ["<related_memories>"]
    for memory, score in found:
        lines.extend(_memory_lines("memory", memory, abs(score) / best))
    lines.append("</related_memories>")
    return dumps("\n".join(lines))


def auto_captured(memories: Sequence[Memory]) -> str:
    """`<auto_captured>`: the checkpoint, and how many key decisions were saved beside it."""
    if not memories:
        return empty("PreCompact")
    checkpoint, decisions = memories[0], memories[1:]
    saved = f"{len(decisions)} decision{'' if len(decisions) == 1 else 's'} auto-saved before context compaction"
    lines = ["<auto_captured>", f'  <memory uri="{_esc(checkpoint.urn)}">',
             f"    <summary>{_esc(_clip(checkpoint.summary))}</summary>",
             f"    <captured>{saved}</captured>", "  </memory>"]
    for decision in decisions:
        lines.extend(_memory_lines("memory", decision, None))
    lines.append("</auto_captured>")
    return dumps("\n".join(lines))


def for_event(service: CaptureService, event: ev.HookEvent, outcome: RecordOutcome) -> str:
    """What a stored event prints in subcog's shape (SessionStart is `session_start`)."""
    if event.kind == ev.PROMPT:
        return capture_detected(outcome.suggested)
    if event.kind == ev.PRE_COMPACT:
        return auto_captured(outcome.memories)
    if event.kind == ev.TOOL and outcome.file_path and service.settings["context.file_memories"]:
        from nmem.context.block import file_memory_hits  # opt-in, as for Claude Code's shape

        return related_memories(file_memory_hits(service, outcome.project, event.session_id, outcome.file_path))
    return empty(event.hook_event_name)
