-- As SQLite's 008_trace_context: the caller's W3C trace context, carried to the
-- tracking's events. NULL: none.
ALTER TABLE trackings ADD COLUMN traceparent text;
ALTER TABLE trackings ADD COLUMN tracestate text;
