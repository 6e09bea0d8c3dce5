"""Which `nmem://` URNs changed since the last look, whoever wrote them (hooks included)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nmem.models import memory_urn, observation_urn, prompt_urn, session_urn
from nmem.store.protocol import Store


@dataclass
class ChangeSet:
    updated: set[str] = field(default_factory=set)
    list_changed: bool = False

    def __bool__(self) -> bool:
        return bool(self.updated) or self.list_changed


class ChangeWatcher:
    """Cheap to poll: one `PRAGMA data_version` unless something was committed."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.token = store.change_token()
        self.memories = store.memory_versions()
        self.sessions = store.session_versions()
        self.last_observation = store.max_observation_id()
        self.last_prompt = store.max_prompt_id()

    def poll(self) -> ChangeSet:
        changes = ChangeSet()
        token = self.store.change_token()
        if token == self.token:
            return changes
        self.token = token
        current = self.store.memory_versions()
        for uid, version in current.items():
            before = self.memories.get(uid)
            if before == version:
                continue
            domain, namespace, _, deleted = version
            changes.updated.update({memory_urn(domain, namespace, uid), f"nmem://{domain}/{namespace}",
                                    f"nmem://{domain}"})
            if before is None or (deleted is not None and before[3] is None):
                changes.list_changed = True
        self.memories = current
        for obs_id, project, session_id in self.store.observations_after(self.last_observation):
            domain = f"project:{project}"
            changes.updated.update({observation_urn(project, obs_id), f"nmem://{domain}/observations",
                                    f"nmem://{domain}", session_urn(project, session_id)})
            self.last_observation = obs_id
        for prompt_id, project, session_id in self.store.prompts_after(self.last_prompt):
            domain = f"project:{project}"
            changes.updated.update({prompt_urn(project, prompt_id), f"nmem://{domain}/prompts",
                                    f"nmem://{domain}", session_urn(project, session_id)})
            self.last_prompt = prompt_id
        sessions = self.store.session_versions()
        for session_id, (project, state) in sessions.items():
            seen = self.sessions.get(session_id)
            if seen is None or seen[1] != state:
                changes.updated.update({session_urn(project, session_id), f"nmem://project:{project}/sessions",
                                        f"nmem://project:{project}"})
        self.sessions = sessions
        return changes

