-- What the engine knows about the last stored status body without reading it again:
-- its fingerprint (the remote state it stands for) and, while it is an ordinary
-- in-progress body, the digest of its bytes. A restart resumes from these instead of
-- parsing and interpreting every body, and its first reads of unchanged jobs are as
-- cheap as any other read.
ALTER TABLE trackings ADD COLUMN remote_fingerprint TEXT;
ALTER TABLE trackings ADD COLUMN remote_digest BLOB;
