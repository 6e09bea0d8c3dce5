"""SQLite schema as an ordered list of migrations; `PRAGMA user_version` is the step applied.

Rules: append only, never edit a released step, never drop user data. Each step runs in
its own `BEGIN IMMEDIATE` transaction, so a crash mid-migration leaves the previous version.
"""

from __future__ import annotations

import _sqlite3 as sqlite3  # the extension itself: see nmem.store.sqlite

# Step 1: ADR-001 as written (sessions, prompts, observations, FTS5 + triggers, indexes).
_V1_ADR001 = """
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    project     TEXT NOT NULL,
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER,
    signature   TEXT,
    summary     TEXT
);

CREATE TABLE prompts (
    id          INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id),
    timestamp   INTEGER NOT NULL,
    source      TEXT NOT NULL,
    content     TEXT NOT NULL
);

CREATE TABLE observations (
    id           INTEGER PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions(id),
    prompt_id    INTEGER REFERENCES prompts(id),
    timestamp    INTEGER NOT NULL,
    obs_type     TEXT NOT NULL,
    source_event TEXT NOT NULL,
    tool_name    TEXT,
    file_path    TEXT,
    content      TEXT NOT NULL,
    metadata     TEXT
);

CREATE INDEX idx_obs_dedup ON observations(session_id, obs_type, file_path, timestamp);
CREATE INDEX idx_obs_session ON observations(session_id, timestamp);
CREATE INDEX idx_obs_prompt ON observations(prompt_id);
CREATE INDEX idx_obs_type ON observations(obs_type);
CREATE INDEX idx_obs_file ON observations(file_path) WHERE file_path IS NOT NULL;
CREATE INDEX idx_prompts_session ON prompts(session_id, id);

CREATE VIRTUAL TABLE observations_fts USING fts5(
    content, content='observations', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER observations_ai AFTER INSERT ON observations BEGIN
    INSERT INTO observations_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER observations_ad AFTER DELETE ON observations BEGIN
    INSERT INTO observations_fts(observations_fts, rowid, content)
        VALUES('delete', old.id, old.content);
END;
CREATE TRIGGER observations_au AFTER UPDATE OF content ON observations BEGIN
    INSERT INTO observations_fts(observations_fts, rowid, content)
        VALUES('delete', old.id, old.content);
    INSERT INTO observations_fts(rowid, content) VALUES (new.id, new.content);
END;

CREATE VIRTUAL TABLE prompts_fts USING fts5(
    content, content='prompts', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER prompts_ai AFTER INSERT ON prompts BEGIN
    INSERT INTO prompts_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER prompts_ad AFTER DELETE ON prompts BEGIN
    INSERT INTO prompts_fts(prompts_fts, rowid, content)
        VALUES('delete', old.id, old.content);
END;
"""

# Step 2: pin flag, and the project denormalised onto observations (backfilled from sessions)
# so project filters and recent-context scoring need no join.
_V2_PIN_AND_PROJECT = """
ALTER TABLE observations ADD COLUMN is_pinned INTEGER NOT NULL DEFAULT 0;
ALTER TABLE observations ADD COLUMN project TEXT NOT NULL DEFAULT '';
UPDATE observations
   SET project = COALESCE((SELECT s.project FROM sessions s WHERE s.id = observations.session_id), '');
CREATE INDEX idx_obs_project_time ON observations(project, timestamp);
CREATE INDEX idx_obs_time ON observations(timestamp);
CREATE INDEX idx_sessions_project ON sessions(project, started_at);
CREATE TRIGGER prompts_au AFTER UPDATE OF content ON prompts BEGIN
    INSERT INTO prompts_fts(prompts_fts, rowid, content)
        VALUES('delete', old.id, old.content);
    INSERT INTO prompts_fts(rowid, content) VALUES (new.id, new.content);
END;
"""

