//! Typed, lenient views of a server's JSON events.
//!
//! A stream event read into a `serde_json::Value` allocates every key and
//! every string of it, and a map node per object: most of an adapter's
//! time per text delta. Read into a struct of these types instead, it
//! borrows its strings from the event's text and skips the fields nobody
//! reads, without allocating.
//!
//! Each type is as lenient as looking a field up in a `Value` was: a field
//! of the wrong type reads as absent (a number where text is expected is
//! no text), never as a failed event. What still fails an event: text that
//! is not JSON, and an object that names one of the fields read twice
//! (which of the two a server meant is anyone's guess).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// `text` read as the object `T`: `None` when it is not JSON, not an
/// object, or names one of `T`'s fields twice.
pub fn object<'a, T: Deserialize<'a>>(text: &'a str) -> Option<T> {
    moat_guest::serde_json::from_str::<Object<T>>(text)
        .ok()
        .and_then(|object| object.0)
}

/// A JSON string, or nothing when the value is of another type.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Text<'a>(pub Option<Cow<'a, str>>);

impl Text<'_> {
    /// The text, if the value was a string.
    pub fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        lenient::<Self, D>(deserializer).map(Option::unwrap_or_default)
    }
}

impl<'de: 'a, 'a> Wanted<'de> for Text<'a> {
    fn borrowed_str(v: &'de str) -> Option<Self> {
        Some(Text(Some(Cow::Borrowed(v))))
    }
    fn str(v: &str) -> Option<Self> {
        Some(Text(Some(Cow::Owned(v.to_owned()))))
    }
}

/// A JSON number that is a whole number from 0 to `u64::MAX`, or nothing.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Count(pub Option<u64>);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        lenient::<Self, D>(deserializer).map(Option::unwrap_or_default)
    }
}

impl Wanted<'_> for Count {
    fn u64(v: u64) -> Option<Self> {
        Some(Count(Some(v)))
    }
    fn i64(v: i64) -> Option<Self> {
        u64::try_from(v).ok().map(|v| Count(Some(v)))
    }
}

/// A JSON object read as `T`, or nothing when the value is not an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object<T>(pub Option<T>);

impl<T> Default for Object<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        lenient::<Self, D>(deserializer).map(Option::unwrap_or_default)
    }
}

impl<'de, T: Deserialize<'de>> Wanted<'de> for Object<T> {
    fn map<A: MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|t| Some(Object(Some(t))))
    }
}

/// A JSON array of `T`, or nothing when the value is not an array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct List<T>(pub Option<Vec<T>>);

impl<T> Default for List<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        lenient::<Self, D>(deserializer).map(Option::unwrap_or_default)
    }
}

impl<'de, T: Deserialize<'de>> Wanted<'de> for List<T> {
    fn seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Option<Self>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Some(List(Some(items))))
    }
}

/// What a lenient type takes from the JSON value it is given; every other
/// kind of value is read past and makes it absent (`None`).
trait Wanted<'de>: Sized {
    fn borrowed_str(v: &'de str) -> Option<Self> {
        Self::str(v)
    }
    fn str(_: &str) -> Option<Self> {
        None
    }
    fn u64(_: u64) -> Option<Self> {
        None
    }
    fn i64(_: i64) -> Option<Self> {
        None
    }
    fn map<A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Option<Self>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// Reads any JSON value, as `W` wants it.
fn lenient<'de, W: Wanted<'de>, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<W>, D::Error> {
    deserializer.deserialize_any(Lenient::<W>(PhantomData))
}

struct Lenient<W>(PhantomData<W>);

impl<'de, W: Wanted<'de>> Visitor<'de> for Lenient<W> {
    type Value = Option<W>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(W::borrowed_str(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(W::str(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(W::u64(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(W::i64(v))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        W::map(map)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        W::seq(seq)
    }
}

/// For a field whose mere presence counts: any value, `null` included,
/// is `Some` (with `#[serde(default, deserialize_with = "present")]`).
pub fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests;
