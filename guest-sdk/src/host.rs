//! Services the host offers: the cooperative abort flag.
//!
//! On non-wasm targets (native unit tests of an adapter) there is no host:
//! the flag comes from [`testing::set_interrupted`] instead, so adapter
//! logic can be tested with a plain `cargo test`.

/// Whether the user asked the run to stop.
///
/// An adapter that sees `true` should stop its backend and end the run with
/// a `done` event of status [`DoneStatus::Interrupted`](crate::DoneStatus),
/// carrying a resume token when it has one. The host gives a short grace
/// period for this, then stops the component itself.
pub fn interrupted() -> bool {
    #[cfg(target_arch = "wasm32")]
    {
        crate::bindings::moat::adapter::host::interrupted()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        testing::INTERRUPTED.with(core::cell::Cell::get)
    }
}

/// Stand-ins for the host on native targets, for adapter unit tests.
#[cfg(not(target_arch = "wasm32"))]
pub mod testing {
    use core::cell::Cell;

    thread_local! {
        pub(crate) static INTERRUPTED: Cell<bool> = const { Cell::new(false) };
    }

    /// Sets what [`interrupted`](crate::interrupted) returns on this thread.
    pub fn set_interrupted(value: bool) {
        INTERRUPTED.with(|flag| flag.set(value));
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    #[test]
    fn the_native_flag_follows_set_interrupted() {
        assert!(!crate::interrupted());
        super::testing::set_interrupted(true);
        assert!(crate::interrupted());
        super::testing::set_interrupted(false);
        assert!(!crate::interrupted());
        // Logging has no host to reach natively and must not panic.
        crate::log::info("not delivered");
    }
}
