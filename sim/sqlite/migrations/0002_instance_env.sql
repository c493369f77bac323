-- The launch-contract env per service (shown for external instances) and what
-- the runtime needs to find an instance again after a restart.
ALTER TABLE instances ADD COLUMN env TEXT NOT NULL DEFAULT '{}';
ALTER TABLE instances ADD COLUMN runtime_ref TEXT NOT NULL DEFAULT '{}';
ALTER TABLE instances ADD COLUMN healthy INTEGER NOT NULL DEFAULT 0;
