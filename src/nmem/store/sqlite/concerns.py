"""Which concern of the SQLite engine holds which public method: the table `SqliteStore` reads
to load a concern on the first use of one of its names (see `nmem.store.sqlite`).

Plain strings, so reading it loads none of them; tests/store/test_sqlite_rest.py checks it
against the classes (a method added to a concern must be added here, or the store will not find it).
`NEEDS` names the concerns whose engine hooks a concern calls (`SqlBase._log_memory_op` is the
sync outbox's): they join with it.
"""

NEEDS: dict[str, tuple[str, ...]] = {
    "nmem.store.sql.memories": ("nmem.store.sql.sync",),              # _log_memory_op, _forget_sync_lines
    "nmem.store.sql.navigation": ("nmem.store.sqlite.search",),       # _text_match
}

CONCERNS: dict[str, tuple[str, tuple[str, ...]]] = {   # module: (mixin class, its public names)
    "nmem.store.sql.memories": ("MemoryRows", (
        "export_memories", "export_sessions", "get_memory", "hidden_memory_uids", "insert_memory", "iter_memories",
        "memory_numbers", "memory_uid", "put_memory", "put_session", "tombstone_memory", "touch_memories",
        "update_memory")),
    "nmem.store.sqlite.search": ("SearchReads", (
        "fts_stats", "fts_texts", "get_observations", "get_prompts", "match_ids", "memory_indexed",
        "rank_candidates", "search", "search_curated", "search_memories", "search_memories_seen_by",
        "search_observations", "search_prompts", "search_sessions", "session_windows", "trail_keys",
        "user_prompt_ids")),
    "nmem.store.sql.context": ("ContextReads", (
        "active_sessions", "curated_memories", "file_touches", "last_prompt", "last_prompts", "latest_checkpoint",
        "project_root", "project_roots", "recent_intents", "recent_observations", "recent_scored",
        "session_observations",
        "session_origins", "session_prompts", "session_roots", "session_tail", "session_tails", "sessions_prompts",
        "status")),
    "nmem.store.sql.sync": ("SyncRows", (
        "sync_apply", "sync_device", "sync_files", "sync_log_unlogged", "sync_outbox", "sync_pending",
        "sync_pushed", "sync_reset")),
    "nmem.store.sql.team": ("TeamRows", (
        "add_token", "add_user", "audit_rows", "list_tokens", "list_users", "memory_writers",
        "observation_writers", "record_writes", "revoke_tokens", "team_active", "token_user")),
    "nmem.store.sql.navigation": ("NavigationReads", (
        "list_sessions", "neighbours", "observation_ids", "purge_observations_matching", "recorded_paths",
        "sessions_by_prefix")),
    "nmem.store.sql.vectors": ("VectorRows", (
        "count_missing_vectors", "count_vectors", "delete_vectors", "get_vectors", "missing_vectors",
        "prune_vectors", "put_vectors", "vector_scan")),
    "nmem.store.sql.lifecycle": ("LifecycleRows", (
        "delete_expired", "expired_counts", "finish_run", "get_run", "mark_run_undone", "recent_runs",
        "record_change", "run_changes", "set_tiers", "start_run", "summarised_sessions", "tier_inputs",
        "tiers_computed_at")),
    "nmem.store.sql.changes": ("ChangeReads", (
        "activity_by_day", "change_heads", "logged_changes_since", "observations_since", "prompts_since")),
}
