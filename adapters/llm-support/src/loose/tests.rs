use moat_guest::json::Value;
use moat_guest::serde_json;
use serde::Deserialize;

use super::*;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Sample<'a> {
    #[serde(borrow)]
    name: Text<'a>,
    count: Count,
    #[serde(borrow)]
    inner: Object<Inner<'a>>,
    #[serde(borrow)]
    items: List<Object<Inner<'a>>>,
    #[serde(deserialize_with = "present")]
    flag: Option<Value>,
}

#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
struct Inner<'a> {
    #[serde(borrow)]
    text: Text<'a>,
}

fn sample(json: &str) -> Sample<'_> {
    serde_json::from_str(json).expect("a sample")
}

#[test]
fn fields_of_the_expected_type_are_read_and_borrow_their_text() {
    let json = r#"{"name":"tok","count":7,"inner":{"text":"a\nb"},"items":[{"text":"x"},3,{"text":1}],"flag":null,"other":[1,{"deep":[]}]}"#;
    let s = sample(json);
    assert!(matches!(s.name.0, Some(Cow::Borrowed("tok"))));
    assert_eq!(s.count, Count(Some(7)));
    // An escape makes it owned, with the escape decoded.
    assert_eq!(
        s.inner.0.map(|i| i.text.get().map(str::to_owned)),
        Some(Some("a\nb".into()))
    );
    let items = s.items.0.expect("a list");
    assert_eq!(items.len(), 3);
    assert_eq!(items[0].0.as_ref().and_then(|i| i.text.get()), Some("x"));
    assert_eq!(items[1].0, None, "not an object");
    assert_eq!(
        items[2].0.as_ref().map(|i| i.text.get()),
        Some(None),
        "not text"
    );
    assert_eq!(s.flag, Some(Value::Null), "present, though null");
}

#[test]
fn a_field_of_another_type_reads_as_absent() {
    for json in [
        r#"{"name":1,"count":"7","inner":[1,2],"items":{"a":1}}"#,
        r#"{"name":{"a":[1]},"count":-1,"inner":"x","items":"y"}"#,
        r#"{"name":[],"count":1.5,"inner":true,"items":null}"#,
        r#"{"name":null,"count":null,"inner":null,"items":false}"#,
        "{}",
    ] {
        let s = sample(json);
        assert_eq!(s.name.get(), None, "{json}");
        assert_eq!(s.count.0, None, "{json}");
        assert!(s.inner.0.is_none(), "{json}");
        assert!(s.items.0.is_none(), "{json}");
        assert_eq!(s.flag, None, "{json}: absent");
    }
    assert_eq!(
        sample(r#"{"count":18446744073709551615}"#).count.0,
        Some(u64::MAX)
    );
}

#[test]
fn only_broken_json_or_a_field_given_twice_fails() {
    assert!(serde_json::from_str::<Sample>(r#"{"name":"a","name":"b"}"#).is_err());
    assert!(serde_json::from_str::<Sample>(r#"{"name":"a""#).is_err());
    assert!(serde_json::from_str::<Sample>(r#"{"other":1,"other":2}"#).is_ok());
    // At the top, a value that is not an object is no object.
    let top: Object<Sample> = serde_json::from_str("[1,2]").expect("JSON");
    assert!(top.0.is_none());
    assert!(object::<Sample>("[1,2]").is_none());
    assert!(object::<Sample>("{broken").is_none());
    assert!(object::<Sample>(r#"{"name":"a","name":"b"}"#).is_none());
    let one = object::<Sample>(r#"{"name":"a"}"#).expect("an object");
    assert_eq!(one.name.get(), Some("a"));
}
