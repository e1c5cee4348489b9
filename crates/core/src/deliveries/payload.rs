//! The one rule a payload's JSON text must meet beyond being well formed: it reads back as it
//! was sent. The text is stored and signed as given (a `RawValue`), while reads of the delivery
//! go through `jsonb`, which keeps the last of two equal keys; and a string with a lone UTF-16
//! surrogate escape (`"\udc00"`) is no Unicode text at all, so strict receivers refuse it.

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// Checks `text` (well-formed JSON): no object holds the same key twice (compared after
/// unescaping, so `"a"` and `"\u0061"` are the same key) and no string or key holds a lone
/// surrogate escape. Errors: what is wrong; a duplicate key names the JSON pointer (RFC 6901)
/// of its object, e.g. `duplicate key "a" in the object at /items/0`, a lone surrogate is
/// serde_json's message with its line and column.
pub fn check_payload_text(text: &str) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_str(text);
    de::DeserializeSeed::deserialize(Checked { parent: None }, &mut de).map_err(|e| e.to_string())
}

/// One step from a value to one inside it.
#[derive(Clone, Copy)]
enum Step<'a> {
    Index(usize),
    Key(&'a str),
}

/// A JSON value walked for [`check_payload_text`]: its container and the step from it (none
/// for the whole text). The pointer is only spelled out for an error, so the walk allocates
/// nothing per value but each object's keys.
#[derive(Clone, Copy)]
struct Checked<'a> {
    parent: Option<(&'a Checked<'a>, Step<'a>)>,
}

impl Checked<'_> {
    /// Its JSON pointer (RFC 6901: `~` as `~0`, `/` as `~1`); `/` for the whole text.
    fn pointer(&self) -> String {
        let mut steps = Vec::new();
        let mut at = self;
        while let Some((parent, step)) = &at.parent {
            steps.push(match step {
                Step::Index(i) => i.to_string(),
                Step::Key(k) => k.replace('~', "~0").replace('/', "~1"),
            });
            at = parent;
        }
        if steps.is_empty() {
            return "/".to_string();
        }
        steps.iter().rev().map(|s| format!("/{s}")).collect()
    }
}

impl<'de> de::DeserializeSeed<'de> for Checked<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Checked<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    // serde_json has decoded the string's escapes to reach here: a lone surrogate is an error
    // before this is called.
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let child = Checked {
                parent: Some((&self, Step::Index(i))),
            };
            if seq.next_element_seed(child)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                let key = serde_json::Value::String(key);
                return Err(de::Error::custom(format!(
                    "duplicate key {key} in the object at {}",
                    self.pointer()
                )));
            }
            map.next_value_seed(Checked {
                parent: Some((&self, Step::Key(&key))),
            })?;
            seen.insert(key);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_with_equal_keys_or_lone_surrogates_is_refused_and_says_where() {
        for ok in [
            r#"{"a":1,"b":{"a":2},"c":[{"a":1},{"a":1}]}"#,
            r#""text""#,
            r#"[1, 2.5, -3, true, null, "\ud83d\ude00"]"#,
            r#"{"a/b":{"x":1},"a~b":{"x":2}}"#,
        ] {
            assert_eq!(check_payload_text(ok), Ok(()), "{ok}");
        }
        let err = |text: &str| check_payload_text(text).unwrap_err();
        assert!(err(r#"{"a":1,"a":2}"#).starts_with(r#"duplicate key "a" in the object at /"#));
        assert!(err(r#"{"items":[{"k":1},{"k":1,"\u006b":2}]}"#)
            .starts_with(r#"duplicate key "k" in the object at /items/1"#));
        assert!(err(r#"{"x":{"a/b":1,"a/b":2}}"#).contains("at /x"));
        assert!(
            err(r#"{"s":"\udc00"}"#).contains("surrogate"),
            "{}",
            err(r#"{"s":"\udc00"}"#)
        );
        // A lone leading surrogate: serde_json says "unexpected end of hex escape".
        assert!(check_payload_text(r#"{"\ud800":1}"#).is_err());
    }
}
