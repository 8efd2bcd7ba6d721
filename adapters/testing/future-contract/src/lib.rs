//! A component built against a contract version this host does not
//! implement (moat:adapter@0.9.0). The host must refuse it at load, naming
//! both versions.

wit_bindgen::generate!({
    inline: "
        package moat:adapter@0.9.0;
        interface adapter {
            info: func() -> string;
        }
        world later {
            export adapter;
        }
    ",
});

struct Future;

impl exports::moat::adapter::adapter::Guest for Future {
    fn info() -> String {
        "from the future".to_string()
    }
}

export!(Future);
