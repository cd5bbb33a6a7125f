//! JSON as the ledger reads it: `key: value` entries for identifier keys,
//! strings read unescaped.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;

use super::LedgerEntry;
use super::lists::{ID_KEY_CAMEL, ID_KEY_ENDINGS, ID_KEYS, SECRET_NAMES};
use super::shape::{self, Context};
use super::spans::{Hit, matched, usable};
use crate::message::{Key, KeyVisitor};
use crate::quick::Quick;

/// Whether a JSON key (and the same, lowercase) names an identifier (its
/// string values enter the ledger as `key: value`).
fn is_identifier_key(key: &str, lower: &str) -> bool {
    ID_KEYS.contains(&lower)
        || ID_KEY_ENDINGS.iter().any(|s| lower.ends_with(s))
        || ID_KEY_CAMEL
            .iter()
            .any(|s| key.len() > s.len() && key.ends_with(s))
}

/// Whether a key's string value is an entry: any value of an identifier
/// key, fit for a line; else a value that is one token whose shape,
/// raised by its place, says it is an identifier (`{"target": "QX7PLM"}`).
/// Never a value of a key that names a secret.
fn is_entry_value(key: &str, value: &str) -> bool {
    // (Most keys are lowercase already: copied only when not.)
    let lower = match key.bytes().any(|b| b.is_ascii_uppercase()) {
        true => std::borrow::Cow::Owned(key.to_ascii_lowercase()),
        false => std::borrow::Cow::Borrowed(key),
    };
    let secret = SECRET_NAMES.iter().any(|s| lower.contains(s));
    if secret || !usable(value) || shape::is_secret(value) || shape::is_structural(value) {
        return false;
    }
    is_identifier_key(key, &lower)
        || !value.contains(char::is_whitespace) && shape::strength(value, Context::Marked).is_some()
}

/// fraction of a [`serde_json::Value`] (no map, no copy of each string).
pub(super) enum Json<'t> {
    Str(Key<'t>),
    Arr(Vec<Json<'t>>),
    Obj(Vec<(Key<'t>, Json<'t>)>),
    Other,
}

impl<'de> serde::Deserialize<'de> for Json<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

/// Builds a [`Json`].
struct JsonVisitor;

impl<'de> serde::de::Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> std::result::Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_i64<E>(self, _: i64) -> std::result::Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_u64<E>(self, _: u64) -> std::result::Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_f64<E>(self, _: f64) -> std::result::Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_unit<E>(self) -> std::result::Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, s: &'de str) -> std::result::Result<Json<'de>, E> {
        KeyVisitor.visit_borrowed_str(s).map(Json::Str)
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> std::result::Result<Json<'de>, E> {
        KeyVisitor.visit_str(s).map(Json::Str)
    }

    fn visit_string<E: serde::de::Error>(self, s: String) -> std::result::Result<Json<'de>, E> {
        KeyVisitor.visit_string(s).map(Json::Str)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Json<'de>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Arr(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<Json<'de>, A::Error> {
        let mut members = Vec::new();
        while let Some(member) = map.next_entry()? {
            members.push(member);
        }
        Ok(Json::Obj(members))
    }
}

/// The JSON value of `text`, if it is one.
pub(super) fn parse_json(text: &str) -> Option<Json<'_>> {
    serde_json::from_str(text).ok()
}

/// Walks a JSON value, adding `key: value` for each identifier key with a
/// short, one-line string value. A key an object gives twice counts once,
/// in its first place with its last value (as `serde_json`'s map reads it).
pub(super) fn json_entries(value: &Json<'_>, out: &mut Vec<LedgerEntry>, values: &mut Set<String>) {
    match value {
        Json::Obj(members) => {
            let key_at = |i: usize| members[i].0.as_str();
            // Each key's first and last places (found by a map in a long object).
            let places: Option<std::collections::HashMap<&str, (usize, usize)>> =
                (members.len() > 16).then(|| {
                    let mut places = std::collections::HashMap::new();
                    for i in 0..members.len() {
                        (places.entry(key_at(i)))
                            .and_modify(|(_, last): &mut (usize, usize)| *last = i)
                            .or_insert((i, i));
                    }
                    places
                });
            for i in 0..members.len() {
                let key = key_at(i);
                let (first, last) = match &places {
                    Some(places) => places[key],
                    None => (
                        (0..i).find(|&j| key_at(j) == key).unwrap_or(i),
                        (i..members.len()).rev().find(|&j| key_at(j) == key).unwrap_or(i),
                    ),
                };
                if first != i {
                    continue;
                }
                match &members[last].1 {
                    Json::Str(s) if is_entry_value(key, s.as_str()) => {
                        let s = s.as_str();
                        out.push(format!("{key}: {s}").into());
                        values.insert(s.to_owned());
                    }
                    other => json_entries(other, out, values),
                }
            }
        }
        Json::Arr(items) => items.iter().for_each(|v| json_entries(v, out, values)),
        _ => {}
    }
}

/// Every string of `value`, keys and values, in the text's order, added
/// to `out`; whether one of them was written with an escape (`\\`, `\/`,
/// `\"`, `\u00e9`): only then does what they say differ from the text.
fn json_strings<'v>(value: &'v Json<'_>, out: &mut Vec<&'v str>) -> bool {
    let string = |s: &'v Key<'_>, out: &mut Vec<&'v str>| {
        out.push(s.as_str());
        matches!(s, Key::Owned(_))
    };
    match value {
        Json::Str(s) => string(s, out),
        Json::Arr(items) => items
            .iter()
            .fold(false, |escaped, v| json_strings(v, out) | escaped),
        Json::Obj(members) => (members.iter()).fold(false, |escaped, (key, v)| {
            let key = string(key, out);
            json_strings(v, out) | key | escaped
        }),
        Json::Other => false,
    }
}

/// The built-in patterns' identifiers in a JSON value whose strings have
/// escapes, read in each string as it says it (`C:\\srv\\a.log` is
/// `C:\srv\a.log`), none equal to one of `values` (its `key: value`
/// entries' values); `None` when no string has an escape (its text reads
/// the same).
pub(super) fn json_matched(value: &Json<'_>, values: &Set<String>) -> Option<Vec<Hit>> {
    let mut strings = Vec::new();
    if !json_strings(value, &mut strings) {
        return None;
    }
    let mut out = Vec::new();
    for s in strings {
        matched(s, &|found| values.contains(found), &mut out);
    }
    Some(out)
}

/// A set hashed with [`Quick`].
pub(super) type Set<T> = HashSet<T, BuildHasherDefault<Quick>>;

/// Every string inside `value`, keys and values, in order (as
/// [`json_strings`] reads a JSON text's).
pub(super) fn strings_in<'v>(value: &'v serde_json::Value, out: &mut Vec<&'v str>) {
    match value {
        serde_json::Value::String(s) => out.push(s),
        serde_json::Value::Array(items) => items.iter().for_each(|v| strings_in(v, out)),
        serde_json::Value::Object(map) => map.iter().for_each(|(key, v)| {
            out.push(key);
            strings_in(v, out);
        }),
        _ => {}
    }
}
