//! Payload filters: a channel's optional [JSON Logic](https://jsonlogic.com) rule, evaluated when
//! a message fans out ([`crate::messages::send`]): the channel gets a delivery only when its rule
//! is truthy for the message.
//!
//! **The form.** A filter is a JSON Logic rule, written as JSON (`{"==": [{"var":
//! "payload.status"}, "paid"]}`), evaluated by [`datalogic_rs`] (Apache-2.0; compile once,
//! evaluate against an arena-parsed document). Only the operators of the JSON Logic reference
//! (jsonlogic.com, "Supported operations") are accepted, so a filter means the same in any
//! other JSON Logic implementation: [`OPERATORS`]. No regular expressions, no dates, no
//! extensions.
//!
//! **The evaluated document** is `{"event_type": "<the message's event type>", "payload": <the
//! message's payload>}`: `{"var": "event_type"}` reads the type, `{"var": "payload.items.0.sku"}`
//! a part of the payload (JSON Logic's dotted paths; a missing path reads `null`).
//!
//! **Matching.** A channel matches when its rule's result is truthy by JSON Logic's rule (false
//! for `false`, `null`, `0`, `""` and `[]`; true otherwise). An evaluation that fails (e.g.
//! arithmetic on a string) does not match: the message still goes to every other
//! channel. `POST /api/v1/channels/{id}/filter/test` shows the result and the error.
//!
//! **Bounds** (checked when the filter is set; the reason is a 422 naming `filter`):
//! - its JSON text at most [`MAX_FILTER_BYTES`] (4 KiB) as re-serialised compactly;
//! - at most [`MAX_NODES`] JSON values in all, nested at most [`MAX_DEPTH`] deep;
//! - the top is an operation, and every object is an operation: exactly one key, one of
//!   [`OPERATORS`];
//! - it compiles ([`datalogic_rs::Engine::compile`] checks the arity of each operator);
//! - no iterating operator (`all`, `some`, `none`) inside another one's arguments (the nesting
//!   of array operators is at most 1: [`ITERATORS`]).
//!
//! **Evaluation cost.** The operators that build values (`map`, `filter`, `reduce`, `merge`,
//! `cat`) are left out: a filter tests, it does not compute, and `reduce` with `cat` or `merge`
//! grows its accumulator once per item (quadratic). With the rest, and iteration not nested,
//! every node is evaluated once, or once per item of the one array its enclosing iterator walks,
//! and each evaluation of a node does work at most linear in the values it reads (a path lookup,
//! a comparison, a substring search, an array's `in`). One evaluation therefore costs at most
//! O([`MAX_NODES`] × the document's size), deterministically, with no regex and no loop; a fan-out
//! to `n` channels with filters is one parse of the document and `n` such evaluations. The
//! library version we can build with (datalogic-rs 5.4; its metered `ops_budget` needs a newer
//! compiler) has no per-evaluation step or time budget of its own, so these structural rules
//! are the bound; BENCHMARKS.md measures the cost ("Payload filters on a fan-out"), including
//! the worst cases the rules allow, which on a 256 KiB payload are far from free.
//!
//! **A time budget per message.** So that a fan-out stays bounded whatever its filters and
//! payload, [`Document::evaluate_within`] stops once the evaluations of one message have taken
//! [`FANOUT_BUDGET`] (checked before each evaluation; one evaluation is not interrupted), and
//! the message is refused whole (422 on `payload`, nothing stored or sent) rather than sent to
//! some of its channels: a budget that silently dropped deliveries would depend on the
//! machine's load.

use crate::{Error, Result};
use datalogic_rs::bumpalo::Bump;
use datalogic_rs::{DataValue, Engine, EvaluationConfig, Logic};
use serde_json::Value;
use std::sync::LazyLock;

/// Longest filter, in bytes of its compact JSON text.
pub(crate) const MAX_FILTER_BYTES: usize = 4096;
/// Most JSON values (objects, arrays, strings, numbers, booleans, nulls) in a filter.
pub(crate) const MAX_NODES: usize = 256;
/// Deepest nesting of a filter's JSON (the top value is depth 1).
pub(crate) const MAX_DEPTH: usize = 16;
/// Most time the filter evaluations of one message may take ([`Document::evaluate_within`]).
/// A fan-out to 1000 channels with ordinary filters takes a few milliseconds of it
/// (BENCHMARKS.md).
pub(crate) const FANOUT_BUDGET: std::time::Duration = std::time::Duration::from_millis(500);

