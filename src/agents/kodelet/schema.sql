-- why: `agent-db init` creates a fresh store in kodelet's own layout (kodelet migrations
-- 20260204163000..20260719170000: conversations, summaries, their indexes, provider, metadata,
-- cwd, background_processes, acp_session_updates, steering_messages), so the demo, the tests
-- and users' real stores share one layout. Only these eight kodelet migrations are recorded in
-- schema_migrations; kodelet applies its later ones (runner and auth tables) itself on startup.
CREATE TABLE IF NOT EXISTS schema_migrations (
  version INTEGER PRIMARY KEY,
  applied_at DATETIME NOT NULL,
  description TEXT
);
CREATE TABLE IF NOT EXISTS conversations (
  id TEXT PRIMARY KEY,
  raw_messages TEXT NOT NULL,
  provider TEXT NOT NULL,
  file_last_access TEXT,
  usage TEXT NOT NULL,
  summary TEXT,
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL,
  metadata TEXT,
  tool_results TEXT,
  background_processes TEXT,
  cwd TEXT
);
CREATE TABLE IF NOT EXISTS conversation_summaries (
  id TEXT PRIMARY KEY,
  message_count INTEGER NOT NULL,
  first_message TEXT NOT NULL,
  summary TEXT,
  usage TEXT NOT NULL,
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL,
  provider TEXT,
  metadata TEXT,
  cwd TEXT
);
CREATE INDEX IF NOT EXISTS idx_conversations_created_at ON conversations(created_at);
CREATE INDEX IF NOT EXISTS idx_conversations_updated_at ON conversations(updated_at);
CREATE INDEX IF NOT EXISTS idx_conversations_provider ON conversations(provider);
CREATE INDEX IF NOT EXISTS idx_conversations_cwd_updated_at ON conversations(cwd, updated_at);
CREATE INDEX IF NOT EXISTS idx_summaries_created_at ON conversation_summaries(created_at);
CREATE INDEX IF NOT EXISTS idx_summaries_updated_at ON conversation_summaries(updated_at);
CREATE INDEX IF NOT EXISTS idx_summaries_message_count ON conversation_summaries(message_count);
CREATE INDEX IF NOT EXISTS idx_summaries_first_message ON conversation_summaries(first_message);
CREATE INDEX IF NOT EXISTS idx_summaries_summary ON conversation_summaries(summary);
CREATE INDEX IF NOT EXISTS idx_summaries_provider ON conversation_summaries(provider);
CREATE INDEX IF NOT EXISTS idx_summaries_cwd_updated_at ON conversation_summaries(cwd, updated_at);
CREATE TABLE IF NOT EXISTS acp_session_updates (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL,
  update_data TEXT NOT NULL,
  created_at DATETIME DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE IF NOT EXISTS steering_messages (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id TEXT NOT NULL,
  content TEXT NOT NULL,
  images_json TEXT NOT NULL DEFAULT '[]',
  created_at DATETIME NOT NULL
);
