"""bench/cc_transcripts.py writes transcript trees in the shapes Claude Code writes."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import load_bench

cc = load_bench("cc_transcripts")
T0 = 1_790_000_000


def scripted(root: Path, layout: str) -> object:
    tree = cc.Projects(root, seed=3)
    s = tree.session("/home/dev/my_app.v2", start=T0, subagent_layout=layout)
    s.prompt("fix the flaky login test")
    s.thinking("The token expires during the test.")
    s.bash("pytest tests/test_login.py -q", stdout="1 failed, 3 passed", exit_code=1)
    with s.subagent("Find token helpers", "List the helpers that mint tokens") as agent:
        agent.tool("Grep", {"pattern": "mint_token"}, result="src/auth/tokens.py")
        agent.say("tokens.py mints them.")
    s.slash_command("review", "src/auth/tokens.py", expansion="Review the file for bugs.")
    s.say("The expiry is computed in local time.")
    s.local_command("model", "opus", stdout="Set model to opus")
    s.interrupt(for_tool_use=True)
    s.task_notification("b7x2", 'Background command "npm run build" completed (exit code 0)')
    s.compact("1. Primary request: fix the flaky login test.", trigger="manual")
    s.save()
    return s


def test_the_tree_is_laid_out_as_claude_code_lays_it_out(tmp_path: Path) -> None:
    s = scripted(tmp_path / "projects", "subagents")
    project_dir = tmp_path / "projects" / "-home-dev-my-app-v2"
    assert s.path == project_dir / f"{s.session_id}.jsonl"
    (agent_file,) = (project_dir / s.session_id / "subagents").glob("agent-*.jsonl")
    meta = json.loads(agent_file.with_name(agent_file.stem + ".meta.json").read_text(encoding="utf-8"))
    assert meta["agentType"] == "general-purpose" and meta["toolUseId"].startswith("toolu_")

    lines = list(cc.lines_of(s.path))
    messages = [line for line in lines if line.get("type") in ("user", "assistant")]
    assert {line["sessionId"] for line in messages} == {s.session_id}
    assert not any(line["isSidechain"] for line in messages)
    known = {line["uuid"] for line in lines if "uuid" in line}
    assert all(line["parentUuid"] in known for line in messages if line["parentUuid"]), "a broken uuid chain"
    (boundary,) = [line for line in lines if line.get("subtype") == "compact_boundary"]
    assert boundary["parentUuid"] is None and boundary["logicalParentUuid"] in known
    after = lines[lines.index(boundary) + 1]
    assert after["isCompactSummary"] and after["message"]["content"].startswith("This session is being continued")

    sidechain = list(cc.lines_of(agent_file))
    assert all(line["isSidechain"] and line["agentId"] == agent_file.stem[len("agent-"):] for line in sidechain)
    assert {line["sessionId"] for line in sidechain} == {s.session_id}
    assert sidechain[0]["parentUuid"] is None and sidechain[0]["message"]["content"].startswith("List the helpers")
    (rollup,) = [line["toolUseResult"] for line in lines
                 if isinstance(line.get("toolUseResult"), dict) and "agentId" in line["toolUseResult"]]
    assert rollup["agentId"] == agent_file.stem[len("agent-"):] and rollup["totalToolUseCount"] == 1


def test_inline_and_project_dir_subagents(tmp_path: Path) -> None:
    inline = scripted(tmp_path / "a", "inline")
    assert not list((tmp_path / "a").rglob("agent-*.jsonl"))
    side = [line for line in cc.lines_of(inline.path) if line.get("isSidechain")]
    assert side and {line["sessionId"] for line in side} == {inline.session_id}

    legacy = scripted(tmp_path / "b", "project-dir")
    (agent_file,) = legacy.path.parent.glob("agent-*.jsonl")
    assert all(line["isSidechain"] for line in cc.lines_of(agent_file))


def test_save_appends_only_what_is_new(tmp_path: Path) -> None:
    tree = cc.Projects(tmp_path)
    s = tree.session("/w/demo", start=T0)
    s.prompt("first")
    s.say("one")
    first = s.save().read_bytes()
    s.prompt("second")
    s.say("two")
    grown = s.save().read_bytes()
    assert grown.startswith(first) and len(grown) > len(first)
    names = [e["hook_event_name"] for e in s.hook_payloads()]
    assert names == ["SessionStart", "UserPromptSubmit", "Stop", "UserPromptSubmit", "Stop"]


def test_git_worktree_is_a_real_linked_worktree(tmp_path: Path) -> None:
    main, worktree = cc.git_repo_with_worktree(tmp_path, "ledger", branch="leap-year")
    assert (main / ".git").is_dir()
    pointer = (worktree / ".git").read_text(encoding="utf-8")
    assert pointer.startswith("gitdir: ") and "/.git/worktrees/" in pointer
    assert cc.git(worktree, "rev-parse", "--abbrev-ref", "HEAD") == "leap-year"
    assert "ledger-leap-year" in cc.git(main, "worktree", "list")
