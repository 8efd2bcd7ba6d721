//! A valid component that is not a moat adapter: it exports a function of
//! its own. The host must refuse it at load, naming the export.

wit_bindgen::generate!({
    inline: "
        package testing:other;
        world other {
            export greet: func() -> string;
        }
    ",
});

struct Other;

impl Guest for Other {
    fn greet() -> String {
        "hello".to_string()
    }
}

export!(Other);
