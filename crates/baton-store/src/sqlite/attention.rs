//! What waits for a person in SQLite: the `open_needs` and `stuck_orders` projections
//! (migration 17), kept in the transaction of each gate and effect event, so the human
//! queue reads open work instead of every need and effect in the log.

use baton_core::effect::{EffectChange, Effects, StuckBy, stuck_by};
use baton_core::gate::{GateChange, NeedMove, need_move};
use baton_core::{Change, Event};
use rusqlite::{Connection, params};

use super::conn::{Sql, exec};
use super::events;
use super::rows::{column, rows};
use crate::Attention;
use crate::decode;

/// Applies a verdict, a need, an acknowledgement or an effect to the open needs and the stuck orders; any other change is not this family's.
pub(super) fn project(conn: &Connection, event: &Event) -> Sql<()> {
    match &event.change {
        Change::Gate(change) => gate(conn, event, change),
        Change::Effect(change) => effect(conn, change),
        _ => Ok(()),
    }
}

/// Projects a gate event as the core moves its need (`gate::need_move`).
pub(super) fn gate(conn: &Connection, event: &Event, change: &GateChange) -> Sql<()> {
    match need_move(change) {
        Some(NeedMove::Opened(id)) => {
            exec(
                conn,
                "INSERT INTO open_needs (id, seq) VALUES (?, ?) ON CONFLICT (id) DO NOTHING",
                params![id, event.seq],
            )?;
        }
        Some(NeedMove::Closed(id)) => {
            exec(conn, "DELETE FROM open_needs WHERE id = ?", [id])?;
        }
        None => {}
    }
    Ok(())
}

/// Projects an effect event as the core says it moves its order (`effect::stuck_by`).
pub(super) fn effect(conn: &Connection, change: &EffectChange) -> Sql<()> {
    let order = change.order();
    let stuck = match stuck_by(change) {
        Some(StuckBy::Stuck) => true,
        Some(StuckBy::Recheck) => {
            Effects::replay(&events::about(conn, order, baton_core::effect::KIND)?)
                .stuck()
                .is_some()
        }
        None => return Ok(()),
    };
    if stuck {
        exec(
            conn,
            "INSERT INTO stuck_orders (id) VALUES (?) ON CONFLICT (id) DO NOTHING",
            [order],
        )?;
    } else {
        exec(conn, "DELETE FROM stuck_orders WHERE id = ?", [order])?;
    }
    Ok(())
}

/// Fills both from the log of a store made before they existed, as live writes would
/// have.
pub(super) fn fill(conn: &Connection) -> Sql<()> {
    events::each_of(conn, &["gate.changed", "effect.changed"], |event| {
        match &event.change {
            Change::Gate(g) => gate(conn, event, g)?,
            Change::Effect(e) => effect(conn, e)?,
            _ => {}
        }
        Ok(())
    })
}

pub(super) fn read(conn: &Connection) -> Sql<Attention> {
    let found = rows(
        conn,
        "SELECT e.seq, e.id, e.at, e.actor, e.kind, e.data FROM open_needs n \
         JOIN events e ON e.seq = n.seq ORDER BY n.seq",
        [],
    )?;
    Ok(Attention {
        needs: decode::events(&found)?,
        stuck: column(conn, "SELECT id FROM stuck_orders ORDER BY id", [])?,
    })
}

/// When each item was last acknowledged: the newest `gate.changed` event on it (an
/// acknowledgement's subject is its item id). `kind != 'message.sent'` names the subject
/// index's condition (migration 14).
pub(super) fn acks(conn: &Connection, items: &[String]) -> Sql<Vec<Option<i64>>> {
    let list = serde_json::to_string(items).expect("strings serialize");
    column(
        conn,
        "SELECT (SELECT max(at) FROM events WHERE subject = j.value \
         AND kind = 'gate.changed' AND kind != 'message.sent') \
         FROM json_each(?) j ORDER BY j.key",
        [list],
    )
}

/// This family's projection rows as text, in a stable order, for `projection_dump`.
pub(super) const DUMP: &[&str] = &[
    "SELECT 'n|' || id || '|' || seq FROM open_needs ORDER BY id",
    "SELECT 'u|' || id FROM stuck_orders ORDER BY id",
];
