-- why: every compaction must be undoable and accountable. The audit log records what agent-db
-- did and why; the archive holds the exact pre-image of every value agent-db changed, written in
-- the same transaction as the change, so `agent-db restore` can put it back byte-identical.
-- Rows agent-db inserted are archived as a row-level marker (column_name '*', value NULL) so a
-- restore deletes them. row_key and value are BLOB-affinity columns so SQLite stores each value
-- exactly as given (TEXT stays TEXT, no numeric conversion). Nothing here references or alters the agent's own tables.
CREATE TABLE agent_db_compactions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id TEXT NOT NULL,
  store_kind TEXT NOT NULL,
  compacted_at TEXT NOT NULL,
  reason TEXT NOT NULL,
  strategy TEXT NOT NULL,
  model TEXT,
  messages_before INTEGER NOT NULL,
  messages_after INTEGER NOT NULL,
  tokens_before INTEGER NOT NULL,
  tokens_after INTEGER NOT NULL,
  summary_sha256 TEXT NOT NULL,
  post_image_sha256 TEXT NOT NULL,
  agent_db_version TEXT NOT NULL,
  details TEXT NOT NULL DEFAULT '{}',
  restored_at TEXT,
  archive_pruned_at TEXT
);
CREATE INDEX agent_db_compactions_conversation ON agent_db_compactions(conversation_id, id);
CREATE INDEX agent_db_compactions_time ON agent_db_compactions(compacted_at);
CREATE TABLE agent_db_archive (
  compaction_id INTEGER NOT NULL REFERENCES agent_db_compactions(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  table_name TEXT NOT NULL,
  key_column TEXT NOT NULL,
  row_key BLOB,
  column_name TEXT NOT NULL,
  value BLOB,
  PRIMARY KEY (compaction_id, seq)
);
