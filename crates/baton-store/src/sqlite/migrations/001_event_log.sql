-- The event log: the only source of truth. Append-only, enforced by triggers.
CREATE TABLE events (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    id      TEXT    NOT NULL UNIQUE,
    at      INTEGER NOT NULL,
    actor   TEXT    NOT NULL,
    kind    TEXT    NOT NULL,
    subject TEXT    NOT NULL,
    data    TEXT    NOT NULL
);
CREATE INDEX events_subject ON events (subject, seq);

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;

-- Projections: derived from the log, rebuilt from it on demand.
CREATE TABLE participants (
    name     TEXT PRIMARY KEY,
    role     TEXT    NOT NULL,
    added_at INTEGER NOT NULL
);

CREATE TABLE messages (
    id              TEXT PRIMARY KEY,
    seq             INTEGER NOT NULL,   -- the message.sent event, which holds the payload
    from_name       TEXT    NOT NULL,
    type            TEXT    NOT NULL,
    topic           TEXT    NOT NULL,
    reply_to        TEXT,
    root_id         TEXT    NOT NULL,
    depth           INTEGER NOT NULL,
    excerpt         TEXT    NOT NULL,
    size            INTEGER NOT NULL,
    hash            TEXT    NOT NULL,
    idempotency_key TEXT,
    created_at      INTEGER NOT NULL,
    request_status  TEXT                -- the sender's own end; requests only
);
CREATE INDEX messages_seq ON messages (seq);
CREATE INDEX messages_duplicate ON messages (from_name, hash, created_at);
CREATE UNIQUE INDEX messages_idempotency ON messages (from_name, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX messages_reply_to ON messages (reply_to);
CREATE INDEX messages_root ON messages (root_id, seq);
CREATE INDEX messages_outbox ON messages (from_name, type, seq);

CREATE TABLE deliveries (
    message_id  TEXT    NOT NULL,
    participant TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (message_id, participant)
);
CREATE INDEX deliveries_by_participant ON deliveries (participant, status);
