-- Instances: one row per placement of a template on a node.
CREATE TABLE instances (
	id           TEXT PRIMARY KEY,
	job_id       TEXT NOT NULL,
	role         TEXT NOT NULL,
	node         TEXT NOT NULL,
	template     TEXT NOT NULL,
	runtime      TEXT NOT NULL,
	state        TEXT NOT NULL,
	error        TEXT NOT NULL DEFAULT '',
	params       TEXT NOT NULL DEFAULT '{}',
	token        TEXT NOT NULL DEFAULT '',
	migration_id TEXT NOT NULL DEFAULT '',
	ports        TEXT NOT NULL DEFAULT '{}',
	connected    INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER NOT NULL,
	updated_at   INTEGER NOT NULL
);
CREATE INDEX instances_job ON instances(job_id);

-- Migrations: the document without its events, plus the columns we filter on.
CREATE TABLE migrations (
	id         TEXT PRIMARY KEY,
	job_id     TEXT NOT NULL,
	state      TEXT NOT NULL,
	started_at INTEGER NOT NULL,
	doc        TEXT NOT NULL
);
CREATE INDEX migrations_job ON migrations(job_id);
CREATE INDEX migrations_state ON migrations(state);

-- The timeline of each migration, in order.
CREATE TABLE migration_events (
	migration_id TEXT NOT NULL REFERENCES migrations(id) ON DELETE CASCADE,
	seq          INTEGER NOT NULL,
	at           INTEGER NOT NULL,
	phase        TEXT NOT NULL,
	side         TEXT NOT NULL,
	detail       TEXT NOT NULL,
	frame        TEXT,
	PRIMARY KEY (migration_id, seq)
);

-- Everything that changed, for live updates and history.
CREATE TABLE events (
	seq       INTEGER PRIMARY KEY AUTOINCREMENT,
	at        INTEGER NOT NULL,
	kind      TEXT NOT NULL,
	instance  TEXT NOT NULL DEFAULT '',
	migration TEXT NOT NULL DEFAULT '',
	data      TEXT
);
CREATE INDEX events_instance ON events(instance);
CREATE INDEX events_migration ON events(migration);

-- Every frame a node received or sent.
CREATE TABLE frames (
	seq       INTEGER PRIMARY KEY AUTOINCREMENT,
	at        INTEGER NOT NULL,
	node      TEXT NOT NULL,
	job_id    TEXT NOT NULL,
	role      TEXT NOT NULL,
	direction TEXT NOT NULL,
	type      TEXT NOT NULL,
	size      INTEGER NOT NULL,
	data      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX frames_instance ON frames(job_id, role);
