-- Migrations are listed newest first, a page at a time: the index keeps a
-- page of 10,000 from sorting them all.
CREATE INDEX migrations_started ON migrations(started_at DESC, id);
