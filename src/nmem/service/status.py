"""`status`: one answer built in one place from the store's counts, the settings and the lifecycle."""

from __future__ import annotations

from nmem.capture.privacy import redact_url
from nmem.models import ROLES, SUBAGENT, TIERS, agent_type, prompt_role
from nmem.service.base import Base
from nmem.sync.lock import last_synced

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _by_count(counts: dict[str, int]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _prompt_counts(by_source: dict[str, int]) -> dict[str, Any]:
    """The trail's prompts told apart: `prompts` counts what the user typed; the agent's replies,
    its thinking and its subagents' answers are counted on their own (`by_role` has all four,
    `subagents` the answers per subagent type)."""
    by_role = dict.fromkeys(ROLES.values(), 0)
    subagents: dict[str, int] = {}
    for source, count in by_source.items():
        role = prompt_role(source)
        by_role[role] = by_role.get(role, 0) + count
        if role == ROLES[SUBAGENT]:
            name = agent_type(source) or SUBAGENT
            subagents[name] = subagents.get(name, 0) + count
    return {"prompts": by_role["user"], "agent_replies": by_role["reply"], "thinking": by_role["thinking"],
            "subagent_replies": by_role["subagent"], "prompts_by_role": by_role,
            "subagent_replies_by_type": _by_count(subagents)}


class Status(Base):
    def status(self, domain: str | None = None, verify: bool = False) -> dict[str, Any]:
        """The store's counts (every tier listed, hot to archived), memories by domain, when tiers
        were last computed, and the LLM provider consolidation would use (never its key).
        `domain` narrows the memory counts to one (project, project:<name>, user, org); `verify`
        adds SQLite's integrity check and each full-text index checked against its table
        (`verify.ok` false on any finding)."""
        st = self.store.status()
        data: dict[str, Any] = {
            "database": redact_url(st.url), "schema_version": st.schema_version, "size_bytes": st.size_bytes,
            "sessions": st.sessions, **_prompt_counts(st.by_prompt_source), "observations": st.observations,
            "memories": st.memories, "by_obs_type": st.by_obs_type,
            "by_namespace": st.by_namespace,
            "by_tier": {t: int(st.by_tier.get(t, 0)) for t in TIERS}, "by_project": st.by_project,
            "enabled": bool(self.settings["memory.enabled"]),
            "encrypted": bool(getattr(self.store, "encrypted", False)),
        }
        data["tiers_computed_at"] = self.store.tiers_computed_at()
        provider = str(self.settings["llm.provider"]).strip().lower()
        model = str(self.settings["llm.model"]).strip()
        data["llm"] = "disabled" if provider in ("", "none") else f"{provider}:{model}" if model else provider
        data["last_sync"] = last_synced(self.settings.home)
        live = list(self.store.iter_memories(None, None))
        by_domain: dict[str, int] = {}
        for memory in live:
            by_domain[memory.domain] = by_domain.get(memory.domain, 0) + 1
        data["by_domain"] = _by_count(by_domain)
        if domain and domain != "all":
            target = self._domain(domain, None)
            mine = [m for m in live if m.domain == target]
            by_ns: dict[str, int] = {}
            by_tier: dict[str, int] = {}
            for memory in mine:
                by_ns[memory.namespace] = by_ns.get(memory.namespace, 0) + 1
                by_tier[memory.tier] = by_tier.get(memory.tier, 0) + 1
            data.update(domain=target, memories=len(mine), by_namespace=_by_count(by_ns),
                        by_tier={t: by_tier[t] for t in TIERS if t in by_tier})
        if verify:
            integrity = self.store.integrity()
            fts = self.store.fts_consistency()
            data["verify"] = {"ok": integrity == "ok" and all(v == "ok" for v in fts.values()),
                              "integrity": integrity, "fts": fts}
        return data
