//! How to reach the cluster: server URLs, credentials and TLS, and how new
//! streams and buckets are made. Credentials come from a file or the
//! environment, never from a URL on a command line (where `ps` and shell
//! history would show them).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::ClusterError;

/// Environment variable naming a credentials file (see [`Auth`]).
pub const AUTH_FILE_ENV: &str = "MOAT_NATS_AUTH";
/// Environment variable holding a token.
pub const TOKEN_ENV: &str = "MOAT_NATS_TOKEN";
/// Environment variables holding a user and password.
pub const USER_ENV: &str = "MOAT_NATS_USER";
/// See [`USER_ENV`].
pub const PASSWORD_ENV: &str = "MOAT_NATS_PASSWORD";
/// Environment variable holding an nkey seed.
pub const NKEY_ENV: &str = "MOAT_NATS_NKEY";
/// Environment variable naming a NATS `.creds` file (JWT and nkey).
pub const CREDS_ENV: &str = "MOAT_NATS_CREDS";

/// How long a worker may go without a heartbeat before its runs are lost.
pub const DEFAULT_WORKER_TIMEOUT: Duration = Duration::from_secs(15);

/// How a client proves who it is. At most one kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Auth {
    /// No credentials: the server lets anyone in.
    #[default]
    None,
    /// A token.
    Token(String),
    /// A user and password.
    UserPassword {
        /// The user.
        user: String,
        /// The password.
        password: String,
    },
    /// An nkey seed (`SU…`).
    Nkey(String),
    /// A `.creds` file (decentralized auth: JWT and nkey seed).
    CredsFile(PathBuf),
}

/// TLS for the connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    /// Refuse a server that does not speak TLS.
    #[serde(default)]
    pub required: bool,
    /// PEM file of the certificate authorities to trust.
    pub ca: Option<PathBuf>,
    /// PEM file of this client's certificate (with `key`).
    pub cert: Option<PathBuf>,
    /// PEM file of this client's private key (with `cert`).
    pub key: Option<PathBuf>,
}

/// Everything needed to connect and set the cluster up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Server URLs (`nats://host:port` or `tls://host:port`).
    pub urls: Vec<String>,
    /// Credentials.
    pub auth: Auth,
    /// TLS.
    pub tls: Tls,
    /// Copies of each stream and bucket this client makes (1, or 3 on a
    /// three-node cluster). Existing ones are used as they are.
    pub replicas: usize,
    /// A worker lost for this long has lost its runs. Takes effect when
    /// the workers' bucket is made.
    pub worker_timeout: Duration,
}

impl Settings {
    /// Settings for `urls` (comma-separated, as `--nats` takes them), with
    /// credentials and TLS from the file `auth_file` or else the
    /// environment.
    pub fn new(urls: &str, auth_file: Option<&Path>) -> Result<Self, ClusterError> {
        let urls = parse_urls(urls)?;
        let file = match auth_file {
            Some(path) => Some(path.to_path_buf()),
            None => std::env::var_os(AUTH_FILE_ENV).map(PathBuf::from),
        };
        let (auth, tls) = match file {
            Some(path) => AuthFile::load(&path)?.into_parts(&path)?,
            None => (auth_from_env()?, Tls::default()),
        };
        Ok(Self {
            urls,
            auth,
            tls,
            replicas: 1,
            worker_timeout: DEFAULT_WORKER_TIMEOUT,
        })
    }
}

/// The URLs of `text`, each checked: a scheme moat knows, a host, and no
/// credentials.
fn parse_urls(text: &str) -> Result<Vec<String>, ClusterError> {
    let urls: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(str::to_owned)
        .collect();
    if urls.is_empty() {
        return Err(ClusterError::Settings(
            "no NATS server given: pass --nats nats://HOST:PORT[,…]".into(),
        ));
    }
    for url in &urls {
        let rest = url
            .strip_prefix("nats://")
            .or_else(|| url.strip_prefix("tls://"))
            .unwrap_or(url);
        if rest.contains('@') {
            return Err(ClusterError::Settings(format!(
                "the NATS URL {} carries credentials, which a command line shows to every user of the machine: put them in a file named by --nats-auth or ${AUTH_FILE_ENV} (docs/cluster.md)",
                redacted(url)
            )));
        }
        if url.contains("://") && !url.starts_with("nats://") && !url.starts_with("tls://") {
            return Err(ClusterError::Settings(format!(
                "the NATS URL {url} has a scheme moat does not know: use nats://HOST:PORT or tls://HOST:PORT"
            )));
        }
        if rest.is_empty() || rest.starts_with(':') {
            return Err(ClusterError::Settings(format!(
                "the NATS URL {url} names no host: use nats://HOST:PORT"
            )));
        }
    }
    Ok(urls)
}

/// `url` with anything before an `@` hidden.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://…@{}", &url[..scheme], &url[at + 1..])
        }
        (None, Some(at)) => format!("…@{}", &url[at + 1..]),
        _ => url.to_owned(),
    }
}

/// Credentials from the environment, when any are set.
fn auth_from_env() -> Result<Auth, ClusterError> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut found = Vec::new();
    if let Some(token) = var(TOKEN_ENV) {
        found.push(Auth::Token(token));
    }
    match (var(USER_ENV), var(PASSWORD_ENV)) {
        (Some(user), Some(password)) => found.push(Auth::UserPassword { user, password }),
        (None, None) => {}
        _ => {
            return Err(ClusterError::Settings(format!(
                "${USER_ENV} and ${PASSWORD_ENV} go together: set both or neither"
            )));
        }
    }
    if let Some(seed) = var(NKEY_ENV) {
        found.push(Auth::Nkey(seed));
    }
    if let Some(path) = var(CREDS_ENV) {
        found.push(Auth::CredsFile(PathBuf::from(path)));
    }
    one_auth(found, "the environment")
}

