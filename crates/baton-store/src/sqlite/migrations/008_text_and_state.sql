-- Free-text search: the words of each message's payload (`baton_core::search::words`),
-- keyed by the seq of its `message.sent` event. Contentless: the text is in the log, the
-- table holds only the index. `message_words` lists the index, to compare a rebuild.
CREATE VIRTUAL TABLE message_text USING fts5 (
    words,
    content = '',
    tokenize = 'unicode61 remove_diacritics 0'
);
CREATE VIRTUAL TABLE message_words USING fts5vocab (message_text, 'instance');

-- The project state: the fold of every `state.changed` event (`ProjectState`), kept as
-- JSON in one row and advanced by each state event in the transaction that appends it,
-- so reading the state never replays the history.
CREATE TABLE state (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    data TEXT NOT NULL
);

-- The default `baton runs` view reads the newest runs back from the end.
CREATE INDEX runs_seq ON runs (seq);