# Step 3: curated memories with their own FTS index. Forgetting leaves a tombstone (uid,
# domain, namespace, deleted_at) so the delete can sync; the text itself is erased.
_V3_MEMORIES = """
CREATE TABLE memories (
    id           INTEGER PRIMARY KEY,
    uid          TEXT NOT NULL UNIQUE,
    domain       TEXT NOT NULL,
    namespace    TEXT NOT NULL,
    summary      TEXT NOT NULL,
    content      TEXT NOT NULL,
    tags         TEXT NOT NULL DEFAULT '[]',
    source       TEXT,
    relates_to   TEXT NOT NULL DEFAULT '[]',
    tier         TEXT NOT NULL DEFAULT 'warm' CHECK (tier IN ('hot', 'warm', 'cold', 'archived')),
    is_pinned    INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    accessed_at  INTEGER,
    access_count INTEGER NOT NULL DEFAULT 0,
    deleted_at   INTEGER
);
CREATE INDEX idx_memories_domain_ns ON memories(domain, namespace, updated_at);
CREATE INDEX idx_memories_updated ON memories(updated_at);

CREATE VIRTUAL TABLE memories_fts USING fts5(
    summary, content, tags, namespace,
    content='memories', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, summary, content, tags, namespace)
        VALUES (new.id, new.summary, new.content, new.tags, new.namespace);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, summary, content, tags, namespace)
        VALUES('delete', old.id, old.summary, old.content, old.tags, old.namespace);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF summary, content, tags, namespace ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, summary, content, tags, namespace)
        VALUES('delete', old.id, old.summary, old.content, old.tags, old.namespace);
    INSERT INTO memories_fts(rowid, summary, content, tags, namespace)
        VALUES (new.id, new.summary, new.content, new.tags, new.namespace);
END;
"""

# Step 4: session summaries become searchable (scope "sessions").
_V4_SESSIONS_FTS = """
CREATE VIRTUAL TABLE sessions_fts USING fts5(project, summary, tokenize='porter unicode61');
INSERT INTO sessions_fts(rowid, project, summary)
    SELECT rowid, project, COALESCE(summary, '') FROM sessions;
CREATE TRIGGER sessions_ai AFTER INSERT ON sessions BEGIN
    INSERT INTO sessions_fts(rowid, project, summary)
        VALUES (new.rowid, new.project, COALESCE(new.summary, ''));
END;
CREATE TRIGGER sessions_ad AFTER DELETE ON sessions BEGIN
    DELETE FROM sessions_fts WHERE rowid = old.rowid;
END;
CREATE TRIGGER sessions_au AFTER UPDATE OF summary, project ON sessions BEGIN
    UPDATE sessions_fts SET project = new.project, summary = COALESCE(new.summary, '')
     WHERE rowid = old.rowid;
END;
"""

# Step 5: index a session summary's prose (`$.text`), not its JSON: step 4 indexed the key
# names too, so "errors", "commands" or "files changed" matched every closed session.
_SUMMARY_TEXT = ("CASE WHEN json_valid({s}) THEN COALESCE(json_extract({s}, '$.text'), {s}) "
                 "ELSE COALESCE({s}, '') END")
_V5_SESSIONS_FTS_TEXT = f"""
DROP TRIGGER sessions_ai;
DROP TRIGGER sessions_au;
DELETE FROM sessions_fts;
INSERT INTO sessions_fts(rowid, project, summary)
    SELECT rowid, project, {_SUMMARY_TEXT.format(s="summary")} FROM sessions;
CREATE TRIGGER sessions_ai AFTER INSERT ON sessions BEGIN
    INSERT INTO sessions_fts(rowid, project, summary)
        VALUES (new.rowid, new.project, {_SUMMARY_TEXT.format(s="new.summary")});
END;
CREATE TRIGGER sessions_au AFTER UPDATE OF summary, project ON sessions BEGIN
    UPDATE sessions_fts SET project = new.project, summary = {_SUMMARY_TEXT.format(s="new.summary")}
     WHERE rowid = old.rowid;
END;
"""

