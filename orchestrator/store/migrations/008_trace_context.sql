-- The W3C trace context the caller sent with the tracking (traceparent, tracestate):
-- carried to its events, so the caller's trace joins the wait to its end. NULL: none.
ALTER TABLE trackings ADD COLUMN traceparent TEXT;
ALTER TABLE trackings ADD COLUMN tracestate TEXT;
