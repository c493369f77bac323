-- The kind of a timeline event (sim.TimelineKind): the moments clients act
-- on, so they never read the detail text. Events recorded before it have
-- none.
ALTER TABLE migration_events ADD COLUMN kind TEXT NOT NULL DEFAULT '';
