-- Pools: the projection of requests and orders sent to a pool (`role:ROLE`) and of their
-- claims (`pool.claimed`), one row per message sent to a pool. `open` is 1 while it is
-- unclaimed and its sender has not closed its request; `deadline_at` is the order's
-- deadline as an instant (the core's fold), read to leave out what has expired and to
-- take the most urgent first (deadline, then age: the partial index's order).
CREATE TABLE pool_items (
    project     BIGINT  NOT NULL,
    message_id  TEXT    NOT NULL,
    pool        TEXT    NOT NULL,
    from_name   TEXT    NOT NULL,   -- the sender, who may not claim it
    topic       TEXT    NOT NULL,
    order_id    TEXT,
    deadline_at BIGINT,
    seq         BIGINT  NOT NULL,   -- the send's
    created_at  BIGINT  NOT NULL,
    claimed_by  TEXT,
    claimed_at  BIGINT,
    open        BIGINT  NOT NULL,
    PRIMARY KEY (project, message_id)
);
CREATE INDEX pool_items_ready ON pool_items (project, pool, (deadline_at IS NULL), deadline_at, seq)
    WHERE open = 1;
CREATE INDEX pool_items_order ON pool_items (project, order_id) WHERE order_id IS NOT NULL;
