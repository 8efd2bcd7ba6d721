//! The network of the programs a run starts: only through moat.
//!
//! A run whose programs are contained gets, at its first program, a proxy
//! owned by the host ([`proxy`]) that applies the run's `--allow-net`
//! rules with the checks of a component's requests. The programs are told
//! of it (`HTTPS_PROXY` and the rest, [`RunEgress::proxy_env`]) and cannot
//! go around it. How that holds depends on what the kernel allows, found
//! once per process ([`NetworkContainment::detect`]):
//!
//! - [`NetworkContainment::Namespaces`]: the programs run in a network
//!   namespace of the run's own, whose only interface is a loopback with
//!   the proxy's socket on it ([`namespace`]), and in PID and mount
//!   namespaces of their own with a private `/proc`
//!   ([`crate::process`]'s isolation): no other process is visible;
//! - [`NetworkContainment::LandlockAndSeccomp`]: no namespace may be made
//!   here; Landlock lets the programs connect over TCP only to the proxy's
//!   port and bind none, and the seccomp filter refuses every other socket;
//! - [`NetworkContainment::Unavailable`]: neither; contained programs are
//!   not started.
//!
//! In the run's own namespace, the loopback is the programs': they may
//! serve on it (TCP and UDP) and reach what they serve, directly or
//! through the proxy (which looks there first for a loopback destination:
//! [`proxy`]), and moat makes their connections, a named Unix socket only
//! inside the run's write grants and private directory
//! ([`crate::process`]'s `connector`). In the
//! host's network they may bind nothing and open no Unix socket. Under
//! either mechanism, the seccomp filter refuses raw and packet sockets,
//! Unix datagram sockets and other families ([`crate::process`]'s
//! `seccomp`).

pub(crate) mod approvals;
pub(crate) mod namespace;
mod own_network;
pub(crate) mod proxy;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use landlock::{ABI, Access, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr};

pub(crate) use self::namespace::Namespaces;
pub use self::own_network::OwnNetwork;
pub(crate) use self::own_network::SocketSource;
pub use self::proxy::Policy;
use self::proxy::Proxy;

/// The variables that point a program at the run's proxy: the common
/// spellings, upper and lower case (curl reads only `http_proxy` in lower
/// case; Node and Go programs read either).
pub const PROXY_VARIABLES: [&str; 6] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// Variables that would send some requests around the proxy: cleared.
const NO_PROXY_VARIABLES: [&str; 2] = ["NO_PROXY", "no_proxy"];

/// How the network of a run's programs is held to its grants on this
/// machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkContainment {
    /// Network, PID and mount namespaces of the run's own: the programs
    /// see only a loopback with the proxy on it, and only their own
    /// processes.
    Namespaces,
    /// No namespace may be made here: Landlock's TCP rules (connect only to
    /// the proxy's port) and the seccomp filter.
    LandlockAndSeccomp,
    /// Neither is available: contained programs are not started.
    Unavailable,
}

impl NetworkContainment {
    /// What this machine allows, found once per process.
    pub fn detect() -> Self {
        static FOUND: OnceLock<NetworkContainment> = OnceLock::new();
        *FOUND.get_or_init(|| match namespace::create() {
            Ok(made) => {
                let _ = OWN_USER_NAMESPACE.set(made.user.is_some());
                // Kept for the first run that needs one: making it twice
                // would double the cost of a `moat run`.
                *PROBED.lock().unwrap_or_else(PoisonError::into_inner) = Some(made);
                Self::Namespaces
            }
            Err(error) => {
                tracing::info!("no network namespace for programs: {error}");
                if landlock_network() {
                    Self::LandlockAndSeccomp
                } else {
                    Self::Unavailable
                }
            }
        })
    }

    /// Whether each run's programs are in a user namespace of the run's own
    /// (where moat may not make a network namespace without one: a user
    /// who is not root): the processes counted against a limit there are
    /// the run's only.
    pub fn own_user_namespace(self) -> bool {
        self == Self::Namespaces && OWN_USER_NAMESPACE.get() == Some(&true)
    }

    /// Whether the programs have a loopback of the run's own, to serve on.
    pub fn own_loopback(self) -> bool {
        self == Self::Namespaces
    }

    /// A short name, for `moat inspect -o json` and the `init` event.
    pub fn name(self) -> &'static str {
        match self {
            Self::Namespaces => "namespaces",
            Self::LandlockAndSeccomp => "landlock+seccomp",
            Self::Unavailable => "unavailable",
        }
    }

    /// What holds, in a sentence.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Namespaces => {
                "network, PID and mount namespaces of the run's own: only moat's proxy is reachable, only the run's processes are visible; programs may serve on the run's own loopback (TCP and UDP) and use Unix sockets inside its write grants and private directory"
            }
            Self::LandlockAndSeccomp => {
                "Landlock TCP rules (connect only to moat's proxy) and a seccomp socket filter; no namespaces here, so programs may bind no port (the host's loopback is shared), open no Unix socket, and other processes' /proc entries stay visible"
            }
            Self::Unavailable => {
                "none: this kernel allows neither namespaces nor Landlock's network rules (ABI 4), so contained programs are not started; --no-contain runs them with your rights"
            }
        }
    }
}

