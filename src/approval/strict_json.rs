//! JSON parsing that refuses a repeated key. serde_json keeps the last of two equal keys,
//! so `{"decision":"rejected","decision":"allowed-once"}` would read as a grant to
//! sandgate while a reviewer, a log viewer or another parser reads the first value. A
//! reply that can be read two ways is not an answer: it is refused whole, at any depth.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Why bytes are not one strict JSON value.
#[derive(Debug)]
pub enum StrictError {
    /// An object names a key twice; the message names it.
    RepeatedKey(String),
    /// Not JSON at all, or more than one value.
    Malformed(serde_json::Error),
}

impl std::fmt::Display for StrictError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StrictError::RepeatedKey(why) => f.write_str(why),
            StrictError::Malformed(e) => e.fmt(f),
        }
    }
}

/// Parses `bytes` as one JSON value; an object anywhere in it that names a key twice
/// (after unescaping, so `"a"` and `"\u0061"` are the same key) is an error.
pub fn from_slice(bytes: &[u8]) -> Result<Value, StrictError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = Strict::deserialize(&mut de).and_then(|Strict(value)| de.end().map(|()| value));
    parsed.map_err(|e| match e.classify() {
        // The visitor accepts every JSON type, so the only data error is its own.
        serde_json::error::Category::Data => StrictError::RepeatedKey(e.to_string()),
        _ => StrictError::Malformed(e),
    })
}

/// A `Value` built by a visitor that checks every object for repeated keys.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value without repeated keys")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // JSON has no NaN or infinity, so the conversion cannot lose a value.
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "the key {key:?} is repeated"
                )));
            }
            let Strict(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_is_refused_at_any_depth() {
        for text in [
            r#"{"decision":"rejected","decision":"allowed-once"}"#,
            r#"{"id":"a","id":"a"}"#,
            r#"{"a":{"b":1,"b":1}}"#,
            r#"{"a":[{"x":1},{"y":2,"y":3}]}"#,
            r#"[[[{"k":null,"k":null}]]]"#,
            r#"{"a":1,"\u0061":2}"#,
        ] {
            let err = from_slice(text.as_bytes()).err();
            assert!(
                matches!(&err, Some(StrictError::RepeatedKey(why)) if why.contains("repeated")),
                "{text}: {err:?}"
            );
        }
    }

    #[test]
    fn well_formed_json_reads_as_serde_json_reads_it() {
        for text in [
            r#"{"id":"abc","decision":"allowed-once"}"#,
            r#"{"a":{"b":1},"b":{"a":[1,2.5,-3,true,null,"x"]},"c":{}}"#,
            r#"[{"x":1},{"x":2}]"#,
            r#""just a string""#,
            "18446744073709551615",
            " {\"a\" : \"\\u00e9\\n\"} ",
        ] {
            let strict = from_slice(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e}"));
            let lenient: Value =
                serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(strict, lenient, "{text}");
        }
    }

    #[test]
    fn malformed_json_and_trailing_bytes_are_refused() {
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        for text in [
            "",
            "{",
            r#"{"a":1} x"#,
            r#"{"a":1}{"a":1}"#,
            "{'a':1}",
            &deep,
        ] {
            let err = from_slice(text.as_bytes()).err();
            assert!(
                matches!(err, Some(StrictError::Malformed(_))),
                "{text}: {err:?}"
            );
        }
    }
}
