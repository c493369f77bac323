-- What is kept of each instance's frames, and what was let go of to stay
-- within the bounds (FrameLimits); the row ('', '') holds the totals.
CREATE TABLE frame_state (
	job_id        TEXT NOT NULL,
	role          TEXT NOT NULL,
	frames        INTEGER NOT NULL DEFAULT 0,
	bytes         INTEGER NOT NULL DEFAULT 0,
	trimmed       INTEGER NOT NULL DEFAULT 0,
	trimmed_bytes INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (job_id, role)
);
INSERT INTO frame_state (job_id, role, frames, bytes)
	SELECT job_id, role, count(*), coalesce(sum(length(data)), 0) FROM frames GROUP BY job_id, role;
INSERT INTO frame_state (job_id, role, frames, bytes)
	SELECT '', '', count(*), coalesce(sum(length(data)), 0) FROM frames;
