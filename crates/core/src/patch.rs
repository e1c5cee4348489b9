//! The two shapes of a field in a `PATCH` body (RFC 7396-style merge semantics: an absent field
//! leaves the value alone), as serde deserializers for `#[serde(default, deserialize_with = …)]`.

use serde::{Deserialize, Deserializer};

/// A field that may be absent (`None`: unchanged) but not `null`, because it has no "none" to
/// set: a `null` is a type error (a 422 `invalid_body` naming the field in the API), never
/// silently ignored. Use with `#[serde(default, deserialize_with = "…::not_null")]` and a
/// non-null `value_type` in the schema.
pub fn not_null<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// A field that may be absent (`None`: unchanged), `null` (`Some(None)`: cleared back to its
/// default) or a value (`Some(Some(v))`).
pub fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}
