"""The lifecycle half of the service API: tiers, `sweep`, `consolidate` and its undo.

`nmem.service.api.Service` includes it; the CLI and MCP call these methods and only format the
reports. Every memory edit goes through the store's memory writes, so it is logged for sync
like any other; each change a consolidation makes is also kept (before and after) in
`lifecycle_changes`, in the same transaction, for `undo_consolidation`.
"""

from __future__ import annotations

import threading
import time

from nmem.errors import InvalidArgument, NotFound
from nmem.ids import new_uid
from nmem.lifecycle import similarity, tiers
from nmem.lifecycle.retention import ttl_policy
from nmem.models import Memory, Session, preview
from nmem.service.args import SUMMARY_CHARS
from nmem.service.base import Base
from nmem.store import NewMemory
from nmem.team import access

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Progress = Callable[[str], None]

LAZY_TIERS_AFTER = 86400       # recall recomputes tiers when they are older than a day
# One recomputation at a time in a process (it is one a day): the recalls meanwhile wait for it
_RECOMPUTING = threading.Lock()
EPHEMERAL = ("progress", "blockers", "context")   # namespaces that go stale
ROLLUP_TAG = "nmem:rollup"
ROLLUP_NAMESPACE = "context"
ROLLUP_SESSIONS = 20           # newest sessions a project's roll-up lists
SNAPSHOT_FIELDS = ("summary", "content", "tags", "relates_to", "tier")
SUMMARY_SYSTEM = ("You condense notes from a software project's memory. Answer with the merged note only: "
                  "plain markdown, factual, no preamble, keep every specific detail (names, numbers, paths).")


def _snapshot(memory: Memory) -> dict[str, Any]:
    return {"summary": memory.summary, "content": memory.content, "tags": list(memory.tags),
            "relates_to": list(memory.relates_to), "tier": memory.tier}


def _edited(now: dict[str, Any], then: dict[str, Any]) -> bool:
    """Whether a memory changed since a snapshot; its tier is computed, so it does not count."""
    return any(now[k] != then.get(k) for k in SNAPSHOT_FIELDS if k != "tier")


