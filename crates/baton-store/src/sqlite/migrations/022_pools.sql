-- Pools: the projection of requests and orders sent to a pool (`role:ROLE`) and of their
-- claims (`pool.claimed`), one row per message sent to a pool. `open` is 1 while it is
-- unclaimed and its sender has not closed its request; `deadline_at` is the order's
-- deadline as an instant (the core's fold), read to leave out what has expired and to
-- take the most urgent first (deadline, then age: the partial index's order).
CREATE TABLE pool_items (
    message_id  TEXT    PRIMARY KEY,
    pool        TEXT    NOT NULL,
    from_name   TEXT    NOT NULL,   -- the sender, who may not claim it
    topic       TEXT    NOT NULL,
    order_id    TEXT,
    deadline_at INTEGER,
    seq         INTEGER NOT NULL,   -- the send's
    created_at  INTEGER NOT NULL,
    claimed_by  TEXT,
    claimed_at  INTEGER,
    open        INTEGER NOT NULL
);
CREATE INDEX pool_items_ready ON pool_items (pool, deadline_at IS NULL, deadline_at, seq)
    WHERE open = 1;
CREATE INDEX pool_items_order ON pool_items (order_id) WHERE order_id IS NOT NULL;