# Step 6: optional embeddings (nmem.search.embeddings), stored beside the rows: one float32
# little-endian BLOB per row and model, written by `nmem index`, never by the hooks. A row's
# vector goes when the row goes or its text changes (the indexer computes it again).
_V6_VECTORS = """
CREATE TABLE vectors (
    kind    TEXT NOT NULL,
    row_id  INTEGER NOT NULL,
    model   TEXT NOT NULL,
    dim     INTEGER NOT NULL,
    vec     BLOB NOT NULL,
    PRIMARY KEY (kind, row_id, model)
);
CREATE TRIGGER vectors_observations_ad AFTER DELETE ON observations BEGIN
    DELETE FROM vectors WHERE kind = 'observation' AND row_id = old.id;
END;
CREATE TRIGGER vectors_observations_au AFTER UPDATE OF content ON observations
WHEN old.content IS NOT new.content BEGIN
    DELETE FROM vectors WHERE kind = 'observation' AND row_id = old.id;
END;
CREATE TRIGGER vectors_prompts_ad AFTER DELETE ON prompts BEGIN
    DELETE FROM vectors WHERE kind = 'prompt' AND row_id = old.id;
END;
CREATE TRIGGER vectors_prompts_au AFTER UPDATE OF content ON prompts
WHEN old.content IS NOT new.content BEGIN
    DELETE FROM vectors WHERE kind = 'prompt' AND row_id = old.id;
END;
CREATE TRIGGER vectors_memories_ad AFTER DELETE ON memories BEGIN
    DELETE FROM vectors WHERE kind = 'memory' AND row_id = old.id;
END;
CREATE TRIGGER vectors_memories_au AFTER UPDATE OF summary, content ON memories
WHEN old.summary IS NOT new.summary OR old.content IS NOT new.content BEGIN
    DELETE FROM vectors WHERE kind = 'memory' AND row_id = old.id;
END;
"""

# Step 7: indexes for reads at a million rows, and the rows whose id order disagrees with time.
# - One session index (session_id, timestamp, obs_type, file_path) serves session windows,
#   timelines and the capture dedup check (type and file read from the index): it replaces
#   idx_obs_dedup, whose session_id prefix repeated idx_obs_session's (~70 bytes a row).
# - (file_path, timestamp): a file's history comes off the index, LIMIT-bound, instead of
#   sorting every touch of the file.
# - (obs_type, project, timestamp) replaces (obs_type): a search filtered by type and project
#   reads the ids that pass from one range of the index, newest first.
# - observations_late lists the rows inserted out of time order (an import of older transcripts,
#   a clock step, two hooks racing): every other row has a timestamp no older than any row
#   with a smaller id, so reads may walk FTS5 doclists by rowid and stop at the LIMIT
#   (see SqliteStore), consulting this (normally empty) table to stay exact.
_V7_READ_INDEXES = """
DROP INDEX idx_obs_dedup;
DROP INDEX idx_obs_session;
CREATE INDEX idx_obs_session ON observations(session_id, timestamp, obs_type, file_path);
DROP INDEX idx_obs_file;
CREATE INDEX idx_obs_file_time ON observations(file_path, timestamp) WHERE file_path IS NOT NULL;
DROP INDEX idx_obs_type;
CREATE INDEX idx_obs_type_project ON observations(obs_type, project, timestamp);

CREATE TABLE observations_late (
    id        INTEGER PRIMARY KEY,
    timestamp INTEGER NOT NULL
);
CREATE INDEX idx_obs_late_time ON observations_late(timestamp);
INSERT INTO observations_late (id, timestamp)
    SELECT id, timestamp FROM (
        SELECT id, timestamp, MAX(timestamp) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
               AS newest_before
          FROM observations)
     WHERE timestamp < newest_before;
CREATE TRIGGER observations_late_ai AFTER INSERT ON observations
WHEN new.id < (SELECT MAX(id) FROM observations)
  OR new.timestamp < (SELECT MAX(timestamp) FROM observations) BEGIN
    INSERT OR REPLACE INTO observations_late (id, timestamp) VALUES (new.id, new.timestamp);
END;
CREATE TRIGGER observations_late_au AFTER UPDATE OF id, timestamp ON observations BEGIN
    DELETE FROM observations_late WHERE id = old.id;
    INSERT OR REPLACE INTO observations_late (id, timestamp) VALUES (new.id, new.timestamp);
END;
CREATE TRIGGER observations_late_ad AFTER DELETE ON observations BEGIN
    DELETE FROM observations_late WHERE id = old.id;
END;
"""

# Step 8: where `nmem import` stopped in each transcript file of a session (bytes of complete lines,
# and the tool calls read there whose results were not written yet), so a transcript that grew
# adds only its new events. `source` is `main` or `agent:<file name>` for a subagent's file.
_V8_IMPORT_MARKS = """
CREATE TABLE import_marks (
    session_id    TEXT NOT NULL,
    source        TEXT NOT NULL,
    byte_offset   INTEGER NOT NULL,
    state         TEXT,
    last_event_at INTEGER,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (session_id, source)
) WITHOUT ROWID;
"""

