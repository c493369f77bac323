-- The target's datagrams alone, from its first: what a receiver that
-- joined at the switch got (seam.ts?side=target).
ALTER TABLE seam_captures ADD COLUMN target_ts BLOB NOT NULL DEFAULT x'';