fn one_auth(mut found: Vec<Auth>, place: &str) -> Result<Auth, ClusterError> {
    match found.len() {
        0 => Ok(Auth::None),
        1 => Ok(found.remove(0)),
        _ => Err(ClusterError::Settings(format!(
            "{place} gives more than one kind of NATS credentials: keep one of token, user/password, nkey, creds"
        ))),
    }
}

/// The credentials file (TOML):
///
/// ```toml
/// token = "…"                 # or user + password, or nkey, or creds
/// [tls]
/// ca = "/etc/moat/ca.pem"
/// ```
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthFile {
    token: Option<String>,
    user: Option<String>,
    password: Option<String>,
    nkey: Option<String>,
    creds: Option<PathBuf>,
    #[serde(default)]
    tls: Tls,
}

impl AuthFile {
    fn load(path: &Path) -> Result<Self, ClusterError> {
        let shown = path.display();
        let metadata = std::fs::metadata(path).map_err(|e| {
            ClusterError::Settings(format!(
                "cannot read the NATS credentials file {shown}: {e}"
            ))
        })?;
        refuse_readable_by_others(path, &metadata)?;
        let text = std::fs::read_to_string(path).map_err(|e| {
            ClusterError::Settings(format!(
                "cannot read the NATS credentials file {shown}: {e}"
            ))
        })?;
        toml::from_str(&text).map_err(|e| {
            ClusterError::Settings(format!(
                "the NATS credentials file {shown}: {}",
                e.message()
            ))
        })
    }

    fn into_parts(self, path: &Path) -> Result<(Auth, Tls), ClusterError> {
        let mut found = Vec::new();
        if let Some(token) = self.token {
            found.push(Auth::Token(token));
        }
        match (self.user, self.password) {
            (Some(user), Some(password)) => found.push(Auth::UserPassword { user, password }),
            (None, None) => {}
            _ => {
                return Err(ClusterError::Settings(format!(
                    "the NATS credentials file {}: user and password go together",
                    path.display()
                )));
            }
        }
        if let Some(seed) = self.nkey {
            found.push(Auth::Nkey(seed));
        }
        if let Some(creds) = self.creds {
            let creds = match path.parent() {
                Some(dir) if creds.is_relative() => dir.join(creds),
                _ => creds,
            };
            found.push(Auth::CredsFile(creds));
        }
        let place = format!("the NATS credentials file {}", path.display());
        if self.tls.cert.is_some() != self.tls.key.is_some() {
            return Err(ClusterError::Settings(format!(
                "{place}: tls.cert and tls.key go together"
            )));
        }
        Ok((one_auth(found, &place)?, self.tls))
    }
}

/// Secrets readable by other users are refused, as ssh refuses such keys.
fn refuse_readable_by_others(
    path: &Path,
    metadata: &std::fs::Metadata,
) -> Result<(), ClusterError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = metadata.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(ClusterError::Settings(format!(
            "the NATS credentials file {} can be read by other users (mode {:o}): chmod 600 it",
            path.display(),
            mode & 0o777
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_credentials_are_refused_without_showing_them() {
        let error = parse_urls("nats://alice:s3cret@10.0.0.1:4222").unwrap_err();
        let text = error.to_string();
        assert!(text.contains("--nats-auth"), "{text}");
        assert!(
            !text.contains("s3cret") && !text.contains("alice"),
            "{text}"
        );
        assert!(parse_urls("nats://tok@host:4222").is_err());
    }

    #[test]
    fn urls_are_split_and_checked() {
        assert_eq!(
            parse_urls("nats://a:1, tls://b:2").unwrap(),
            vec!["nats://a:1", "tls://b:2"]
        );
        assert!(parse_urls("").is_err());
        assert!(parse_urls("http://a:1").is_err());
        assert!(parse_urls("nats://:4222").is_err());
        assert_eq!(
            parse_urls("localhost:4222").unwrap(),
            vec!["localhost:4222"]
        );
    }

    #[test]
    fn a_credentials_file_gives_one_kind_and_must_be_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.toml");
        std::fs::write(&path, "token = \"t0k\"\n[tls]\nrequired = true\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = Settings::new("nats://h:1", Some(&path)).unwrap_err();
        assert!(error.to_string().contains("chmod 600"), "{error}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let settings = Settings::new("nats://h:1", Some(&path)).unwrap();
        assert_eq!(settings.auth, Auth::Token("t0k".into()));
        assert!(settings.tls.required);

        std::fs::write(&path, "token = \"a\"\nnkey = \"SUX\"\n").unwrap();
        let error = Settings::new("nats://h:1", Some(&path)).unwrap_err();
        assert!(error.to_string().contains("more than one kind"), "{error}");
        std::fs::write(&path, "user = \"a\"\n").unwrap();
        assert!(Settings::new("nats://h:1", Some(&path)).is_err());
        std::fs::write(&path, "tokn = \"a\"\n").unwrap();
        let error = Settings::new("nats://h:1", Some(&path)).unwrap_err();
        assert!(error.to_string().contains("tokn"), "{error}");
    }
}
