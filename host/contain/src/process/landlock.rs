//! Containing the programs a run starts (Linux Landlock): a granted program
//! gets the run's grants, not the user's rights. It may read and run the
//! system's programs and libraries and its own install tree, read and
//! write the run's write grants, its private directory and the places it
//! keeps its own state ([`Confinement::Contained`]), read the run's read
//! grants, and nothing else of the filesystem. It may not signal processes
//! outside its domain (moat among them) nor reach abstract Unix sockets
//! outside it. Where it shares the host's network and the kernel has
//! Landlock's network rules (ABI 4), it may connect over TCP only to the
//! port of the run's proxy and bind no TCP port ([`crate::egress`]); in a
//! network of the run's own, the namespace holds its network.
//!
//! The ruleset is built by the host before the fork; the child only
//! enforces it ([`super::spawner`]), so nothing allocates between fork and
//! exec. Where the kernel has no Landlock, programs run with the user's
//! rights and [`available`] says so, for the CLI's warning.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, NetPort, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};
use moat_grants::{Confinement, OpenDir};

/// The newest Landlock ABI whose rights moat asks for; older kernels get
/// what they support (best effort), newer ones nothing more.
const TARGET_ABI: ABI = ABI::V6;

/// Where the system keeps programs and libraries: readable and runnable.
const SYSTEM_PROGRAMS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// What every program reads to start: configuration, and the kernel's views
/// of itself (`/proc` of other processes stays closed: Landlock refuses a
/// contained process access to processes outside its domain).
const SYSTEM_READ: &[&str] = &["/etc", "/proc", "/sys"];

/// Devices: `/dev/null`, `/dev/tty`, random numbers, pseudo-terminals.
const DEVICES: &str = "/dev";

/// Whether this kernel enforces Landlock, found once: where it does not,
/// contained programs run with the user's rights.
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let created = Ruleset::default()
            .handle_access(AccessFs::from_all(ABI::V1))
            .and_then(|ruleset| ruleset.create());
        matches!(created.map(Option::<OwnedFd>::from), Ok(Some(_)))
    })
}

/// The rights on `/proc` (and the private `/proc` of a PID namespace), as
/// the kernel's bits.
pub(crate) fn proc_access() -> u64 {
    (AccessFs::ReadFile | AccessFs::ReadDir).bits()
}

/// The filesystem a run's programs may reach, decided when the run starts.
#[derive(Debug, Clone)]
pub(crate) struct ProgramRights {
    /// Readable (and runnable): the run's read grants, as opened.
    read: Vec<OpenDir>,
    /// Readable and writable: the run's write grants, as opened.
    write: Vec<OpenDir>,
    /// Readable and writable: the places the programs keep their state.
    state: Vec<PathBuf>,
}

impl ProgramRights {
    /// The rights of a run granted `read` and `write` (opened when it was
    /// admitted) under `confinement`; `None`: not contained.
    pub(crate) fn new(
        confinement: &Confinement,
        read: Vec<OpenDir>,
        write: Vec<OpenDir>,
    ) -> Option<Self> {
        let Confinement::Contained {
            state_dirs,
            state_files,
            ..
        } = confinement
        else {
            return None;
        };
        for dir in state_dirs.iter().filter(|dir| !dir.exists()) {
            // Only its owner's: it will hold the program's credentials.
            let made = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir);
            if let Err(error) = made {
                tracing::warn!(dir = %dir.display(), "cannot make a program's state directory: {error}");
            }
        }
        Some(Self {
            read,
            write,
            state: state_dirs.iter().chain(state_files).cloned().collect(),
        })
    }

    /// The ruleset for `program` (its absolute path), whose private
    /// directory is `private_dir` and whose `PATH` lists `path_dirs`: the
    /// file descriptor the child enforces, or `None` where the kernel has
    /// no Landlock. `host_network_proxy`: the port of the run's proxy on
    /// the host's loopback, when the programs share the host's network
    /// (`None`: a namespace of the run's own holds their network).
    pub(crate) fn ruleset(
        &self,
        program: &Path,
        private_dir: &Path,
        path_dirs: &[PathBuf],
        host_network_proxy: Option<u16>,
    ) -> Result<Option<OwnedFd>, landlock::RulesetError> {
        if !available() {
            return Ok(None);
        }
        let all = AccessFs::from_all(TARGET_ABI);
        let run = AccessFs::from_read(TARGET_ABI);
        let read = AccessFs::ReadFile | AccessFs::ReadDir;
        let device = read | AccessFs::WriteFile | AccessFs::IoctlDev;

        let mut rules: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
        rules.extend(SYSTEM_PROGRAMS.iter().map(|dir| (PathBuf::from(dir), run)));
        rules.extend(path_dirs.iter().map(|dir| (dir.clone(), run)));
        rules.push((install_tree(program), run));
        rules.extend(SYSTEM_READ.iter().map(|dir| (PathBuf::from(dir), read)));
        rules.push((PathBuf::from(DEVICES), device));
        rules.extend(self.state.iter().map(|path| (path.clone(), all)));
        rules.push((private_dir.to_path_buf(), all));

        let ruleset = Ruleset::default().handle_access(all)?;
        let mut ruleset = match host_network_proxy {
            // In the host's network: TCP connections only to the proxy,
            // and no port bound.
            Some(port) => ruleset
                .handle_access(AccessNet::from_all(TARGET_ABI))?
                .scope(Scope::Signal | Scope::AbstractUnixSocket)?
                .create()?
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))?,
            // In the run's own: its loopback is the programs', and their
            // connections are made by moat (`super::connector`).
            None => ruleset
                .scope(Scope::Signal | Scope::AbstractUnixSocket)?
                .create()?,
        };
        // The run's grants, through the handles opened when it was
        // admitted, never their paths again.
        for dir in &self.read {
            ruleset = ruleset.add_rule(PathBeneath::new(dir.as_fd(), run))?;
        }
        for dir in &self.write {
            ruleset = ruleset.add_rule(PathBeneath::new(dir.as_fd(), all))?;
        }
        for (path, access) in rules {
            // A path that does not exist here (no /lib32, a state file
            // never written) has nothing to grant.
            let Ok(fd) = PathFd::new(&path) else {
                continue;
            };
            // A file gets only the rights a file can have.
            let access = if path.is_dir() {
                access
            } else {
                access & AccessFs::from_file(TARGET_ABI)
            };
            ruleset = ruleset.add_rule(PathBeneath::new(fd, access))?;
        }
        Ok(Option::<OwnedFd>::from(ruleset))
    }
}

