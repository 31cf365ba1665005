-- why: every compaction is scored on what it keeps of the summarized span's artifacts (paths,
-- commands, errors, identifiers, URLs, the user's rules, to-dos, the latest instruction), so a
-- user can see what was lost. The score is stored as JSON ({"score":..,"by_kind":{..},"lost":[..]})
-- with the audit row; rows written before this migration have NULL: unknown.
ALTER TABLE agent_db_compactions ADD COLUMN retention TEXT;
