-- The handoff metrics as a projection: `status` and `/metrics` read one row and
-- count live work from indexes, instead of folding the whole log per call.
--
-- `metrics` holds each project's tally (`baton_core::metrics::Tally`) as JSON, advanced in
-- the same transaction as each event that moves it; the migration fills it from the logs.
CREATE TABLE metrics (
    project BIGINT PRIMARY KEY,
    data    TEXT   NOT NULL
);
-- The open requests, oldest first: as many entries as requests are open.
CREATE INDEX messages_open ON messages (project, seq) WHERE request_status = 'open';
-- The orders waiting for approval.
CREATE INDEX orders_submitted ON orders (project, id) WHERE status = 'submitted';