# Step 9: a failed or refused Read/Write/Edit is a `file_error`, not a read or a change. Rows
# stored before the type existed (a file row from PostToolUseFailure, or whose metadata holds
# the error) move to it, keep their metadata (plus `tool`, and `denied` for a refusal), and
# get the error into their content, so a search for its words finds them.
_META = "(CASE WHEN json_valid(metadata) THEN metadata END)"  # json functions on bad JSON would raise
_FILE_ERROR = f"COALESCE(json_extract({_META}, '$.error'), 'failed')"
_V9_FILE_ERRORS = f"""
UPDATE observations
   SET obs_type = 'file_error',
       content = COALESCE(tool_name, 'file') || ' ' || content || char(10) || '→ ' || {_FILE_ERROR},
       metadata = json_set(CASE WHEN json_type({_META}) = 'object' THEN metadata ELSE '{{}}' END,
                           '$.tool', tool_name, '$.error', {_FILE_ERROR})
 WHERE obs_type IN ('file_read', 'file_write', 'file_edit')
   AND (source_event = 'PostToolUseFailure' OR json_type({_META}, '$.error') IS NOT NULL);
UPDATE observations
   SET metadata = json_set(metadata, '$.denied', json('true'))
 WHERE obs_type = 'file_error' AND json_extract(metadata, '$.denied') IS NULL
   AND (json_extract(metadata, '$.error') LIKE '%doesn''t want to proceed with this tool use%'
        OR json_extract(metadata, '$.error') LIKE '%user rejected tool use%'
        OR json_extract(metadata, '$.error') LIKE '%permission to use % has been denied%');
"""

# Step 10: memory sync (nmem.sync, docs/sync.md). `sync_state` holds this database's device id
# (made here, once) and its hybrid logical clock; `sync_ops` is the outbox: every write to a
# memory adds its operation line in the write's own transaction, `pushed` once the line is
# seen on the remote; `sync_files` is how far each remote log file has been applied.
# `memories.sync_version` is the version of the operation that wrote the row (NULL for rows
# written before this step: the first sync logs them).
_V10_SYNC = """
CREATE TABLE sync_state (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    device  TEXT NOT NULL,
    wall    INTEGER NOT NULL DEFAULT 0,
    counter INTEGER NOT NULL DEFAULT 0
);
INSERT INTO sync_state (id, device) VALUES (1, lower(hex(randomblob(8))));
CREATE TABLE sync_ops (
    seq        INTEGER PRIMARY KEY,
    version    TEXT NOT NULL UNIQUE,
    uid        TEXT NOT NULL,
    domain     TEXT NOT NULL,
    line       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    pushed     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX idx_sync_ops_unpushed ON sync_ops(seq) WHERE pushed = 0;
CREATE TABLE sync_files (
    path        TEXT PRIMARY KEY,
    blob        TEXT NOT NULL,
    byte_offset INTEGER NOT NULL
) WITHOUT ROWID;
ALTER TABLE memories ADD COLUMN sync_version TEXT;
"""

# Step 11: each session's project root (the git top-level of the directory it started in, else that
# directory), so the context block can show paths relative to it. Older sessions keep NULL: the
# reader falls back to another session's root of the same project.
_V11_SESSION_ROOT = """
ALTER TABLE sessions ADD COLUMN root TEXT;
"""

# Step 12: the spooled events already stored (a hook spools an event the database was too busy
# to take; the next hook replays it). A replay marks the spool id in the event's own transaction,
# so a replay repeated after a kill between commit and unlink stores nothing twice. Marks are
# dropped after 30 days (SqliteStore.mark_spooled).
_V12_SPOOLED_EVENTS = """
CREATE TABLE spooled_events (
    id          TEXT PRIMARY KEY,
    recorded_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX idx_spooled_events_time ON spooled_events(recorded_at);
"""

# Step 13: lifecycle (nmem.lifecycle, docs/lifecycle.md). `lifecycle_runs` is one row per
# `nmem consolidate` (its report as JSON); `lifecycle_changes` keeps every memory a run changed as
# it was before and after, so `consolidate --undo RUN` restores it; `lifecycle_state` holds when
# tiers were last computed.
_V13_LIFECYCLE = """
CREATE TABLE lifecycle_runs (
    id          INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    undone_at   INTEGER,
    report      TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE lifecycle_changes (
    id      INTEGER PRIMARY KEY,
    run_id  INTEGER NOT NULL REFERENCES lifecycle_runs(id),
    uid     TEXT NOT NULL,
    action  TEXT NOT NULL,
    before  TEXT,
    after   TEXT
);
CREATE INDEX idx_lifecycle_changes_run ON lifecycle_changes(run_id);
CREATE TABLE lifecycle_state (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
"""