/// The operators that iterate over an array; none may appear inside another's arguments.
pub(crate) const ITERATORS: &[&str] = &["all", "some", "none"];

/// The operators a filter may use: those of the JSON Logic reference (jsonlogic.com), less
/// `log` (it writes to a console) and those that build values (`map`, `filter`, `reduce`,
/// `merge`, `cat`; see the module docs, "Evaluation cost").
pub(crate) const OPERATORS: &[&str] = &[
    "var",
    "missing",
    "missing_some",
    "if",
    "==",
    "===",
    "!=",
    "!==",
    "!",
    "!!",
    "or",
    "and",
    ">",
    ">=",
    "<",
    "<=",
    "max",
    "min",
    "+",
    "-",
    "*",
    "/",
    "%",
    "all",
    "none",
    "some",
    "in",
    "substr",
];

/// The one evaluator: the library's defaults (JSON Logic's reference semantics, JavaScript
/// truthiness), with loose equality across types answering `false` as the reference does
/// rather than failing.
static ENGINE: LazyLock<Engine> = LazyLock::new(|| {
    Engine::builder()
        .with_config(EvaluationConfig::default().with_loose_equality_errors(false))
        .build()
});

/// A checked, compiled filter, or the reason a stored one could not be compiled (it was checked
/// when set, so only a library change could do that; it then matches nothing).
pub struct Filter {
    logic: std::result::Result<Logic, String>,
}

impl Filter {
    /// A filter as `channels.filter` stores it (its JSON text), compiled. It was [`check`]ed
    /// when set, so it is only compiled here, not walked again: at fan-out the compile is most
    /// of a filter's cost (BENCHMARKS.md), the evaluation a small part.
    pub(crate) fn stored(text: &str) -> Filter {
        Filter {
            logic: ENGINE
                .compile(text)
                .map_err(|e| format!("the stored filter is no longer valid: {e}")),
        }
    }
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Filter")
    }
}

/// Checks `rule` against the bounds of the module docs and compiles it; the error is an
/// [`Error::Invalid`] on `filter` saying which bound or which operator.
pub fn check(rule: &Value) -> Result<Filter> {
    let text = rule.to_string();
    if text.len() > MAX_FILTER_BYTES {
        return Err(Error::invalid(
            "filter",
            format!(
                "is {} bytes as compact JSON; at most {MAX_FILTER_BYTES}",
                text.len()
            ),
        ));
    }
    if !rule.is_object() {
        return Err(Error::invalid(
            "filter",
            "must be a JSON Logic operation: an object with one key naming the operator, e.g. \
             {\"==\": [{\"var\": \"payload.status\"}, \"paid\"]} (null removes the filter)",
        ));
    }
    let mut nodes = 0;
    walk(rule, 1, false, &mut nodes)?;
    let logic = ENGINE
        .compile(text.as_str())
        .map_err(|e| Error::invalid("filter", format!("is not a valid JSON Logic rule: {e}")))?;
    Ok(Filter { logic: Ok(logic) })
}

/// Counts nodes, checks depth, that every object is one allowed operation and that no iterator
/// sits inside another (`iterating`: inside one's arguments already).
fn walk(v: &Value, depth: usize, iterating: bool, nodes: &mut usize) -> Result<()> {
    *nodes += 1;
    if *nodes > MAX_NODES {
        return Err(Error::invalid(
            "filter",
            format!("holds more than {MAX_NODES} JSON values"),
        ));
    }
    if depth > MAX_DEPTH {
        return Err(Error::invalid(
            "filter",
            format!("is nested more than {MAX_DEPTH} levels deep"),
        ));
    }
    match v {
        Value::Object(map) => {
            let mut entries = map.iter();
            let (Some((op, args)), None) = (entries.next(), entries.next()) else {
                return Err(Error::invalid(
                    "filter",
                    format!(
                        "every object must be an operation with exactly one key, not {} keys",
                        map.len()
                    ),
                ));
            };
            if !OPERATORS.contains(&op.as_str()) {
                let shown: String = op.chars().take(40).collect();
                return Err(Error::invalid(
                    "filter",
                    format!(
                        "unknown operator {shown:?}; allowed: {}",
                        OPERATORS.join(" ")
                    ),
                ));
            }
            let iterator = ITERATORS.contains(&op.as_str());
            if iterator && iterating {
                return Err(Error::invalid(
                    "filter",
                    format!(
                        "{op:?} inside another iterating operator: `all`, `some` and `none` may \
                         not be nested"
                    ),
                ));
            }
            walk(args, depth + 1, iterating || iterator, nodes)
        }
        Value::Array(items) => items
            .iter()
            .try_for_each(|i| walk(i, depth + 1, iterating, nodes)),
        _ => Ok(()),
    }
}

