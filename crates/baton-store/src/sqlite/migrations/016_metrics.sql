-- The handoff metrics as a projection: `status` and `/metrics` read one row and
-- count live work from indexes, instead of folding the whole log per call.
--
-- `metrics` holds the tally (`baton_core::metrics::Tally`) as JSON, advanced in the same
-- transaction as each event that moves it; the migration fills it from the log.
CREATE TABLE metrics (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    data TEXT    NOT NULL
);
-- The open requests, oldest first: as many entries as requests are open.
CREATE INDEX messages_open ON messages (seq) WHERE request_status = 'open';
-- The orders waiting for approval.
CREATE INDEX orders_submitted ON orders (id) WHERE status = 'submitted';
