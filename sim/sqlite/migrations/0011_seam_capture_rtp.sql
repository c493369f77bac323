-- The RTP packets around the switch as they came, each framed by its
-- 2-byte length (RFC 4571): seam.rtp, for a job that sends RTP.
ALTER TABLE seam_captures ADD COLUMN rtp BLOB NOT NULL DEFAULT x'';
