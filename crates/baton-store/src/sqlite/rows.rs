//! Rows read out of SQLite: every row a statement selects as owned values, its columns
//! found by name for the shared decoders ([`crate::decode`]); its first row, its first
//! column, or one value; a record kept whole as the JSON of its fold; and the ids of a kind
//! of record in a span, for a lookup by prefix.

use std::sync::Arc;

use baton_core::id::Span;
use rusqlite::types::{FromSql, Value};
use rusqlite::{Connection, OptionalExtension, Params};

use super::conn::Sql;
use crate::decode;

/// A row read out of SQLite into owned values, its columns found by name.
pub(super) struct Row {
    names: Arc<[String]>,
    values: Vec<Value>,
}

impl Row {
    fn get(&self, column: &str) -> sqlx::Result<&Value> {
        self.names
            .iter()
            .position(|n| n == column)
            .map(|i| &self.values[i])
            .ok_or_else(|| sqlx::Error::ColumnNotFound(column.to_owned()))
    }
}

fn mismatch(column: &str, want: &str, got: &Value) -> sqlx::Error {
    sqlx::Error::Decode(format!("column {column}: expected {want}, found {got:?}").into())
}

impl decode::Columns for Row {
    fn text(&self, column: &str) -> sqlx::Result<String> {
        self.maybe_text(column)?
            .ok_or_else(|| mismatch(column, "text", &Value::Null))
    }

    fn maybe_text(&self, column: &str) -> sqlx::Result<Option<String>> {
        match self.get(column)? {
            Value::Text(t) => Ok(Some(t.clone())),
            Value::Null => Ok(None),
            other => Err(mismatch(column, "text", other)),
        }
    }

    fn int(&self, column: &str) -> sqlx::Result<i64> {
        self.maybe_int(column)?
            .ok_or_else(|| mismatch(column, "an integer", &Value::Null))
    }

    fn maybe_int(&self, column: &str) -> sqlx::Result<Option<i64>> {
        match self.get(column)? {
            Value::Integer(i) => Ok(Some(*i)),
            Value::Null => Ok(None),
            other => Err(mismatch(column, "an integer", other)),
        }
    }
}

/// Every row `sql` selects.
pub(super) fn rows(conn: &Connection, sql: &str, params: impl Params) -> Sql<Vec<Row>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let names: Arc<[String]> = stmt.column_names().into_iter().map(str::to_owned).collect();
    let width = names.len();
    let mut found = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = found.next()? {
        let mut values = Vec::with_capacity(width);
        for i in 0..width {
            values.push(row.get::<_, Value>(i)?);
        }
        out.push(Row {
            names: Arc::clone(&names),
            values,
        });
    }
    Ok(out)
}

/// The first row `sql` selects, if any.
pub(super) fn row(conn: &Connection, sql: &str, params: impl Params) -> Sql<Option<Row>> {
    Ok(rows(conn, sql, params)?.into_iter().next())
}

/// The first column of every row `sql` selects.
pub(super) fn column<T: FromSql>(conn: &Connection, sql: &str, params: impl Params) -> Sql<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let found = stmt.query_map(params, |r| r.get::<_, T>(0))?;
    Ok(found.collect::<rusqlite::Result<_>>()?)
}

/// The first column of the first row `sql` selects, if any.
pub(super) fn scalar<T: FromSql>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
) -> Sql<Option<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    Ok(stmt.query_row(params, |r| r.get::<_, T>(0)).optional()?)
}

/// A projection row kept as the JSON of its fold (runs, orders): `query` selects its `data`
/// column by id.
pub(super) fn load_folded<T: serde::de::DeserializeOwned>(
    conn: &Connection,
    query: &'static str,
    id: &str,
) -> Sql<Option<T>> {
    let data: Option<String> = scalar(conn, query, [id])?;
    Ok(data.as_deref().map(decode::folded).transpose()?)
}

/// The ids of `table` in each of `spans`, the first [`decode::IDS_A_SPAN`] of each in
/// order.
pub(super) fn ids(conn: &Connection, table: &str, spans: &[Span]) -> Sql<Vec<String>> {
    let sql = format!(
        "SELECT id FROM {table} WHERE id >= ? AND id < ? ORDER BY id LIMIT {}",
        decode::IDS_A_SPAN
    );
    let mut found = Vec::new();
    for span in spans {
        found.extend(column::<String>(conn, &sql, [&span.from, &span.to])?);
    }
    Ok(found)
}
