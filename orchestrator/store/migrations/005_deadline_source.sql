-- Which rule set a tracking's deadline_at: caller, derived (a function job's, from
-- the job's own timeout and retries) or default. Rows stored before keep NULL:
-- unknown, and never derived again (their deadline may be a caller's).
ALTER TABLE trackings ADD COLUMN deadline_source TEXT;