# Step 14: the team server (nmem.team, docs/team.md). Users and their tokens (only a sha256 digest
# of each token is kept), an audit trail of writes and forgets, and who wrote each memory and
# observation (NULL in single-user mode, where nobody signs in). `username`, not `user`, which
# PostgreSQL reserves.
_V14_TEAM = """
CREATE TABLE team_users (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    is_admin   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
);
CREATE TABLE team_tokens (
    id         INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES team_users(id),
    digest     TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE TABLE audit (
    id       INTEGER PRIMARY KEY,
    at       INTEGER NOT NULL,
    username TEXT NOT NULL,
    action   TEXT NOT NULL,
    urn      TEXT NOT NULL
);
CREATE INDEX idx_audit_user ON audit(username, id);
ALTER TABLE memories ADD COLUMN writer TEXT;
ALTER TABLE observations ADD COLUMN writer TEXT;
"""

# Step 15: the change feed's log of curated memory and session writes (nmem.changefeed). New
# observations and prompts need no log (their ids grow in commit order, so `id > cursor` finds
# them); a memory's `updated_at` can lie in the past (a sync pull applies the remote's), and a
# session's end changes no id. One row per memory or session, replaced on each write, so the
# table stays as small as those two and a hook that writes neither pays nothing. (Delete then
# insert, not INSERT OR REPLACE: an outer statement's conflict policy, an upsert's included,
# overrides the one a trigger's statement names.)
_V15_CHANGE_LOG = """
CREATE TABLE change_log (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    kind   TEXT NOT NULL,
    key    TEXT NOT NULL,
    action TEXT NOT NULL,
    UNIQUE (kind, key)
);
INSERT INTO change_log (kind, key, action) SELECT 'session', id, 'created' FROM sessions ORDER BY rowid;
INSERT INTO change_log (kind, key, action) SELECT 'memory', uid, 'created' FROM memories ORDER BY updated_at, id;
CREATE TRIGGER change_log_sessions_ai AFTER INSERT ON sessions BEGIN
    DELETE FROM change_log WHERE kind = 'session' AND key = new.id;
    INSERT INTO change_log (kind, key, action) VALUES ('session', new.id, 'created');
END;
CREATE TRIGGER change_log_sessions_au AFTER UPDATE OF ended_at, summary, project ON sessions BEGIN
    DELETE FROM change_log WHERE kind = 'session' AND key = new.id;
    INSERT INTO change_log (kind, key, action) VALUES ('session', new.id, 'updated');
END;
CREATE TRIGGER change_log_memories_ai AFTER INSERT ON memories BEGIN
    DELETE FROM change_log WHERE kind = 'memory' AND key = new.uid;
    INSERT INTO change_log (kind, key, action) VALUES ('memory', new.uid, 'created');
END;
CREATE TRIGGER change_log_memories_au AFTER UPDATE OF domain, namespace, summary, content, tags, relates_to,
    tier, is_pinned, deleted_at ON memories BEGIN
    DELETE FROM change_log WHERE kind = 'memory' AND key = new.uid;
    INSERT INTO change_log (kind, key, action) VALUES ('memory', new.uid, 'updated');
END;
"""

# Step 16: the coding agent that ran each session (claude-code, codex, gemini, cursor, opencode;
# nmem.capture.agents). Older sessions keep NULL: Claude Code was the only agent nmem captured.
_V16_SESSION_AGENT = """
ALTER TABLE sessions ADD COLUMN agent TEXT;
"""

