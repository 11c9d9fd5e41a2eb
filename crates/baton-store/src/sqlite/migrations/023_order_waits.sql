-- Orders that wait on orders (`baton_core::after`): one row for each order an order still
-- waits on, the projection of `order.changed` (`baton_core::after::edits`): added when the
-- order is offered with an `after`, removed when the order waited on is approved, when the
-- waiting order is released, goes on without it, or ends. `message_id` is the request that
-- carries the waiting order: its worker's inbox leaves it out while any row names it.
-- An order's readiness is its `orders.status` (`offered`), read by `orders_status`.
CREATE TABLE order_waits (
    order_id   TEXT NOT NULL,
    after_id   TEXT NOT NULL,
    message_id TEXT NOT NULL,
    PRIMARY KEY (order_id, after_id)
) WITHOUT ROWID;
CREATE INDEX order_waits_after ON order_waits (after_id);
CREATE INDEX order_waits_message ON order_waits (message_id);
CREATE INDEX orders_status ON orders (status, log_seq);
