//! `baton reserve`, `baton release`, `baton reservations`: paths of the checkout held by
//! one participant, so parallel agents learn of a collision when they claim a path. And
//! `baton guard`, what the git hooks `baton init --git-guard` installs run.

use baton_app::doc::{ReservationRow, Reservations};
use clap::Args;

use crate::commands::Context;
use crate::error::{CommandError, CommandResult};
use crate::output::{Output, table};

/// Reserve paths of the checkout before editing them: exclusive unless --shared.
///
/// Each GLOB is gitignore-style and relative to the checkout's root, wherever you run it
/// (`src/billing/**`, `docs/*.md`, `Cargo.toml`; a name covers what is under it). Another
/// participant's live reservation that could cover the same paths — exclusive, or yours
/// exclusive — refuses the whole request (exit 6), naming its holder, its id and when it
/// lapses; nothing is reserved then. Reserving a glob you hold again renews it with the new
/// --ttl, mode and reason. A reservation lapses at its expiry whatever runs meanwhile;
/// `baton release` ends it sooner.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton --as impl-1 reserve 'src/billing/**' --reason 'invoice rounding'\n  \
                  baton --as impl-2 reserve docs/ --shared --ttl 30m\n  \
                  baton --as impl-1 reserve 'src/billing/**' --ttl 2h   # renew\n\n\
                  Exit codes: 0 reserved, 6 held by another (retryable), 3 a glob or --ttl refused"
)]
pub struct ReserveArgs {
    /// Globs relative to the checkout's root.
    #[arg(value_name = "GLOB", required = true)]
    pub globs: Vec<String>,
    /// Others may hold the same paths shared too (an exclusive holder still excludes you).
    #[arg(long)]
    pub shared: bool,
    /// How long it lasts (default `reservations.default_ttl`, at most
    /// `reservations.max_ttl` in .baton/config.toml).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub ttl: Option<String>,
    /// Why: shown to whoever it stands in the way of.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

/// Release your reservations: by id, by glob (as reserved), or, with neither, all you
/// hold by hand (an order's are released when the order ends).
///
/// Every ID and GLOB named must release something, or nothing is released and the command
/// says what you do hold (exit 4). With --force an owner releases another participant's
/// reservation, once its holder's runs and sessions have been quiet for
/// `reservations.force_after`; the holder is sent --reason.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton --as impl-1 release\n  baton --as impl-1 release 'src/billing/**'\n  \
                  baton --as impl-1 release rsv-01jd8x...\n  \
                  baton --as owner release --force rsv-01jd8x... --reason 'impl-1 crashed an hour ago'"
)]
pub struct ReleaseArgs {
    /// Reservation ids (or unique prefixes) and globs.
    #[arg(value_name = "ID|GLOB")]
    pub names: Vec<String>,
    /// Release another participant's reservation, by id (owners, once its holder is quiet).
    #[arg(long, value_name = "ID", conflicts_with = "names", requires = "reason")]
    pub force: Option<String>,
    /// With --force: why, told to the holder.
    #[arg(long, value_name = "TEXT", requires = "force")]
    pub reason: Option<String>,
}

/// List reservations: who holds which paths, how, why and until when.
///
/// Without --all, the live ones; with --all, released and expired ones too. Whether one is
/// live is decided now, from when it was made or renewed and its time to live.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton reservations\n  baton reservations --holder impl-1\n  \
                  baton reservations --all --json"
)]
pub struct ReservationsArgs {
    /// Released and expired reservations too.
    #[arg(long)]
    pub all: bool,
    /// Only this participant's.
    #[arg(long, value_name = "NAME")]
    pub holder: Option<String>,
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: u32,
}

/// A TTL flag as seconds: a duration, or one with a leading `-` (refused by the rule,
/// which names the field, as every edge's negative TTL is).
fn ttl_seconds(text: &str) -> CommandResult<i64> {
    let (sign, body) = match text.trim().strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text.trim()),
    };
    let d = crate::project::parse_duration("--ttl", body).map_err(CommandError::usage)?;
    Ok(sign * i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn until(row: &ReservationRow) -> String {
    match (&row.order, &row.expires_at) {
        (Some(order), _) => format!("order {order} ends"),
        (None, Some(at)) => at.clone(),
        (None, None) => "-".to_owned(),
    }
}

fn rows_table(rows: &[ReservationRow], status: bool) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut row = vec![
                r.id.clone(),
                r.holder.clone(),
                r.mode.clone(),
                r.path.clone(),
                until(r),
            ];
            if status {
                row.push(r.status.as_str().to_owned());
            }
            row.push(match &r.order {
                Some(order) if r.reason.is_empty() => format!("order {order}"),
                _ if r.reason.is_empty() => "-".to_owned(),
                _ => r.reason.clone(),
            });
            row
        })
        .collect();
    let mut headers = vec!["ID", "HOLDER", "MODE", "GLOB", "UNTIL"];
    if status {
        headers.push("STATUS");
    }
    headers.push("REASON");
    table(&headers, &cells)
}

pub async fn reserve(ctx: &Context, args: ReserveArgs) -> CommandResult<Output> {
    let input = baton_app::ops::ReserveInput {
        paths: args.globs,
        shared: args.shared,
        ttl_seconds: args.ttl.as_deref().map(ttl_seconds).transpose()?,
        reason: args.reason,
    };
    let doc = ctx.call::<baton_app::ops::Reserve>(input).await?;
    let human = format!("Reserved:\n{}", rows_table(&doc.items, false));
    Ok(Output::of(&doc, human))
}

pub async fn release(ctx: &Context, args: ReleaseArgs) -> CommandResult<Output> {
    let doc = match args.force {
        Some(id) => {
            let input = baton_app::ops::ForceInput {
                id,
                reason: args.reason.unwrap_or_default(),
            };
            ctx.call::<baton_app::ops::ReleaseForce>(input).await?
        }
        None => {
            let input = baton_app::ops::ReleaseInput { names: args.names };
            ctx.call::<baton_app::ops::Release>(input).await?
        }
    };
    let human = format!("Released:\n{}", rows_table(&doc.items, false));
    Ok(Output::of(&doc, human))
}

pub async fn list(ctx: &Context, args: ReservationsArgs) -> CommandResult<Output> {
    let input = baton_app::ops::ReservationsInput {
        all: args.all,
        holder: args.holder,
        limit: Some(args.limit),
    };
    let doc: Reservations = ctx.call::<baton_app::ops::ReservationList>(input).await?;
    let mut human = if doc.items.is_empty() {
        if args.all {
            "No reservations.".to_owned()
        } else {
            "No live reservations.".to_owned()
        }
    } else {
        rows_table(&doc.items, args.all)
    };
    if doc.more {
        human.push_str(&format!(
            "\n(more than {}: pass --limit, up to 1000)",
            doc.items.len()
        ));
    }
    Ok(Output::of(&doc, human))
}
