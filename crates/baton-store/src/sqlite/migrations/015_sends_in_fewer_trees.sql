-- A send writes into two fewer b-trees: nine pages a send before, seven after.
--
-- The index of event ids leaves out a message's own event. A `message.sent` event now
-- takes its message's id (one ULID for both), so the message's row, indexed by id, finds
-- it; the unique index holds every other event, and every `message.sent` of a store made
-- before this one (its id differs from its subject). An inline UNIQUE constraint cannot be
-- dropped, so the log is rebuilt in seq order, its rows unchanged.
DROP TRIGGER events_no_update;
DROP TRIGGER events_no_delete;
CREATE TABLE events_new (
    seq     INTEGER PRIMARY KEY,
    id      TEXT    NOT NULL,
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
CREATE UNIQUE INDEX events_id ON events (id) WHERE kind != 'message.sent' OR id != subject;
CREATE INDEX events_subject ON events (subject, seq) WHERE kind != 'message.sent';
CREATE INDEX events_kind ON events (kind, seq)
    WHERE kind IN ('gate.changed', 'security.refused');
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;

-- A message's words wait for the free-text index in its own row (`words`, NULL once
-- moved), not in a table of their own. Every send since the last move has its words
-- there ('' when its payload has none), so what is pending is always the newest messages,
-- fewer than `PENDING_TEXT_FLUSH`. What was pending moves into the index now.
ALTER TABLE messages ADD COLUMN words TEXT;
INSERT INTO message_text (rowid, words)
    SELECT seq, words FROM message_text_pending ORDER BY seq;
DROP TABLE message_text_pending;