/// Whether granting `dir` would open too much to a contained program:
/// `/`, the home directory or a directory holding it (all of the user's
/// files).
pub(crate) fn opens_too_much(dir: &Path) -> bool {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    dir == Path::new("/") || home.is_some_and(|home| home.starts_with(dir))
}

/// The tree `program` was installed with: for a program inside a
/// `node_modules` (an npm-installed CLI and the packages it loads), the
/// prefix that holds the outermost `node_modules`; else the directory the
/// program is in. Never one that [opens too much](opens_too_much): then
/// only the program's own package, or the program itself.
fn install_tree(program: &Path) -> PathBuf {
    let real = std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf());
    let dir = real.parent().unwrap_or(Path::new("/")).to_path_buf();
    let outermost_modules = real
        .ancestors()
        .filter(|dir| dir.file_name().is_some_and(|name| name == "node_modules"))
        .last();
    let Some(modules) = outermost_modules else {
        return match opens_too_much(&dir) {
            true => real,
            false => dir,
        };
    };
    match modules.parent() {
        Some(prefix) if !opens_too_much(prefix) => prefix.to_path_buf(),
        // The package itself: `node_modules/NAME` or `node_modules/@SCOPE/NAME`.
        _ => {
            let inside = real.strip_prefix(modules).unwrap_or(Path::new(""));
            let mut parts = inside.components();
            let mut package = modules.to_path_buf();
            if let Some(first) = parts.next() {
                package.push(first);
                if first.as_os_str().to_string_lossy().starts_with('@')
                    && let Some(second) = parts.next()
                {
                    package.push(second);
                }
            }
            package
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_install_tree_of_an_npm_cli_is_its_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let package = root.join("node_modules/@scope/cli/dist");
        std::fs::create_dir_all(&package).unwrap();
        std::fs::write(package.join("cli.js"), "").unwrap();
        let bin = root.join("node_modules/.bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink("../@scope/cli/dist/cli.js", bin.join("cli")).unwrap();
        assert_eq!(install_tree(&bin.join("cli")), root);
        assert_eq!(
            install_tree(Path::new("/opt/tool/tool")),
            Path::new("/opt/tool")
        );
        // Never the whole filesystem.
        assert_eq!(
            install_tree(Path::new("/node_modules/@s/cli/x.js")),
            Path::new("/node_modules/@s/cli")
        );
        assert_eq!(
            install_tree(Path::new("/no-such-moat/bin/cat")),
            Path::new("/no-such-moat/bin")
        );
    }

    #[test]
    fn no_confinement_means_no_rights_to_enforce() {
        assert!(ProgramRights::new(&Confinement::Off, Vec::new(), Vec::new()).is_none());
        assert!(ProgramRights::new(&Confinement::default(), Vec::new(), Vec::new()).is_some());
    }
}