class Lifecycle(Base):
    """Tiers, retention and consolidation."""

    _corpus: similarity.Corpus
    _index: dict[str, int]

    # -- tiers -------------------------------------------------------------------------------

    def recompute_tiers(self) -> dict[str, int]:
        """Compute every live memory's tier and store the ones that changed; {"from>to": count}."""
        now = self.now()
        half_life = float(self.settings["lifecycle.half_life_days"])
        changed: dict[str, str] = {}
        moves: dict[str, int] = {}
        # Every memory's tier is kept current, whoever asked; the counts name only what they may see.
        shown = {row[0] for row in self.store.tier_inputs()} if access.current() is not None else None
        for uid, namespace, updated, accessed, count, pinned, tags, current in self._store.tier_inputs():
            tier = tiers.tier_of(namespace, updated, accessed, count, pinned, tags, current, now, half_life)
            if tier != current:
                changed[uid] = tier
                if shown is None or uid in shown:
                    key = f"{current}>{tier}"
                    moves[key] = moves.get(key, 0) + 1
        self.store.set_tiers(changed, now)
        return moves

    def refresh_tiers(self) -> None:
        """Recompute tiers if the last computation is more than a day old (what `recall` calls).
        Until a day after the computation last read, nothing is read: a computation only moves
        that time later, so they are fresh until then whoever computes them meanwhile."""
        now = self.now()
        if now < self._tiers_fresh_until:
            return
        # A server's read threads recall at once: one recomputes, the others wait for it and then
        # find the tiers fresh. Each used to recompute and store them itself, a write transaction
        # on a read thread (queued behind the writer's batch, on PostgreSQL behind the change
        # feed's lock), their UPDATEs of the same rows waiting on each other: under
        # `bench/team.py` a fresh store's first 200 recalls, on every read thread at once.
        with _RECOMPUTING:
            if now < self._tiers_fresh_until:
                return
            at = self.store.tiers_computed_at()
            if at is None or now - at >= LAZY_TIERS_AFTER:
                self.recompute_tiers()
                at = now
            self._tiers_fresh_until = at + LAZY_TIERS_AFTER

    # -- retention ---------------------------------------------------------------------------

    def sweep(self, *, dry_run: bool = False) -> dict[str, Any]:
        """Delete the trail rows older than their type's `retention.ttl` (pinned rows stay), give
        the space back, and recompute tiers. With `dry_run`, count what would go and change nothing."""
        entries = [str(e).strip() for e in self.settings["retention.ttl"]]
        policy = ttl_policy(entries)
        now = self.now()
        cutoffs = {obs_type: now - ttl for obs_type, ttl in policy.items()}
        before = self.store.file_bytes()
        report: dict[str, Any] = {
            "dry_run": dry_run, "policy": dict(e.replace(" ", "").split("=", 1) for e in entries),
            "by_type": {}, "deleted": 0, "bytes_before": before, "bytes_after": before, "reclaimed_bytes": 0,
            "tiers": {},
        }
        if dry_run:
            report["by_type"] = self.store.expired_counts(cutoffs) if cutoffs else {}
            report["deleted"] = 0
            report["would_delete"] = sum(report["by_type"].values())
            return report
        gone = self.store.delete_expired(cutoffs) if cutoffs else {}
        after = self.store.file_bytes()
        report.update(by_type=gone, deleted=sum(gone.values()), bytes_after=after,
                      reclaimed_bytes=max(0, before - after), tiers=self.recompute_tiers())
        return report

    # -- consolidation -----------------------------------------------------------------------

    def consolidate(self, *, dry_run: bool = False, domain: str | None = None,
                    progress: Progress | None = None) -> dict[str, Any]:
        """Merge near-duplicate memories into the one most used (the others archived, pointing to
        it), archive stale notes, roll each project's sessions up into one summary memory, and
        recompute tiers. Returns the report; `run_id` undoes it (`undo_consolidation`).

        On a team server it reads only what the signed-in user may see (the service's store is
        theirs, `nmem.team.access`), never merges one writer's `user` memory with another's, and
        every run, dry or real, is in the audit trail."""
        from nmem.lifecycle.llm import Provider  # httpx2 is loaded only when a run needs it

        say = progress or (lambda _message: None)
        provider = Provider.from_settings(self.settings)
        threshold = float(self.settings["lifecycle.duplicate_threshold"])
        if not 0 < threshold <= 1:
            raise InvalidArgument("lifecycle.duplicate_threshold must be in (0, 1]")
        only = self._domain_filter(domain)
        live = [m for m in self.store.iter_memories(only, None)
                if m.tier != tiers.ARCHIVED and ROLLUP_TAG not in m.tags]
        say(f"comparing {len(live)} memories")
        merges = self._plan_merges(live, threshold)
        merged_ids = {m.id for _, group in merges for m in group}
        stale = self._plan_stale(live, merged_ids)
        say(f"{len(merges)} groups of near-duplicates, {len(stale)} stale")
        rollups = self._plan_rollups(only)
        summarizer = provider.name if provider is not None else "extractive"
        viewer = access.current()
        report: dict[str, Any] = {
            "run_id": None, "dry_run": dry_run, "summarizer": summarizer, "threshold": threshold,
            "by": viewer.name if viewer is not None else None,
            "compared": len(live),
            "merges": [{"survivor": s.id, "urn": s.urn, "summary": s.summary,
                        "merged": [{"id": m.id, "summary": m.summary, "similarity": round(sim, 3)}
                                   for m, sim in group_sims]}
                       for s, group_sims in ((s, self._similar(s, g)) for s, g in merges)],
            "stale": [{"id": m.id, "namespace": m.namespace, "summary": m.summary} for m in stale],
            "rollups": [{"project": p, "sessions": len(ss)} for p, ss in rollups.items()],
            "tiers": {},
        }
        if dry_run:
            self._audit_run("consolidate_dry_run", "nmem://runs/consolidate/dry-run", [])
            return report
        # Every summary is written before anything changes, so a failing provider changes nothing.
        merged_texts = {}
        for survivor, group in merges:
            say(f"merging into {survivor.id}")
            merged_texts[survivor.id] = self._merged_content(survivor, group, provider)
        rollup_texts = {p: self._rollup_content(p, ss, provider) for p, ss in rollups.items()}
        now = self.now()
        run_id = self.store.start_run("consolidate", now)
        report["run_id"] = run_id
        for survivor, group in merges:
            tags = list(dict.fromkeys([*survivor.tags, *(t for m in group for t in m.tags
                                                         if t not in tiers.STICKY_TAGS)]))
            relates = list(dict.fromkeys([*survivor.relates_to, *(m.id for m in group)]))
            self._change(run_id, survivor, "merge_survivor",
                         {"content": merged_texts[survivor.id], "tags": tags, "relates_to": relates}, now)
            for member in group:
                self._change(run_id, member, "merged", {
                    "tier": tiers.ARCHIVED, "tags": [*member.tags, tiers.MERGED_TAG],
                    "relates_to": list(dict.fromkeys([survivor.id, *member.relates_to]))}, now)
        for memory in stale:
            self._change(run_id, memory, "stale",
                         {"tier": tiers.ARCHIVED, "tags": [*memory.tags, tiers.STALE_TAG]}, now)
        for project, sessions in rollups.items():
            action = self._write_rollup(run_id, project, sessions, rollup_texts[project], now)
            for row in report["rollups"]:
                if row["project"] == project:
                    row["action"] = action
        say("recomputing tiers")
        report["tiers"] = self.recompute_tiers()
        self.store.finish_run(run_id, report, self.now())
        self._audit_run("consolidate", f"nmem://runs/consolidate/{run_id}",
                        [(action, uid) for uid, action, _, _ in self.store.run_changes(run_id)])
        return report

    def undo_consolidation(self, run_id: int) -> dict[str, Any]:
        """Put back every memory a consolidation changed, as it was before; a memory edited since
        is left as it is now and listed under `conflicts` (nothing is overwritten blindly)."""
        run = self.store.get_run(int(run_id))  # on a team server, only its starter's
        if run is None:
            raise NotFound(f"consolidation run not found: {run_id}")
        if run["undone_at"] is not None:
            raise InvalidArgument(f"consolidation run {run_id} was undone already")
        restored: list[str] = []
        conflicts: list[dict[str, str]] = []
        now = self.now()
        for uid, action, before, after in reversed(self.store.run_changes(int(run_id))):
            current = self.store.get_memory(uid)
            if current is None or current.deleted_at is not None or after is None \
                    or _edited(_snapshot(current), after):
                conflicts.append({"id": uid, "reason": "changed or forgotten since the run"})
                continue
            if action == "rollup_created":
                self.store.tombstone_memory(uid, now)
            elif before is not None:
                self.store.update_memory(uid, before, now)
            restored.append(uid)
        self.store.mark_run_undone(int(run_id), now)
        self.recompute_tiers()
        self._audit_run("consolidate_undo", f"nmem://runs/consolidate/{int(run_id)}",
                        [("restored", uid) for uid in restored])
        return {"run_id": int(run_id), "restored": restored, "conflicts": conflicts}

    def consolidation_runs(self, limit: int = 20) -> list[dict[str, Any]]:
        return self.store.recent_runs(limit)

    # -- the parts of a run ------------------------------------------------------------------

    def _audit_run(self, action: str, run_urn: str, changes: list[tuple[str, str]]) -> None:
        """On a team server: an audit row for the run and one per memory it changed."""
        viewer = access.current()
        if viewer is None:
            return
        urns = {}
        for _, uid in changes:
            memory = self.store.get_memory(uid)
            if memory is not None:
                urns[uid] = memory.urn
        writes = [(action, run_urn), *((f"{action}:{what}", urns[uid]) for what, uid in changes if uid in urns)]
        self.store.record_writes(viewer.name, self.now(), writes)  # type: ignore[attr-defined]

    def _domain_filter(self, domain: str | None) -> str | None:
        if domain in (None, "", "all"):
            return None
        return self._domain(domain, None)

    def _plan_merges(self, live: list[Memory], threshold: float) -> list[tuple[Memory, list[Memory]]]:
        """Groups of near-duplicates, each around the member kept: pinned first, then the one most
        like the others, then the most used, the newest (`similarity.star_groups`)."""
        corpus = similarity.Corpus([f"{m.summary}\n{m.content}" for m in live])
        self._corpus = corpus
        self._index = {m.id: i for i, m in enumerate(live)}
        priority = [(m.access_count, m.updated_at) for m in live]
        out = []
        for survivor, members in similarity.star_groups(corpus, threshold, self._merge_groups(live), priority):
            pinned = [i for i in [survivor, *members] if live[i].is_pinned]
            keep = pinned[0] if pinned else survivor
            # A pinned memory was chosen to be kept as it is: never archived into another.
            rest = [live[i] for i in [survivor, *members] if i != keep and not live[i].is_pinned
                    and corpus.similar(keep, i, threshold)]
            if rest:
                out.append((live[keep], rest))
        return out

    def _merge_groups(self, live: list[Memory]) -> list[str]:
        """What may merge with what: memories of one domain, and a `user` memory only with the
        same writer's (one user's private note is never archived into another's)."""
        private = [m.id for m in live if m.domain == "user"]
        writers = self.store.memory_writers(private) if private and hasattr(self.store, "memory_writers") else {}
        return [f"user:{writers.get(m.id) or ''}" if m.domain == "user" else m.domain for m in live]

    def _similar(self, survivor: Memory, group: list[Memory]) -> list[tuple[Memory, float]]:
        i = self._index[survivor.id]
        return [(m, self._corpus.score(i, self._index[m.id])) for m in group]

    def _plan_stale(self, live: list[Memory], merged: set[str]) -> list[Memory]:
        days = int(self.settings["lifecycle.stale_days"])
        if days <= 0:
            return []
        cutoff = self.now() - days * 86400
        return [m for m in live if m.namespace in EPHEMERAL and not m.is_pinned and m.id not in merged
                and max(m.updated_at, m.accessed_at or 0) < cutoff]

    def _plan_rollups(self, domain: str | None) -> dict[str, list[Session]]:
        by_project = self.store.summarised_sessions(ROLLUP_SESSIONS)
        if domain is not None:
            by_project = {p: s for p, s in by_project.items() if f"project:{p}" == domain}
        out = {}
        for project, sessions in by_project.items():
            current = self._rollup_memory(project)
            if current is None or not current.content.endswith(self._rollup_lines(sessions)):
                out[project] = sessions
        return out

    def _merged_content(self, survivor: Memory, group: list[Memory], provider: Any) -> str:
        if provider is not None:
            notes = "\n\n".join(f"Note {n + 1}: {m.summary}\n{m.content}" for n, m in enumerate([survivor, *group]))
            return str(provider.complete(SUMMARY_SYSTEM, "Merge these notes, which say the same thing, into one:"
                                         f"\n\n{notes}"))
        content = survivor.content
        for member in group:
            extra = similarity.novel_sentences(content, f"{member.summary}. {member.content}")
            if extra:
                content = content.rstrip() + "\n" + "\n".join(f"- {line}" for line in extra)
        return content

    def _rollup_lines(self, sessions: list[Session]) -> str:
        lines = []
        for s in sessions:
            day = time.strftime("%Y-%m-%d", time.gmtime(s.started_at))
            text = s.intent or "(no intent recorded)"
            files = s.summary.get("files_changed") if isinstance(s.summary, dict) else None
            extra = f" ({len(files)} files changed)" if files else ""
            lines.append(f"- {day} s{s.id[:8]}: {preview(text, 140)}{extra}")
        return "\n".join(lines)

    def _rollup_content(self, project: str, sessions: list[Session], provider: Any) -> str:
        lines = self._rollup_lines(sessions)
        if provider is None:
            return lines
        summary = provider.complete(SUMMARY_SYSTEM, f"Summarise what these recent sessions of project {project} "
                                                    f"worked on, in three sentences at most:\n\n{lines}")
        return f"{summary}\n\n{lines}"

    def _rollup_memory(self, project: str) -> Memory | None:
        found = [m for m in self.store.iter_memories(f"project:{project}", ROLLUP_NAMESPACE) if ROLLUP_TAG in m.tags]
        return found[0] if found else None

    def _write_rollup(self, run_id: int, project: str, sessions: list[Session], content: str, now: int) -> str:
        current = self._rollup_memory(project)
        first = time.strftime("%Y-%m-%d", time.gmtime(sessions[-1].started_at))
        last = time.strftime("%Y-%m-%d", time.gmtime(sessions[0].started_at))
        title = preview(f"Recent sessions of {project}: {first} to {last}", SUMMARY_CHARS)
        if current is not None:
            self._change(run_id, current, "rollup_updated", {"summary": title, "content": content}, now)
            return "updated"
        with self.store.transaction():
            memory = self.store.insert_memory(NewMemory(
                uid=new_uid(self.clock()), domain=f"project:{project}", namespace=ROLLUP_NAMESPACE, summary=title,
                content=content, timestamp=now, tags=(ROLLUP_TAG,), source="consolidate"))
            self.store.record_change(run_id, memory.id, "rollup_created", None, _snapshot(memory))
        return "created"

    def _change(self, run_id: int, memory: Memory, action: str, fields: dict[str, Any], now: int) -> None:
        """One memory edit and its undo record, in one transaction."""
        with self.store.transaction():
            updated = self.store.update_memory(memory.id, fields, now)
            if updated is not None:
                self.store.record_change(run_id, memory.id, action, _snapshot(memory), _snapshot(updated))
