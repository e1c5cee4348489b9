//! The fetch statements as Postgres caches them: one text per queue, limit and group limits, with
//! those values written in as literals, so that the plan Postgres caches for a text is the plan
//! it would make for that call anyway.
//!
//! **Why.** The fetch is a large statement: planning it costs 1.3–2.4 ms, more than running it
//! (0.4–0.7 ms), and at low rates there is about one fetch per delivery (BENCHMARKS.md). A
//! prepared statement with the queue and the limit as parameters let Postgres switch to a
//! *generic* plan, made without their values, which ran beside a parked backlog several times
//! slower than the plan made for the actual values (BENCHMARKS.md, "A cached generic plan").
//! Here the node id is written in too: a text without parameters has one plan, made at its first
//! execution on a connection for exactly these values (with parameters, Postgres plans the first
//! five executions of each text anyway before it caches one).
//!
//! **Staleness.** A cached plan keeps the table sizes it was made with (a custom plan reads the
//! current ones at each call), and a plan made on a near-empty `jobs` table (a new database) is
//! dreadful on a full one: measured 18–23 ms against 0.6 ms, a sequential scan of `jobs` to join
//! the chosen ids. So each text also carries the *size class* of `jobs` and `job_groups`
//! (the bit length of their size in pages, read at most once a second): when either table
//! doubles or halves, the text changes and the statement is planned anew. `ANALYZE` (by
//! autovacuum in production) invalidates cached plans by itself.

use crate::GroupLimits;
use sqlx::PgExecutor;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a process reads the sizes of `jobs` and `job_groups` (one statement).
const SIZE_PROBE_EVERY: Duration = Duration::from_secs(1);

/// Texts kept per process before the cache is emptied (the texts of older size classes and of
/// limits no longer asked for go; sqlx's per-connection statement cache evicts its own).
const MAX_TEXTS: usize = 512;

/// The size class of the tables the fetch reads: the bit length of `jobs`' and `job_groups`'
/// sizes in pages. Changes when either table doubles or halves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(super) struct SizeClass {
    jobs: u8,
    groups: u8,
}

fn bit_length(pages: i64) -> u8 {
    (64 - pages.max(0).leading_zeros()) as u8
}

struct Probe {
    at: Option<Instant>,
    class: SizeClass,
}

static PROBE: Mutex<Probe> = Mutex::new(Probe {
    at: None,
    class: SizeClass { jobs: 0, groups: 0 },
});

/// The current size class, read from the database at most once per [`SIZE_PROBE_EVERY`] per
/// process (one short statement; between reads, the last one read). A process whose pools
/// reach several databases (tests) shares one class: it only decides when texts are planned
/// anew, never what a fetch claims.
pub(super) async fn size_class<'c>(exec: impl PgExecutor<'c>) -> crate::Result<SizeClass> {
    {
        let p = PROBE.lock().unwrap();
        if p.at.is_some_and(|at| at.elapsed() < SIZE_PROBE_EVERY) {
            return Ok(p.class);
        }
    }
    let (jobs, groups): (i64, i64) = sqlx::query_as(
        "SELECT pg_relation_size('jobs') / current_setting('block_size')::int8,
                pg_relation_size('job_groups') / current_setting('block_size')::int8",
    )
    .fetch_one(exec)
    .await?;
    let class = SizeClass {
        jobs: bit_length(jobs),
        groups: bit_length(groups),
    };
    let mut p = PROBE.lock().unwrap();
    p.at = Some(Instant::now());
    p.class = class;
    Ok(class)
}

#[derive(PartialEq, Eq, Hash)]
struct Key {
    template: usize,
    queue: String,
    node_id: String,
    limit: i64,
    limits: (u32, u32, u32, Option<u32>),
    class: SizeClass,
}

static TEXTS: Mutex<Option<HashMap<Key, Arc<str>>>> = Mutex::new(None);

