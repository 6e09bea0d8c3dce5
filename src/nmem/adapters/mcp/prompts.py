"""MCP prompts: reusable instructions a client can offer its user (no SDK here)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class PromptArg:
    name: str
    description: str
    required: bool = True


@dataclass(frozen=True)
class PromptSpec:
    name: str
    title: str
    description: str
    arguments: tuple[PromptArg, ...]
    render: Callable[[dict[str, str]], str]


def _capture_decision(args: dict[str, str]) -> str:
    context = args.get("context") or "(no extra context given)"
    return (
        f"Record this decision in nmem with the `remember` tool, namespace `decisions`.\n\n"
        f"Decision: {args['summary']}\nContext: {context}\n\n"
        "Write the content as short markdown: the decision, why it was made, the alternatives "
        "considered and what would make us revisit it. Use a summary of at most 100 characters "
        "and add 2-4 tags. Reply with the URN nmem returns."
    )


def _recall_context(args: dict[str, str]) -> str:
    topic = args["topic"]
    return (
        f"Before working on \"{topic}\", gather what nmem remembers about it:\n"
        f"1. `recall` with query \"{topic}\" for decisions, gotchas and conventions;\n"
        f"2. `search` with query \"{topic}\" (scope all) for past sessions, commands and errors;\n"
        "3. `get_observations` or `session_trace` for the few results that matter.\n"
        "Summarise what applies in a few bullets, citing URNs, and flag anything that looks outdated."
    )


PROMPTS: tuple[PromptSpec, ...] = (
    PromptSpec("capture-decision", "Capture a decision",
               "Turn a decision into a well-formed memory in the decisions namespace.",
               (PromptArg("summary", "The decision in one line."),
                PromptArg("context", "Why it was made, alternatives, constraints.", required=False)),
               _capture_decision),
    PromptSpec("recall-context", "Recall context on a topic",
               "Collect what past sessions and curated memories say about a topic before starting work.",
               (PromptArg("topic", "What you are about to work on."),),
               _recall_context),
)
PROMPTS_BY_NAME: dict[str, PromptSpec] = {p.name: p for p in PROMPTS}
