-- A send indexes its words without writing the free-text index. An FTS5 insert
-- changed six or seven pages of a send's eighteen (a new segment, the index's structure
-- and averages records, the segment index, and the merges that follow); a send now adds
-- one row to `message_text_pending`, and the writer that brings it to
-- `PENDING_TEXT_FLUSH` rows moves them all into `message_text` as one segment. Search
-- reads both: the few pending rows are compared directly, the rest through the index.
-- Every pending row is newer than every indexed one.
--
-- The index's tokenizer is now `ascii`: the words are already split and lowercased by
-- `baton_core::search::words`, and `ascii` keeps each of them whole as one token (it
-- separates only at ASCII punctuation and spaces, and the words hold none), so a match in
-- the index and a match among the pending rows mean exactly the same thing: each query
-- word starts a word of the payload. It is filled again from the log after this script.
DROP TABLE message_words;
DROP TABLE message_text;
CREATE VIRTUAL TABLE message_text USING fts5 (
    words,
    content = '',
    columnsize = 0,
    tokenize = 'ascii'
);
CREATE VIRTUAL TABLE message_words USING fts5vocab (message_text, 'instance');
CREATE TABLE message_text_pending (
    seq   INTEGER PRIMARY KEY,   -- the message.sent event
    words TEXT    NOT NULL
);

-- Only the kinds read back by kind are in the kind index (`events_of_kind`: verdicts and
-- refusals): every other event wrote a page of it that no reader used.
DROP INDEX events_kind;
CREATE INDEX events_kind ON events (kind, seq)
    WHERE kind IN ('gate.changed', 'security.refused');

-- A thread is its root and the replies under it: only replies are in the index of
-- threads, so a new message writes no page of it.
DROP INDEX messages_root;
CREATE INDEX messages_root ON messages (root_id, seq) WHERE reply_to IS NOT NULL;