/// `template` (`FETCH` or `FETCH_LEAN`, whose parameters are `$1` queue, `$2` limit, `$3` node
/// id, `$4`–`$7` the group limits) with every parameter written in as a literal, and a leading
/// comment naming the size class. Built once per distinct arguments and kept (at most
/// [`MAX_TEXTS`]).
pub(super) fn text(
    template: &'static str,
    queue: &str,
    node_id: &str,
    limit: i64,
    limits: &GroupLimits,
    class: SizeClass,
) -> Arc<str> {
    let limit = limit.max(0);
    let key = Key {
        template: template.as_ptr() as usize,
        queue: queue.to_owned(),
        node_id: node_id.to_owned(),
        limit,
        limits: (
            limits.initial,
            limits.floor,
            limits.ceiling,
            limits.gate_ceiling,
        ),
        class,
    };
    let mut texts = TEXTS.lock().unwrap();
    let texts = texts.get_or_insert_with(HashMap::new);
    if let Some(t) = texts.get(&key) {
        return t.clone();
    }
    if texts.len() >= MAX_TEXTS {
        texts.clear();
    }
    let gate_ceiling = limits
        .gate_ceiling
        .map_or("NULL".to_owned(), |c| c.max(1).to_string());
    let args = [
        quote(queue),
        format!("({limit})::int8"),
        quote(node_id),
        format!("({})::real", limits.initial),
        format!("({})::real", limits.floor),
        format!("({})::int", limits.ceiling),
        format!("({gate_ceiling})::int"),
    ];
    let body = inline(template, &args);
    let t: Arc<str> = format!(
        "-- fetch, size class {}/{} (planned anew when jobs or job_groups doubles or halves)\n{body}",
        class.jobs, class.groups
    )
    .into();
    texts.insert(key, t.clone());
    t
}

/// A string as an SQL literal (`'` doubled; standard_conforming_strings, the default since
/// Postgres 9.1, makes backslashes plain).
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// `sql` with each `$n` (n = 1 … args.len()) replaced by `args[n - 1]`.
fn inline(sql: &str, args: &[String]) -> String {
    let mut out = String::with_capacity(sql.len() + 64);
    let mut rest = sql;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        match after[..digits].parse::<usize>() {
            Ok(n) if (1..=args.len()).contains(&n) => out.push_str(&args[n - 1]),
            _ => out.push_str(&rest[i..i + 1 + digits]),
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_parameter_becomes_a_literal() {
        let limits = GroupLimits {
            gate_ceiling: Some(8),
            ..GroupLimits::default()
        };
        let t = text(
            "SELECT $1, $2, $3, $4, $5, $6, $7",
            "it's",
            "node-1",
            16,
            &limits,
            SizeClass::default(),
        );
        let body = t.lines().nth(1).unwrap();
        assert_eq!(
            body,
            format!(
                "SELECT 'it''s', (16)::int8, 'node-1', ({})::real, ({})::real, ({})::int, (8)::int",
                limits.initial, limits.floor, limits.ceiling
            )
        );
    }

    #[test]
    fn the_real_statements_keep_no_parameter() {
        for template in [super::super::FETCH, super::super::FETCH_LEAN] {
            let t = text(
                template,
                "default",
                "node-1",
                4,
                &GroupLimits::default(),
                SizeClass::default(),
            );
            let params: std::collections::BTreeSet<&str> = t
                .match_indices('$')
                .map(|(i, _)| {
                    let d = t[i + 1..].bytes().take_while(u8::is_ascii_digit).count();
                    &t[i..i + 1 + d]
                })
                .collect();
            assert!(params.is_empty(), "{params:?}");
        }
    }

    #[test]
    fn a_new_size_class_is_a_new_text() {
        let limits = GroupLimits::default();
        let small = text("SELECT $1", "q", "n", 1, &limits, SizeClass::default());
        let big = text(
            "SELECT $1",
            "q",
            "n",
            1,
            &limits,
            SizeClass {
                jobs: bit_length(4096),
                groups: 1,
            },
        );
        assert_ne!(small, big);
        assert_eq!(bit_length(0), 0);
        assert_eq!(bit_length(1), 1);
        assert_eq!(bit_length(4096), 13);
        assert_eq!(bit_length(8191), 13);
    }
}
