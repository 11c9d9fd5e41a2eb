-- The order lifecycle's projection: one row per Work Order, the fold of its `order.changed`
-- events (`baton_core::order::fold`), stored whole as JSON in `data`. The other columns are
-- copies of fields that queries filter on. The document itself is the payload of the
-- request message that carried it (`message`), stored once, in its `message.sent` event.
CREATE TABLE orders (
    project     BIGINT NOT NULL,
    id          TEXT   NOT NULL,
    log_seq     BIGINT NOT NULL,   -- the event that created the row
    seq         BIGINT NOT NULL,   -- the order's own newest seq
    status      TEXT   NOT NULL,   -- as recorded; expiry by deadline is derived at read time
    from_name   TEXT   NOT NULL,
    to_name     TEXT   NOT NULL,
    escalate_to TEXT,
    data        TEXT   NOT NULL,
    PRIMARY KEY (project, id)
);
CREATE INDEX orders_log_seq ON orders (project, log_seq);
CREATE INDEX orders_to ON orders (project, to_name, status);
CREATE INDEX orders_from ON orders (project, from_name, status);