/// The result of one evaluation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The rule's result was truthy or not.
    Matched(bool),
    /// The evaluation failed (e.g. arithmetic on a string): no match. The message is the
    /// library's.
    Failed(String),
}

impl Outcome {
    /// Whether the channel gets the delivery.
    pub fn matches(&self) -> bool {
        matches!(self, Outcome::Matched(true))
    }
}

/// The evaluated document `{"event_type": …, "payload": …}` for one message, parsed once and
/// shared by every channel's evaluation (see [`Document::evaluate`]).
pub(crate) struct Document {
    arena: Bump,
    text: String,
}

impl Document {
    /// The document of a message with `event_type` (`None`: `null`, for a test without one) and
    /// `payload` (a JSON text already checked as such, e.g. a `RawValue`'s).
    pub fn new(event_type: Option<&str>, payload: &str) -> Self {
        let event_type = serde_json::to_string(&event_type).expect("a string serialises");
        Document {
            arena: Bump::new(),
            text: format!("{{\"event_type\":{event_type},\"payload\":{payload}}}"),
        }
    }

    /// Evaluates every filter of `filters` (`None`: no filter, always matches) against the
    /// document, in order. One parse of the document, then one evaluation per filter.
    pub(crate) fn evaluate(&self, filters: &[Option<&Filter>]) -> Vec<Outcome> {
        self.evaluate_within(filters, None)
            .expect("no budget, no overrun")
    }

    /// [`Document::evaluate`] within `budget` of wall-clock time in all (`None`: unbounded):
    /// `None` when the budget ran out before every filter was evaluated.
    pub(crate) fn evaluate_within(
        &self,
        filters: &[Option<&Filter>],
        budget: Option<std::time::Duration>,
    ) -> Option<Vec<Outcome>> {
        let started = std::time::Instant::now();
        let over = || budget.is_some_and(|b| started.elapsed() > b);
        let data = match DataValue::from_str(&self.text, &self.arena) {
            Ok(d) => &*self.arena.alloc(d),
            Err(e) => {
                // Unreachable for a payload that was JSON; fail closed anyway.
                let why = format!("the payload could not be read: {e}");
                return Some(
                    filters
                        .iter()
                        .map(|f| match f {
                            None => Outcome::Matched(true),
                            Some(_) => Outcome::Failed(why.clone()),
                        })
                        .collect(),
                );
            }
        };
        filters
            .iter()
            .map(|f| match f {
                None => Some(Outcome::Matched(true)),
                Some(Filter { logic: Err(why) }) => Some(Outcome::Failed(why.clone())),
                Some(Filter { logic: Ok(_) }) if over() => None,
                Some(Filter { logic: Ok(logic) }) => {
                    Some(match ENGINE.evaluate(logic, data, &self.arena) {
                        Ok(v) => Outcome::Matched(ENGINE.truthy(v)),
                        Err(e) => Outcome::Failed(e.to_string()),
                    })
                }
            })
            .collect()
    }
}

