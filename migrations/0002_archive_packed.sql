-- why: a compaction's largest pre-image (kodelet's raw_messages: the whole history) was copied
-- into the archive at full size, doubling what each compaction wrote through the WAL and kept on
-- disk. When the writer's version check proves the stored bytes are the ones agent-db loaded,
-- those bytes are archived zstd-compressed instead: `value` stays NULL, `packed` holds the zstd
-- frame and `encoding` says how to read it back ('zstd-text' or 'zstd-blob': the storage class
-- the cell had). Rows with `encoding` NULL are unchanged: the value is in `value`, as stored.
-- An agent-db older than this migration restoring a packed row would write NULL, which kodelet's
-- NOT NULL raw_messages refuses, so its restore fails and changes nothing.
ALTER TABLE agent_db_archive ADD COLUMN encoding TEXT;
ALTER TABLE agent_db_archive ADD COLUMN packed BLOB;
