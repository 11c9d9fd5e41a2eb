-- Fewer pages a write. A command's commit writes each page it changed twice, to
-- the log and again when the store is checkpointed as the command closes it, and this
-- disk's sync time grows with every page: a send changed 20 pages, a status step 8. Each
-- table is rebuilt in seq order, the rows unchanged.

-- The log: seq stays the rowid, without AUTOINCREMENT. Events are never deleted (the
-- triggers refuse it), so the next seq is always one past the largest, as before, and no
-- write changes `sqlite_sequence` any more.
DROP TRIGGER events_no_update;
DROP TRIGGER events_no_delete;
CREATE TABLE events_new (
    seq     INTEGER PRIMARY KEY,
    id      TEXT    NOT NULL UNIQUE,
    at      INTEGER NOT NULL,
    actor   TEXT    NOT NULL,
    kind    TEXT    NOT NULL,
    subject TEXT    NOT NULL,
    data    TEXT    NOT NULL
);
INSERT INTO events_new (seq, id, at, actor, kind, subject, data)
    SELECT seq, id, at, actor, kind, subject, data FROM events ORDER BY seq;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
DELETE FROM sqlite_sequence WHERE name = 'events';
CREATE INDEX events_subject ON events (subject, seq);
CREATE INDEX events_kind ON events (kind, seq);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;

-- A message's row is keyed by the seq of its `message.sent` event (it was a separate index
-- on seq), so a new message lands at the end of the table; only replies are in the index
-- of replies.
CREATE TABLE messages_new (
    seq             INTEGER PRIMARY KEY,   -- the message.sent event, which holds the payload
    id              TEXT    NOT NULL UNIQUE,
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
    request_status  TEXT,               -- the sender's own end; requests only
    replies         INTEGER NOT NULL DEFAULT 0
);
INSERT INTO messages_new (seq, id, from_name, type, topic, reply_to, root_id, depth, excerpt,
                          size, hash, idempotency_key, created_at, request_status, replies)
    SELECT seq, id, from_name, type, topic, reply_to, root_id, depth, excerpt, size, hash,
           idempotency_key, created_at, request_status, replies
    FROM messages ORDER BY seq;
DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;
CREATE INDEX messages_duplicate ON messages (from_name, hash, created_at);
CREATE UNIQUE INDEX messages_idempotency ON messages (from_name, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX messages_reply_to ON messages (reply_to) WHERE reply_to IS NOT NULL;
CREATE INDEX messages_root ON messages (root_id, seq);
CREATE INDEX messages_outbox ON messages (from_name, type, seq);
CREATE INDEX messages_open_requests ON messages (from_name, seq)
    WHERE type = 'request' AND request_status != 'archived';

-- A delivery is stored in the order of its key, (message, recipient), which also serves
-- a message's recipients and their status (it took a table and two indexes); `ordinal`
-- keeps where the recipient stands in the message's `to`, as on PostgreSQL.
CREATE TABLE deliveries_new (
    message_id  TEXT    NOT NULL,
    participant TEXT    NOT NULL,
    ordinal     INTEGER NOT NULL,
    status      TEXT    NOT NULL,
    updated_at  INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    request     INTEGER NOT NULL,
    PRIMARY KEY (message_id, participant)
) WITHOUT ROWID;
INSERT INTO deliveries_new (message_id, participant, ordinal, status, updated_at, seq, request)
    SELECT message_id, participant,
           row_number() OVER (PARTITION BY message_id ORDER BY rowid) - 1,
           status, updated_at, seq, request
    FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_new RENAME TO deliveries;
CREATE INDEX deliveries_owed ON deliveries (participant, status, request, seq, message_id);

-- The free-text index keeps no column sizes (they serve ranking, and search orders by
-- seq). It is filled again from the log after this script.
DROP TABLE message_words;
DROP TABLE message_text;
CREATE VIRTUAL TABLE message_text USING fts5 (
    words,
    content = '',
    columnsize = 0,
    tokenize = 'unicode61 remove_diacritics 0'
);
CREATE VIRTUAL TABLE message_words USING fts5vocab (message_text, 'instance');
