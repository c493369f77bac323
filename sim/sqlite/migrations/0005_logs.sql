-- What each instance's services printed, kept after the instance is gone
-- (no foreign key: an instance's row goes when it is removed, its logs stay).
CREATE TABLE logs (
	seq      INTEGER PRIMARY KEY AUTOINCREMENT,
	instance TEXT NOT NULL,
	service  TEXT NOT NULL,
	stream   TEXT NOT NULL,
	at       INTEGER NOT NULL,
	text     TEXT NOT NULL
);
CREATE INDEX logs_instance ON logs(instance, seq);
CREATE INDEX logs_instance_at ON logs(instance, at);

-- Per instance: what is kept (to trim without counting rows) and what was
-- lost, so a reader is told exactly how much is missing.
CREATE TABLE log_state (
	instance      TEXT PRIMARY KEY,
	lines         INTEGER NOT NULL DEFAULT 0,
	bytes         INTEGER NOT NULL DEFAULT 0,
	trimmed       INTEGER NOT NULL DEFAULT 0,
	trimmed_bytes INTEGER NOT NULL DEFAULT 0,
	overflowed    INTEGER NOT NULL DEFAULT 0,
	updated_at    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX log_state_updated ON log_state(updated_at);