/// Whether the namespace [`NetworkContainment::detect`] made needed a user
/// namespace of its own (as every run's will).
static OWN_USER_NAMESPACE: OnceLock<bool> = OnceLock::new();

/// The namespace [`NetworkContainment::detect`] made to find out, until a
/// run takes it.
static PROBED: Mutex<Option<namespace::RunNamespace>> = Mutex::new(None);

/// Whether Landlock here restricts TCP (ABI 4 and later).
fn landlock_network() -> bool {
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessNet::from_all(ABI::V4))
        .and_then(|ruleset| ruleset.create())
        .is_ok()
}

/// The proxy of one run's programs, and the namespace it listens in.
#[derive(Debug)]
pub(crate) struct RunEgress {
    namespaces: Option<Namespaces>,
    port: u16,
    /// The proxy's credential, when it listens on the host's loopback.
    token: Option<String>,
    _proxy: Proxy,
}

impl RunEgress {
    /// Starts the proxy of a run under `policy`, contained as `how` says.
    pub(crate) fn start(mut policy: Policy, how: NetworkContainment) -> std::io::Result<Self> {
        let (listener, namespaces) = match how {
            NetworkContainment::Namespaces => {
                let probed = PROBED.lock().unwrap_or_else(PoisonError::into_inner).take();
                let made = match probed {
                    Some(made) => made,
                    None => namespace::create()?,
                };
                let namespaces = Namespaces {
                    net: Arc::new(made.net),
                    user: made.user.map(Arc::new),
                };
                (made.listener, Some(namespaces))
            }
            NetworkContainment::LandlockAndSeccomp => {
                let listener =
                    std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
                listener.set_nonblocking(true)?;
                (listener, None)
            }
            NetworkContainment::Unavailable => {
                return Err(std::io::Error::other(how.describe()));
            }
        };
        let port = listener.local_addr()?.port();
        // In a namespace of the run's own only its programs reach the
        // proxy; on the host's loopback, any local process could: there it
        // takes a credential of the run's.
        let token = namespaces
            .is_none()
            .then(|| uuid::Uuid::new_v4().simple().to_string());
        policy.token.clone_from(&token);
        Ok(Self {
            namespaces,
            port,
            token,
            _proxy: Proxy::serve(listener, policy)?,
        })
    }

    /// The namespaces the run's programs join; `None`: the host's.
    pub(crate) fn namespaces(&self) -> Option<Namespaces> {
        self.namespaces.clone()
    }

    /// The proxy's port on `127.0.0.1` (in the programs' namespace).
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Sets the proxy variables in `env`, and the base URLs of the run's
    /// `secrets` of the vendors' key names ([`Self::secret_routes`]),
    /// replacing any the adapter set.
    pub(crate) fn proxy_env(&self, env: &mut Vec<(String, String)>, secrets: &crate::Secrets) {
        let proxy_url = match &self.token {
            None => self.url(),
            Some(token) => format!("http://moat:{token}@127.0.0.1:{}", self.port),
        };
        let mut set: Vec<(String, String)> = PROXY_VARIABLES
            .iter()
            .map(|name| ((*name).to_owned(), proxy_url.clone()))
            .collect();
        set.extend(self.secret_routes(secrets));
        env.retain(|(name, _)| {
            !NO_PROXY_VARIABLES.contains(&name.as_str()) && !set.iter().any(|(s, _)| s == name)
        });
        env.extend(set);
    }

    /// The base URL of each of `secrets` named after a vendor's key
    /// ([`moat_grants::VENDOR_KEYS`]), as its variable: the secret's route
    /// through the proxy, where the key is added on the way out.
    pub(crate) fn secret_routes(&self, secrets: &crate::Secrets) -> Vec<(String, String)> {
        let route = match &self.token {
            None => format!("{}{}", self.url(), proxy::SECRET_ROUTE),
            Some(token) => format!("{}{}{token}/", self.url(), proxy::SECRET_ROUTE),
        };
        secrets
            .names()
            .into_iter()
            .filter_map(|name| {
                let key = moat_grants::vendor_key(&name)?;
                Some((
                    key.base_url.to_owned(),
                    format!("{route}{name}{}", key.base_url_suffix),
                ))
            })
            .collect()
    }

    /// The URL of the run's approvals as an MCP server on its proxy
    /// ([`approvals`]), for the agent CLI it starts.
    pub(crate) fn approval_route(&self) -> String {
        match &self.token {
            None => format!("{}{}mcp", self.url(), approvals::APPROVAL_ROUTE),
            Some(token) => format!("{}{}{token}/mcp", self.url(), approvals::APPROVAL_ROUTE),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}
