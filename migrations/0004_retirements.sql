-- why: `agent-db retire` moves whole conversations into a cold file beside the store, and a
-- transaction spans one file only. This row is the store's side of one retirement: written
-- `moving` before the cold copy, set `retired` in the transaction that deletes the
-- conversation's rows, `restored` in the one that puts them back; `settled` once the cold file
-- agrees. A run that finds an unsettled row finishes or undoes that step (docs/architecture.md).
CREATE TABLE agent_db_retirements (
  token TEXT PRIMARY KEY,
  conversation_id TEXT NOT NULL,
  store_kind TEXT NOT NULL,
  cold_path TEXT NOT NULL,
  state TEXT NOT NULL,
  settled INTEGER NOT NULL DEFAULT 0,
  started_at TEXT NOT NULL,
  retired_at TEXT,
  restored_at TEXT,
  conversations TEXT,
  rows INTEGER,
  bytes INTEGER,
  digest TEXT,
  compaction_id INTEGER
);
CREATE INDEX agent_db_retirements_conversation ON agent_db_retirements(conversation_id);
CREATE INDEX agent_db_retirements_open ON agent_db_retirements(settled) WHERE settled = 0;
