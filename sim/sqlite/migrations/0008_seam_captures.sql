-- The media a receiver got around a migration's switch, as one MPEG-TS
-- file (GET /api/v1/migrations/{id}/seam.ts). No foreign key: a capture
-- may be written while the migration's own row is still on its way; it
-- goes when its migration is pruned.
CREATE TABLE seam_captures (
	migration_id TEXT PRIMARY KEY,
	from_at INTEGER NOT NULL,
	to_at INTEGER NOT NULL,
	datagrams INTEGER NOT NULL,
	ts BLOB NOT NULL
);
