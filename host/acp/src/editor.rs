//! What a prompt's run needs of the editor it runs for: to send it
//! updates, to ask it things and to say who it is. The connection
//! ([`crate::serve`]) is one; the agent's methods take any.

use std::future::Future;

use serde_json::Value;

use crate::jsonrpc::RpcError;

/// The editor at the other end of a connection.
pub trait Editor: Send + Sync + 'static {
    /// Sends a notification; waits while the editor is behind.
    fn notify(&self, method: &str, params: Value) -> impl Future<Output = ()> + Send;

    /// Sends a request and waits for the editor's answer.
    fn request(
        &self,
        method: &str,
        params: Value,
    ) -> impl Future<Output = Result<Value, RpcError>> + Send;

    /// The editor's name, for the record of who answered.
    fn client_name(&self) -> String;
}
