-- Facts about the store itself; "owner" names this store so the containers
-- it launches can be told from those of another normsim on the machine.
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
INSERT INTO meta (key, value) VALUES ('owner', lower(hex(randomblob(8))));
