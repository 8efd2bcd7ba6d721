//! The adapter registry (ENG-001): adapters by name, in registration order.

use std::sync::Arc;

use super::adapter::Adapter;

/// Why an adapter could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Another adapter already holds the name.
    #[error("an adapter named `{name}` is already registered")]
    Duplicate {
        /// The name.
        name: String,
    },
    /// The adapter's `info().name` is empty.
    #[error("an adapter must have a non-empty name")]
    EmptyName,
}

/// Adapters keyed by their `info().name`, all run within the same kind of
/// scope `S` (see [`Adapter`]).
pub struct Registry<S = ()> {
    // A Vec keeps registration order for `list`; registries hold a handful
    // of adapters, so a linear lookup costs nothing worth a map.
    adapters: Vec<(String, Arc<dyn Adapter<S>>)>,
}

impl<S> Default for Registry<S> {
    fn default() -> Self {
        Self {
            adapters: Vec::new(),
        }
    }
}

impl<S> Clone for Registry<S> {
    fn clone(&self) -> Self {
        Self {
            adapters: self.adapters.clone(),
        }
    }
}

impl<S> std::fmt::Debug for Registry<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("adapters", &self.list())
            .finish()
    }
}

impl Registry {
    /// An empty registry of adapters that take no scope (native ones); see
    /// [`Registry::scoped`] for others.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<S> Registry<S> {
    /// An empty registry of adapters run within scopes of type `S`.
    pub fn scoped() -> Self {
        Self::default()
    }

    /// Adds `adapter` under its `info().name`; a taken name is an error.
    pub fn register(&mut self, adapter: Arc<dyn Adapter<S>>) -> Result<(), RegistryError> {
        let name = adapter.info().name.clone();
        if name.is_empty() {
            return Err(RegistryError::EmptyName);
        }
        if self.get(&name).is_some() {
            return Err(RegistryError::Duplicate { name });
        }
        self.adapters.push((name, adapter));
        Ok(())
    }

    /// The adapter registered as `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Adapter<S>>> {
        self.adapters
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, adapter)| Arc::clone(adapter))
    }

    /// The registered names, in registration order.
    pub fn list(&self) -> Vec<String> {
        self.adapters.iter().map(|(n, _)| n.clone()).collect()
    }

    /// Removes the adapter registered as `name`; whether there was one.
    pub fn unregister(&mut self, name: &str) -> bool {
        let before = self.adapters.len();
        self.adapters.retain(|(n, _)| n != name);
        self.adapters.len() != before
    }
}

#[cfg(test)]
mod tests {
    use futures::future::BoxFuture;

    use super::*;
    use crate::{AdapterInfo, AdapterSession, ErrorInfo, RunLimits, RunOptions, StartError};

    /// An adapter that only has a name: the registry never starts one.
    struct Named(AdapterInfo);

    impl Adapter for Named {
        fn info(&self) -> &AdapterInfo {
            &self.0
        }

        fn start<'a>(
            &'a self,
            _: &'a str,
            _: &'a RunOptions,
            _: &'a RunLimits,
            _: &'a (),
        ) -> BoxFuture<'a, Result<Box<dyn AdapterSession>, StartError>> {
            Box::pin(async {
                Err(StartError::refused(ErrorInfo {
                    code: None,
                    message: "never started".into(),
                    recoverable: false,
                }))
            })
        }
    }

    fn adapter(name: &str) -> Arc<dyn Adapter> {
        Arc::new(Named(AdapterInfo {
            name: name.into(),
            ..AdapterInfo::default()
        }))
    }

    #[test]
    fn eng_001_register_rejects_duplicate_names() {
        let mut registry = Registry::new();
        registry.register(adapter("a")).unwrap();
        let err = registry.register(adapter("a")).unwrap_err();
        assert_eq!(err, RegistryError::Duplicate { name: "a".into() });
        assert!(err.to_string().contains("`a`"));
        assert_eq!(registry.list(), ["a"]);
    }

    #[test]
    fn eng_001_register_rejects_an_empty_name() {
        let mut registry = Registry::new();
        assert_eq!(
            registry.register(adapter("")),
            Err(RegistryError::EmptyName)
        );
    }

    #[test]
    fn eng_001_get_returns_the_adapter_or_none() {
        let mut registry = Registry::new();
        let echo = adapter("e");
        registry.register(Arc::clone(&echo)).unwrap();
        let got = registry.get("e").unwrap();
        assert!(Arc::ptr_eq(&got, &echo));
        assert!(registry.get("missing").is_none());
    }

    #[test]
    fn eng_001_list_is_in_registration_order() {
        let mut registry = Registry::new();
        for name in ["zeta", "alpha", "mid"] {
            registry.register(adapter(name)).unwrap();
        }
        assert_eq!(registry.list(), ["zeta", "alpha", "mid"]);
    }

    #[test]
    fn eng_001_unregister_reports_whether_it_removed() {
        let mut registry = Registry::new();
        registry.register(adapter("a")).unwrap();
        registry.register(adapter("b")).unwrap();
        assert!(registry.unregister("a"));
        assert!(!registry.unregister("a"));
        assert!(registry.get("a").is_none());
        assert_eq!(registry.list(), ["b"]);
        // The name is free again.
        registry.register(adapter("a")).unwrap();
        assert_eq!(registry.list(), ["b", "a"]);
    }
}