# Step 17: the trail's rows counted by type (observations) and by source (prompts) as they change,
# so `status` reads a few rows instead of counting every row: a GROUP BY costs ~600 instructions a
# row even off a covering index (~60 M at 100k observations), and prompts had no index to read.
# Triggers keep them, so every write counts whoever makes it (hooks, imports, sync, purges,
# retention); a count may fall to 0 (readers skip those). Kept short: every connection parses
# them, and each statement that writes the table compiles them (a hook: ~0.3 M instructions).
# An upsert inside a trigger keeps its DO UPDATE under any outer conflict policy (a test checks);
# no statement of nmem's replaces a trail row (REPLACE's delete fires no trigger).
_V17_TRAIL_COUNTS = """
CREATE TABLE trail_counts (
    tbl TEXT NOT NULL,
    key TEXT NOT NULL,
    n   INTEGER NOT NULL,
    PRIMARY KEY (tbl, key)
) WITHOUT ROWID;
INSERT INTO trail_counts (tbl, key, n) SELECT 'observations', obs_type, COUNT(*) FROM observations GROUP BY 2;
INSERT INTO trail_counts (tbl, key, n) SELECT 'prompts', source, COUNT(*) FROM prompts GROUP BY 2;
CREATE TRIGGER trail_counts_observations_ai AFTER INSERT ON observations BEGIN
    INSERT INTO trail_counts VALUES ('observations', new.obs_type, 1) ON CONFLICT DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER trail_counts_observations_ad AFTER DELETE ON observations BEGIN
    UPDATE trail_counts SET n = n - 1 WHERE tbl = 'observations' AND key = old.obs_type;
END;
CREATE TRIGGER trail_counts_observations_au AFTER UPDATE OF obs_type ON observations BEGIN
    UPDATE trail_counts SET n = n - 1 WHERE tbl = 'observations' AND key = old.obs_type;
    INSERT INTO trail_counts VALUES ('observations', new.obs_type, 1) ON CONFLICT DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER trail_counts_prompts_ai AFTER INSERT ON prompts BEGIN
    INSERT INTO trail_counts VALUES ('prompts', new.source, 1) ON CONFLICT DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER trail_counts_prompts_ad AFTER DELETE ON prompts BEGIN
    UPDATE trail_counts SET n = n - 1 WHERE tbl = 'prompts' AND key = old.source;
END;
CREATE TRIGGER trail_counts_prompts_au AFTER UPDATE OF source ON prompts BEGIN
    UPDATE trail_counts SET n = n - 1 WHERE tbl = 'prompts' AND key = old.source;
    INSERT INTO trail_counts VALUES ('prompts', new.source, 1) ON CONFLICT DO UPDATE SET n = n + 1;
END;
"""

# Step 18: the private (`user`) memories by writer. A team server's user's memory search reads the
# ids of those they may not see (nmem.store.sql.memories.HIDDEN_MEMORIES_SQL) off this index alone,
# with their write time (what the hidden rows' sizes are kept by): 2,000 of 10,000 memories read
# through idx_memories_domain_ns and their rows cost ~8 ms a search.
_V18_PRIVATE_MEMORIES = """
CREATE INDEX IF NOT EXISTS idx_memories_private ON memories (domain, writer, id, updated_at);
"""

MIGRATIONS: tuple[str, ...] = (_V1_ADR001, _V2_PIN_AND_PROJECT, _V3_MEMORIES, _V4_SESSIONS_FTS,
                               _V5_SESSIONS_FTS_TEXT, _V6_VECTORS, _V7_READ_INDEXES, _V8_IMPORT_MARKS,
                               _V9_FILE_ERRORS, _V10_SYNC, _V11_SESSION_ROOT, _V12_SPOOLED_EVENTS,
                               _V13_LIFECYCLE, _V14_TEAM, _V15_CHANGE_LOG, _V16_SESSION_AGENT,
                               _V17_TRAIL_COUNTS, _V18_PRIVATE_MEMORIES)
LATEST_VERSION = len(MIGRATIONS)


def split_statements(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies (which contain `;`) whole."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if pending.strip():
                statements.append(pending.strip())
            pending = ""
    if pending.strip():
        statements.append(pending.strip())
    return statements


def tables_at(version: int) -> frozenset[str] | None:
    """The tables (FTS5 shadow tables included) nmem's migrations create up to step `version`,
    or None for a version this nmem does not know. Replayed in memory, so it stays true as steps
    are appended; only a database without nmem's application_id mark is ever checked this way."""
    if not 1 <= version <= LATEST_VERSION:
        return None
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for script in MIGRATIONS[:version]:
            for statement in split_statements(script):
                conn.execute(statement)
        return frozenset(str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite^_%' ESCAPE '^'"))
    finally:
        conn.close()