/// Evaluates one stored filter (as `channels.filter` holds it, see [`Filter::stored`]) against
/// one message.
pub fn test(rule: &Value, event_type: Option<&str>, payload: &str) -> Outcome {
    let filter = Filter::stored(&rule.to_string());
    Document::new(event_type, payload)
        .evaluate(&[Some(&filter)])
        .remove(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field_of(r: Result<Filter>) -> (&'static str, String) {
        match r {
            Err(Error::Invalid { field, message }) => (field, message),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn payload_and_event_type_are_both_readable() {
        let f = json!({"and": [
            {"==": [{"var": "event_type"}, "invoice.paid"]},
            {">": [{"var": "payload.amount"}, 100]}
        ]});
        let t = |et, p| test(&f, Some(et), p).matches();
        assert!(t("invoice.paid", r#"{"amount": 150}"#));
        assert!(!t("invoice.paid", r#"{"amount": 50}"#));
        assert!(!t("invoice.created", r#"{"amount": 150}"#));
        assert!(!t("invoice.paid", r#"{}"#));
    }

    #[test]
    fn iteration_and_strings_work() {
        let f = json!({"some": [{"var": "payload.items"}, {"==": [{"var": "sku"}, "X-1"]}]});
        assert!(test(
            &f,
            Some("a"),
            r#"{"items": [{"sku": "A"}, {"sku": "X-1"}]}"#
        )
        .matches());
        assert!(!test(&f, Some("a"), r#"{"items": [{"sku": "A"}]}"#).matches());
        let prefix = json!({"==": [{"substr": [{"var": "event_type"}, 0, 8]}, "invoice."]});
        assert!(test(&prefix, Some("invoice.paid"), "1").matches());
        assert!(!test(&prefix, Some("order.paid"), "1").matches());
        let inside = json!({"in": ["urgent", {"var": "payload.subject"}]});
        assert!(test(&inside, Some("a"), r#"{"subject": "an urgent one"}"#).matches());
    }

    #[test]
    fn bad_filters_are_refused_naming_the_reason() {
        for (bad, says) in [
            (json!(true), "must be a JSON Logic operation"),
            (json!({"regex": ["a", "b"]}), "unknown operator \"regex\""),
            (json!({"log": [1]}), "unknown operator \"log\""),
            (json!({"==": [1, 1], "!=": [1, 2]}), "exactly one key"),
            (json!({"==": [{}, 1]}), "exactly one key"),
            (json!({"in": ["a", "x".repeat(5000)]}), "at most 4096"),
        ] {
            let (field, message) = field_of(check(&bad));
            assert_eq!(field, "filter");
            assert!(message.contains(says), "{bad}: {message}");
        }
        let mut deep = json!({"var": "x"});
        for _ in 0..MAX_DEPTH {
            deep = json!({"!": [deep]});
        }
        assert!(field_of(check(&deep)).1.contains("levels deep"));
        let many = json!({"or": vec![json!(1); MAX_NODES]});
        assert!(field_of(check(&many)).1.contains("JSON values"));
    }

    #[test]
    fn nested_iteration_and_value_builders_are_refused() {
        let nested = json!({"some": [{"var": "payload.xs"},
            {"some": [{"var": "x"}, {"==": [{"var": ""}, -1]}]}]});
        assert!(field_of(check(&nested)).1.contains("may not be nested"));
        let in_source = json!({"all": [{"some": [[1], true]}, true]});
        assert!(field_of(check(&in_source)).1.contains("may not be nested"));
        for op in ["map", "filter", "reduce", "merge", "cat"] {
            let bad = json!({ op: [[1], [2]] });
            assert!(field_of(check(&bad)).1.contains("unknown operator"), "{op}");
        }
    }

    /// The cost bound's premise (module docs, "Evaluation cost"): an iterator's predicate reads
    /// only the current item (`var` has no way up to the document in this library's JSON Logic),
    /// so predicate runs over all items read the array once in all, not the document per item.
    #[test]
    fn an_iterators_predicate_reads_only_its_item() {
        let outer = json!({"some": [{"var": "payload.items"},
            {"==": [{"var": "payload.x"}, 1]}]});
        assert!(check(&outer).is_ok());
        let doc = r#"{"items": [{"a": 1}, {"a": 2}], "x": 1}"#;
        assert!(
            !test(&outer, Some("a"), doc).matches(),
            "the predicate saw the document"
        );
        let own = json!({"some": [{"var": "payload.items"}, {"==": [{"var": "a"}, 2]}]});
        assert!(test(&own, Some("a"), doc).matches());
    }

    #[test]
    fn a_failing_evaluation_does_not_match() {
        let f = json!({">": [{"+": [{"var": "payload.s"}, 1]}, 0]});
        assert!(matches!(
            test(&f, Some("a"), r#"{"s": "x"}"#),
            Outcome::Failed(_)
        ));
        assert!(test(&f, Some("a"), r#"{"s": 1}"#).matches());
    }

    #[test]
    fn a_spent_budget_stops_the_evaluations() {
        let f = check(&json!({"==": [{"var": "payload"}, 1]})).unwrap();
        let doc = Document::new(Some("a"), "1");
        let many: Vec<Option<&Filter>> = (0..1000).map(|_| Some(&f)).collect();
        let zero = std::time::Duration::ZERO;
        // Channels without a filter cost nothing and need no budget.
        assert_eq!(
            doc.evaluate_within(&[None, None], Some(zero))
                .unwrap()
                .len(),
            2
        );
        // With no time at all, no filter is evaluated.
        assert!(doc.evaluate_within(&many, Some(zero)).is_none());
        assert!(doc.evaluate_within(&many, Some(FANOUT_BUDGET)).is_some());
    }

    #[test]
    fn a_document_is_shared_by_many_filters() {
        let paid = check(&json!({"==": [{"var": "payload.status"}, "paid"]})).unwrap();
        let big = check(&json!({">": [{"var": "payload.amount"}, 10]})).unwrap();
        let doc = Document::new(Some("invoice.paid"), r#"{"status": "paid", "amount": 5}"#);
        let out = doc.evaluate(&[Some(&paid), None, Some(&big)]);
        assert_eq!(
            out,
            vec![
                Outcome::Matched(true),
                Outcome::Matched(true),
                Outcome::Matched(false)
            ]
        );
    }
}

/// By-hand measurements for BENCHMARKS.md ("Payload filters on a fan-out"): the worst
/// evaluations the bounds allow, on a payload of 256 KiB (`api.max_payload_bytes`). Run with
/// `cargo test -p breakwater-core --lib filters::cost -- --ignored --nocapture`.
#[cfg(test)]
mod cost {
    use super::*;
    use serde_json::json;

    fn median_ms(filter: &Value, payload: &str) -> f64 {
        let f = check(filter).expect("within the bounds");
        let mut times: Vec<f64> = (0..11)
            .map(|_| {
                let doc = Document::new(Some("a.b"), payload);
                let t = std::time::Instant::now();
                let out = doc.evaluate(&[Some(&f)]);
                let took = t.elapsed().as_secs_f64() * 1000.0;
                assert!(!matches!(out[0], Outcome::Failed(_)), "{:?}", out[0]);
                took
            })
            .collect();
        times.sort_by(f64::total_cmp);
        times[5]
    }

    #[test]
    #[ignore = "a measurement, not a check"]
    fn worst_case_evaluations() {
        // 50 substring searches for absent needles over one 256 KiB string (252 JSON values).
        let searches: Vec<Value> = (0..50)
            .map(|i| json!({"in": [format!("absent-{i}"), {"var": "payload.s"}]}))
            .collect();
        let big_string = json!({ "s": "ab".repeat(131_000) }).to_string();
        println!(
            "50 x `in` over a 256 KiB string: median {:.1} ms per evaluation",
            median_ms(&json!({ "or": searches }), &big_string)
        );
        // `some` over 40 000 items, a predicate of ~250 values, none matching.
        let checks: Vec<Value> = (0..49)
            .map(|i| json!({"==": [{"var": "k"}, format!("v{i}")]}))
            .collect();
        let items: Vec<Value> = (0..40_000).map(|i| json!({ "k": i })).collect();
        let big_array = json!({ "items": items }).to_string();
        // `missing` with its paths read from the payload: one lookup per path, each in an
        // object of as many keys.
        let n = 6_000;
        let obj: serde_json::Map<String, Value> =
            (0..n).map(|i| (format!("key-{i:08}"), json!(0))).collect();
        let paths: Vec<String> = (0..n)
            .map(|i| format!("payload.o.key-{:08}", n - 1 - i))
            .collect();
        let lookups = json!({ "o": obj, "p": paths }).to_string();
        println!(
            "`missing` of {n} paths from the payload in an object of {n} keys: median {:.1} ms per evaluation ({} KiB payload)",
            median_ms(&json!({"!": [{"missing": {"var": "payload.p"}}]}), &lookups),
            lookups.len() / 1024
        );
        println!(
            "`some` over 40 000 items with a 49-comparison predicate: median {:.1} ms per evaluation ({} KiB payload)",
            median_ms(
                &json!({"some": [{"var": "payload.items"}, {"or": checks}]}),
                &big_array
            ),
            big_array.len() / 1024
        );
    }
}
