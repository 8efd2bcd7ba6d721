//! Narrowing grants: checking a request against a ceiling, and
//! intersecting grant sets.
//!
//! A server that starts runs on behalf of clients holds a *ceiling*: the
//! most any run it starts may have. A request may only narrow it. Anything
//! it asks for beyond the ceiling is refused, named item by item
//! ([`Grants::excess_over`]), never silently dropped or widened; what a run
//! gets is what every party allows ([`Grants::intersect`]: ceiling ∩
//! request ∩ the adapter's own boundary).
//!
//! Both operations work on the data only, with the meaning the rest of the
//! crate gives it ([`net`](crate::net) for hosts, schemes and ports; a
//! directory grant covers everything under it; a write grant also allows
//! reading): nothing here touches the file system or the network.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::{Grants, HostPattern, NetRule};

/// One thing a request asks for that its ceiling does not allow, shown as
/// the flag that would grant it (`--allow-net=api.example.com:443`), so a
/// refusal names exactly what is beyond the ceiling in words the user
/// already knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Excess {
    /// A network rule no single ceiling rule covers.
    Net(NetRule),
    /// A directory to read that is inside no ceiling directory.
    Read(PathBuf),
    /// A directory to write that is inside no ceiling write directory.
    Write(PathBuf),
    /// An environment variable the ceiling does not name.
    Env(String),
    /// A program the ceiling does not name.
    Run(String),
    /// A secret grant no ceiling grant of the same secret covers.
    Secret(crate::SecretGrant),
    /// A Unix socket the ceiling does not name.
    UnixSocket(PathBuf),
    /// A protected path the ceiling does not let be written.
    WriteProtected(PathBuf),
    /// Unmetered model calls under a budget, which the ceiling does not
    /// allow.
    Unmetered,
}

impl fmt::Display for Excess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Excess::Net(rule) => write!(f, "--allow-net={rule}"),
            Excess::Read(dir) => write!(f, "--allow-read={}", dir.display()),
            Excess::Write(dir) => write!(f, "--allow-write={}", dir.display()),
            Excess::Env(name) => write!(f, "--allow-env={name}"),
            Excess::Run(program) => write!(f, "--allow-run={program}"),
            Excess::Secret(grant) => write!(f, "--secret={grant}"),
            Excess::UnixSocket(path) => write!(f, "--allow-unix-socket={}", path.display()),
            Excess::WriteProtected(path) => {
                write!(f, "--allow-write-protected={}", path.display())
            }
            Excess::Unmetered => write!(f, "--allow-unmetered"),
        }
    }
}

impl Grants {
    /// Everything in `self` that `ceiling` does not allow, in the order of
    /// `self`, each item once. Empty exactly when `self` asks for nothing
    /// beyond `ceiling`.
    ///
    /// - A network rule must be covered, in scheme, host and port at once,
    ///   by one ceiling rule: a rule without scheme or port is covered only
    ///   by a ceiling rule without it; `*.example.com` only by the same or a
    ///   wider wildcard, never by names (it stands for names not yet known).
    /// - A directory to read must be inside (or be) a ceiling directory to
    ///   read or write; a directory to write, inside a ceiling directory to
    ///   write.
    /// - An environment name or program must be named by the ceiling, as
    ///   the same string; a Unix socket, as the same path.
    ///
    /// Items are checked one by one: two ceiling rules that together would
    /// cover a request rule (`http://x` and `https://x` for `x`) do not. The
    /// request is refused and can be written as the two narrower rules.
    pub fn excess_over(&self, ceiling: &Grants) -> Vec<Excess> {
        let mut excess = Vec::new();
        // Reporting each item once: a request that repeats an item should
        // not get a refusal that repeats it.
        let mut push = |item: Excess| {
            if !excess.contains(&item) {
                excess.push(item);
            }
        };
        for rule in &self.net {
            if !ceiling.net.iter().any(|c| rule_covers(c, rule)) {
                push(Excess::Net(rule.clone()));
            }
        }
        // A write grant allows reading, so the ceiling's write directories
        // count for a read, but not the other way round.
        let readable: Vec<&PathBuf> = ceiling.read.iter().chain(&ceiling.write).collect();
        for dir in &self.read {
            if !readable.iter().any(|c| dir.starts_with(c)) {
                push(Excess::Read(dir.clone()));
            }
        }
        for dir in &self.write {
            if !ceiling.write.iter().any(|c| dir.starts_with(c)) {
                push(Excess::Write(dir.clone()));
            }
        }
        for name in &self.env {
            if !ceiling.env.contains(name) {
                push(Excess::Env(name.clone()));
            }
        }
        for program in &self.run {
            if !ceiling.run.contains(program) {
                push(Excess::Run(program.clone()));
            }
        }
        for grant in &self.secrets {
            if !ceiling
                .secrets
                .iter()
                .any(|c| c.name == grant.name && rule_covers(&c.rule, &grant.rule))
            {
                push(Excess::Secret(grant.clone()));
            }
        }
        for socket in &self.unix_sockets {
            if !ceiling.unix_sockets.contains(socket) {
                push(Excess::UnixSocket(socket.clone()));
            }
        }
        for path in &self.write_protected {
            if !ceiling.write_protected.iter().any(|c| path.starts_with(c)) {
                push(Excess::WriteProtected(path.clone()));
            }
        }
        if self.unmetered && !ceiling.unmetered {
            push(Excess::Unmetered);
        }
        excess
    }

    /// What both `self` and `other` allow, and nothing else; in the order of
    /// `self` (then of `other`), deterministic for the same inputs.
    ///
    /// - Network: the intersection of every pair of rules that overlap, the
    ///   narrower value in each of scheme, host and port; pairs that cannot
    ///   overlap (different schemes, ports, unrelated hosts) give nothing. A
    ///   rule another result rule already covers is left out.
    /// - Directories: for each pair of directories, one inside the other,
    ///   the deeper one; writable where both sides allow writing, readable
    ///   where both allow reading (a write grant counting as read). `read`
    ///   lists only what `write` does not already cover, and neither list
    ///   has an entry inside another of its entries.
    /// - Environment names, programs and Unix sockets: those both name.
    ///
    /// The result allows a destination, path, name or program exactly when
    /// both sides do, so `ceiling.intersect(&request).intersect(&boundary)`
    /// is what a run may have, whatever the order.
    pub fn intersect(&self, other: &Grants) -> Grants {
        let net = minimal_rules(
            self.net
                .iter()
                .flat_map(|a| {
                    other
                        .net
                        .iter()
                        .filter_map(move |b| rule_intersection(a, b))
                })
                .collect(),
        );

        let write = minimal_dirs(dir_intersection(&self.write, &other.write));
        let self_readable: Vec<PathBuf> = self.read.iter().chain(&self.write).cloned().collect();
        let other_readable: Vec<PathBuf> = other.read.iter().chain(&other.write).cloned().collect();
        // A directory already writable is readable too: listing it (or one
        // under it) again as read would only be noise, and would show up as
        // a second preopen of the same tree.
        let read = minimal_dirs(dir_intersection(&self_readable, &other_readable))
            .into_iter()
            .filter(|dir| !write.iter().any(|w| dir.starts_with(w)))
            .collect();

        // A secret goes where both sides let it: the same secret, the
        // intersection of the destinations.
        let secrets = dedup(
            self.secrets
                .iter()
                .flat_map(|a| {
                    other
                        .secrets
                        .iter()
                        .filter(move |b| a.name == b.name)
                        .filter_map(move |b| {
                            rule_intersection(&a.rule, &b.rule).map(|rule| crate::SecretGrant {
                                name: a.name.clone(),
                                rule,
                            })
                        })
                })
                .collect(),
        );

        Grants {
            net,
            read,
            write,
            env: common(&self.env, &other.env),
            run: common(&self.run, &other.run),
            secrets,
            unix_sockets: common(&self.unix_sockets, &other.unix_sockets),
            write_protected: inner_paths(&self.write_protected, &other.write_protected),
            // Reading more is never allowing more: every side's meters.
            meter: dedup(self.meter.iter().chain(&other.meter).cloned().collect()),
            unmetered: self.unmetered && other.unmetered,
        }
    }
}

/// Whether `outer` allows every request `inner` allows.
fn rule_covers(outer: &NetRule, inner: &NetRule) -> bool {
    // `None` means every value, so it is covered only by `None`; a value is
    // covered by itself or by `None`.
    fn covers<T: PartialEq>(outer: Option<T>, inner: Option<T>) -> bool {
        outer.is_none() || outer == inner
    }
    covers(outer.scheme, inner.scheme)
        && covers(outer.port, inner.port)
        && host_covers(&outer.host, &inner.host)
}

/// Whether every host `inner` matches is matched by `outer`, with the
/// meaning of [`HostPattern::matches`]: `*.d` matches the names strictly
/// under `d`, not `d` itself.
fn host_covers(outer: &HostPattern, inner: &HostPattern) -> bool {
    match (outer, inner) {
        (HostPattern::Subdomains(wide), HostPattern::Name(name)) => strictly_under(name, wide),
        // `*.a.b` lies within `*.b` (and within itself): every name under
        // `a.b` is under `b`. An exact name never covers a wildcard, which
        // stands for names nobody has listed.
        (HostPattern::Subdomains(wide), HostPattern::Subdomains(narrow)) => {
            narrow == wide || strictly_under(narrow, wide)
        }
        // Names and addresses: only themselves. A name is never taken to
        // cover an address it might resolve to; resolution is checked when a
        // request is made (crate::address), not here.
        (outer, inner) => outer == inner,
    }
}

/// Whether `name` is a subdomain of `domain` at any depth, not `domain`
/// itself. Compared label-wise, so `badexample.com` is not under
/// `example.com`.
fn strictly_under(name: &str, domain: &str) -> bool {
    name.strip_suffix(domain)
        .and_then(|prefix| prefix.strip_suffix('.'))
        .is_some_and(|prefix| !prefix.is_empty())
}

/// The requests both rules allow, as one rule, or `None` when no request
/// matches both.
fn rule_intersection(a: &NetRule, b: &NetRule) -> Option<NetRule> {
    // The narrower of two optional values (`None` is every value); two
    // different values share nothing.
    fn narrower<T: PartialEq + Copy>(a: Option<T>, b: Option<T>) -> Option<Option<T>> {
        match (a, b) {
            (None, other) | (other, None) => Some(other),
            (Some(x), Some(y)) if x == y => Some(Some(x)),
            _ => None,
        }
    }
    // Host patterns form a tree: two of them either share nothing or one
    // lies within the other (two wildcards matching a common name are both
    // suffixes of it, so one is a suffix of the other), so the narrower
    // pattern is exactly their intersection.
    let host = if host_covers(&a.host, &b.host) {
        b.host.clone()
    } else if host_covers(&b.host, &a.host) {
        a.host.clone()
    } else {
        return None;
    };
    Some(NetRule {
        scheme: narrower(a.scheme, b.scheme)?,
        host,
        port: narrower(a.port, b.port)?,
    })
}

/// The rules, each once, without those another rule already covers, in
/// their first order: the same requests allowed, in as few rules as the
/// pairwise intersection makes possible.
fn minimal_rules(rules: Vec<NetRule>) -> Vec<NetRule> {
    let unique = dedup(rules);
    // With duplicates gone, two rules covering each other are equal, so a
    // rule dropped here always has a survivor covering it (coverage is
    // transitive and has no cycles).
    unique
        .iter()
        .filter(|rule| {
            !unique
                .iter()
                .any(|other| other != *rule && rule_covers(other, rule))
        })
        .cloned()
        .collect()
}

/// For each pair of directories, one per side, where one contains the
/// other: the deeper, the part both sides grant. Containment is by path
/// components (`/data2` is not inside `/data`).
fn dir_intersection(a: &[PathBuf], b: &[PathBuf]) -> Vec<PathBuf> {
    let mut result = Vec::new();
    for x in a {
        for y in b {
            if x.starts_with(y) {
                result.push(x.clone());
            } else if y.starts_with(x) {
                result.push(y.clone());
            }
        }
    }
    result
}

/// The directories, each once, without those inside another of them, in
/// their first order.
fn minimal_dirs(dirs: Vec<PathBuf>) -> Vec<PathBuf> {
    let unique = dedup(dirs);
    unique
        .iter()
        .filter(|dir| !unique.iter().any(|other| inside(dir, other)))
        .cloned()
        .collect()
}

/// Whether `dir` is strictly inside `other`.
fn inside(dir: &Path, other: &Path) -> bool {
    dir != other && dir.starts_with(other)
}

/// The paths both allow: each of `a` inside one of `b`, and each of `b`
/// inside one of `a`, each once.
fn inner_paths(a: &[PathBuf], b: &[PathBuf]) -> Vec<PathBuf> {
    let within = |x: &[PathBuf], y: &[PathBuf]| -> Vec<PathBuf> {
        x.iter()
            .filter(|path| y.iter().any(|outer| path.starts_with(outer)))
            .cloned()
            .collect()
    };
    let mut both = within(a, b);
    both.extend(within(b, a));
    dedup(both)
}

/// The entries of `a` that `b` also has, each once, in the order of `a`.
fn common<T: PartialEq + Clone>(a: &[T], b: &[T]) -> Vec<T> {
    dedup(a.iter().filter(|item| b.contains(item)).cloned().collect())
}

/// The items, each once, in the order they first appear.
fn dedup<T: PartialEq>(items: Vec<T>) -> Vec<T> {
    let mut unique: Vec<T> = Vec::with_capacity(items.len());
    for item in items {
        if !unique.contains(&item) {
            unique.push(item);
        }
    }
    unique
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scheme;
    use proptest::prelude::*;

    fn rule(text: &str) -> NetRule {
        NetRule::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn net(rules: &[&str]) -> Grants {
        Grants {
            net: rules.iter().map(|r| rule(r)).collect(),
            ..Grants::none()
        }
    }

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    fn dirs(read: &[&str], write: &[&str]) -> Grants {
        Grants {
            read: paths(read),
            write: paths(write),
            ..Grants::none()
        }
    }

    fn secrets(grants: &[&str]) -> Grants {
        Grants {
            secrets: grants
                .iter()
                .map(|g| crate::SecretGrant::parse(g).unwrap())
                .collect(),
            ..Grants::none()
        }
    }

    #[test]
    fn a_secret_grant_only_narrows_the_same_secret_to_fewer_destinations() {
        let ceiling = secrets(&["KEY@*.example.com", "TOKEN@api.example.org:443"]);
        for (request, excess) in [
            ("KEY@api.example.com:443", None),
            ("TOKEN@api.example.org:443", None),
            // Another secret, the same destination.
            (
                "OTHER@api.example.org:443",
                Some("--secret=OTHER@api.example.org:443"),
            ),
            // The same secret, somewhere else.
            (
                "TOKEN@evil.example:443",
                Some("--secret=TOKEN@evil.example:443"),
            ),
            (
                "TOKEN@api.example.org",
                Some("--secret=TOKEN@api.example.org"),
            ),
        ] {
            let found: Vec<String> = secrets(&[request])
                .excess_over(&ceiling)
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(found, excess.into_iter().collect::<Vec<_>>(), "{request}");
        }
        let both = ceiling.intersect(&secrets(&["KEY@api.example.com", "TOKEN@x.example:443"]));
        assert_eq!(
            both.secrets
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["KEY@api.example.com"]
        );
    }

    /// The excess as the flags a user would read.
    fn flags(request: &Grants, ceiling: &Grants) -> Vec<String> {
        request
            .excess_over(ceiling)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn rules_of(grants: &Grants) -> Vec<String> {
        grants.net.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn excess_shows_as_the_flag_that_would_grant_it() {
        assert_eq!(
            Excess::Net(rule("api.example.com:443")).to_string(),
            "--allow-net=api.example.com:443"
        );
        assert_eq!(
            Excess::Net(rule("https://[::1]:8080")).to_string(),
            "--allow-net=https://[::1]:8080"
        );
        assert_eq!(
            Excess::Read("/data".into()).to_string(),
            "--allow-read=/data"
        );
        assert_eq!(
            Excess::Write("/out".into()).to_string(),
            "--allow-write=/out"
        );
        assert_eq!(Excess::Env("HOME".into()).to_string(), "--allow-env=HOME");
        assert_eq!(Excess::Run("git".into()).to_string(), "--allow-run=git");
    }

    #[test]
    fn an_exact_name_is_covered_by_itself_or_a_wildcard_above_it() {
        let ceiling = net(&["api.example.com", "*.example.org"]);
        assert!(net(&["api.example.com"]).excess_over(&ceiling).is_empty());
        assert!(net(&["a.example.org"]).excess_over(&ceiling).is_empty());
        assert!(net(&["a.b.example.org"]).excess_over(&ceiling).is_empty());
        assert_eq!(
            flags(&net(&["example.com", "x.api.example.com"]), &ceiling),
            ["--allow-net=example.com", "--allow-net=x.api.example.com"]
        );
    }

    #[test]
    fn a_wildcard_does_not_cover_its_bare_domain_nor_lookalikes() {
        // As in net.rs: `*.example.org` matches names under it, not
        // `example.org` itself, and only at a label boundary.
        let ceiling = net(&["*.example.org"]);
        assert_eq!(
            flags(&net(&["example.org", "badexample.org"]), &ceiling),
            ["--allow-net=example.org", "--allow-net=badexample.org"]
        );
    }

    #[test]
    fn a_wildcard_is_covered_only_by_the_same_or_a_wider_wildcard() {
        let request = net(&["*.api.example.com"]);
        assert!(request.excess_over(&net(&["*.api.example.com"])).is_empty());
        assert!(request.excess_over(&net(&["*.example.com"])).is_empty());
        assert_eq!(
            flags(&request, &net(&["api.example.com", "x.api.example.com"])),
            ["--allow-net=*.api.example.com"]
        );
        assert_eq!(
            flags(&net(&["*.example.com"]), &net(&["*.api.example.com"])),
            ["--allow-net=*.example.com"]
        );
    }

    #[test]
    fn addresses_are_covered_only_by_the_same_address() {
        let ceiling = net(&["127.0.0.1", "[::1]:11434", "localhost"]);
        assert!(
            net(&["127.0.0.1:8080", "http://[::1]:11434"])
                .excess_over(&ceiling)
                .is_empty()
        );
        assert_eq!(
            flags(&net(&["127.0.0.2", "[::1]", "[::2]:11434"]), &ceiling),
            [
                "--allow-net=127.0.0.2",
                "--allow-net=[::1]",
                "--allow-net=[::2]:11434"
            ]
        );
    }

    #[test]
    fn a_missing_scheme_or_port_needs_a_ceiling_without_it() {
        let ceiling = net(&["https://x.example", "y.example:443"]);
        assert!(
            net(&["https://x.example:8443", "http://y.example:443"])
                .excess_over(&ceiling)
                .is_empty()
        );
        assert_eq!(
            flags(
                &net(&["x.example", "http://x.example", "y.example", "y.example:80"]),
                &ceiling
            ),
            [
                "--allow-net=x.example",
                "--allow-net=http://x.example",
                "--allow-net=y.example",
                "--allow-net=y.example:80"
            ]
        );
    }

    #[test]
    fn one_ceiling_rule_must_cover_every_dimension() {
        // Scheme from one rule and port from another do not add up.
        let ceiling = net(&["https://x.example", "x.example:80"]);
        assert_eq!(
            flags(&net(&["https://x.example:80"]), &ceiling),
            Vec::<String>::new()
        );
        let ceiling = net(&["https://x.example:443", "http://x.example:80"]);
        assert_eq!(
            flags(&net(&["https://x.example:80"]), &ceiling),
            ["--allow-net=https://x.example:80"]
        );
    }

    #[test]
    fn directories_are_inside_by_components_not_by_prefix() {
        let ceiling = dirs(&["/data"], &[]);
        assert!(
            dirs(&["/data", "/data/sub/deep"], &[])
                .excess_over(&ceiling)
                .is_empty()
        );
        assert_eq!(
            flags(&dirs(&["/data2", "/"], &[]), &ceiling),
            ["--allow-read=/data2", "--allow-read=/"]
        );
    }

    #[test]
    fn write_implies_read_in_the_ceiling_but_read_does_not_imply_write() {
        let ceiling = dirs(&["/data"], &["/out"]);
        assert!(dirs(&["/out/logs"], &[]).excess_over(&ceiling).is_empty());
        assert!(dirs(&[], &["/out/logs"]).excess_over(&ceiling).is_empty());
        assert_eq!(
            flags(&dirs(&[], &["/data", "/data/sub"]), &ceiling),
            ["--allow-write=/data", "--allow-write=/data/sub"]
        );
    }

    #[test]
    fn names_and_programs_are_covered_by_equal_entries() {
        let ceiling = Grants {
            env: vec!["HOME".into()],
            run: vec!["git".into()],
            ..Grants::none()
        };
        let request = Grants {
            env: vec!["HOME".into(), "home".into(), "PATH".into()],
            run: vec!["git".into(), "/usr/bin/git".into()],
            ..Grants::none()
        };
        assert_eq!(
            flags(&request, &ceiling),
            [
                "--allow-env=home",
                "--allow-env=PATH",
                "--allow-run=/usr/bin/git"
            ]
        );
    }

    fn sample() -> Grants {
        Grants {
            net: vec![rule("https://api.example.com:443"), rule("*.example.org")],
            read: paths(&["/data"]),
            write: paths(&["/out"]),
            env: vec!["HOME".into()],
            run: vec!["git".into()],
            secrets: vec![crate::SecretGrant::parse("KEY@api.example.com:443").unwrap()],
            unix_sockets: paths(&["/run/db.sock"]),
            write_protected: paths(&["/p/.envrc"]),
            meter: vec![crate::MeterRule::parse("127.0.0.1:11434=openai").unwrap()],
            unmetered: true,
        }
    }

    #[test]
    fn an_empty_ceiling_refuses_every_item() {
        assert_eq!(
            sample().excess_over(&Grants::none()),
            [
                Excess::Net(rule("https://api.example.com:443")),
                Excess::Net(rule("*.example.org")),
                Excess::Read("/data".into()),
                Excess::Write("/out".into()),
                Excess::Env("HOME".into()),
                Excess::Run("git".into()),
                Excess::Secret(crate::SecretGrant::parse("KEY@api.example.com:443").unwrap()),
                Excess::UnixSocket("/run/db.sock".into()),
                Excess::WriteProtected("/p/.envrc".into()),
                Excess::Unmetered,
            ]
        );
        // A protected directory opted in covers the paths inside it.
        let ceiling = Grants {
            write_protected: paths(&["/p"]),
            ..Grants::none()
        };
        let asked = Grants {
            write_protected: paths(&["/p/.envrc"]),
            ..Grants::none()
        };
        assert!(asked.excess_over(&ceiling).is_empty());
        assert_eq!(
            ceiling.intersect(&asked).write_protected,
            paths(&["/p/.envrc"])
        );
        assert_eq!(
            Excess::UnixSocket("/run/db.sock".into()).to_string(),
            "--allow-unix-socket=/run/db.sock"
        );
        assert!(Grants::none().excess_over(&Grants::none()).is_empty());
    }

    #[test]
    fn a_request_equal_to_the_ceiling_has_no_excess() {
        assert_eq!(sample().excess_over(&sample()), []);
        assert_eq!(sample().intersect(&sample()), sample());
    }

    #[test]
    fn a_repeated_item_is_reported_once() {
        let request = Grants {
            env: vec!["K".into(), "K".into()],
            ..net(&["x.example", "x.example"])
        };
        assert_eq!(
            flags(&request, &Grants::none()),
            ["--allow-net=x.example", "--allow-env=K"]
        );
    }

    #[test]
    fn net_rules_intersect_to_the_narrower_value_in_each_dimension() {
        let a = net(&["*.example.com", "https://other.example"]);
        let b = net(&["http://api.example.com:8080", "other.example:443"]);
        assert_eq!(
            rules_of(&a.intersect(&b)),
            ["http://api.example.com:8080", "https://other.example:443"]
        );
        assert_eq!(
            rules_of(&net(&["*.example.com"]).intersect(&net(&["*.api.example.com"]))),
            ["*.api.example.com"]
        );
    }

    #[test]
    fn net_rules_that_cannot_overlap_intersect_to_nothing() {
        let pairs = [
            ("https://x.example", "http://x.example"),
            ("x.example:443", "x.example:80"),
            ("x.example", "y.example"),
            ("*.example.com", "example.com"),
            ("*.example.com", "*.example.org"),
            ("api.example.com", "*.api.example.com"),
            ("127.0.0.1", "[::1]"),
            ("127.0.0.1", "localhost"),
        ];
        for (a, b) in pairs {
            assert!(net(&[a]).intersect(&net(&[b])).net.is_empty(), "{a} ∩ {b}");
            assert!(net(&[b]).intersect(&net(&[a])).net.is_empty(), "{b} ∩ {a}");
        }
    }

    #[test]
    fn intersected_net_rules_are_deduplicated_and_covered_ones_dropped() {
        let a = net(&["*.example.com", "api.example.com"]);
        let b = net(&["*.example.com", "api.example.com"]);
        assert_eq!(rules_of(&a.intersect(&b)), ["*.example.com"]);
    }

    #[test]
    fn nested_directories_intersect_to_the_deeper_one() {
        let a = dirs(&["/data"], &["/out/a"]);
        let b = dirs(&["/data/sub", "/data2"], &["/out"]);
        let both = a.intersect(&b);
        assert_eq!(both.write, paths(&["/out/a"]));
        assert_eq!(both.read, paths(&["/data/sub"]));
        // Symmetric in what it allows.
        let other_way = b.intersect(&a);
        assert_eq!(other_way.write, paths(&["/out/a"]));
        assert_eq!(other_way.read, paths(&["/data/sub"]));
    }

    #[test]
    fn writing_needs_both_sides_to_allow_it() {
        // One side writes `/out`, the other only reads it: the run reads.
        let both = dirs(&[], &["/out"]).intersect(&dirs(&["/out/logs"], &[]));
        assert_eq!(both.write, Vec::<PathBuf>::new());
        assert_eq!(both.read, paths(&["/out/logs"]));
    }

    #[test]
    fn read_lists_only_what_write_does_not_cover_and_nothing_nested() {
        let a = dirs(&["/data", "/data/sub"], &["/out"]);
        let b = dirs(&["/out/logs", "/data/sub"], &["/data", "/out"]);
        let both = a.intersect(&b);
        assert_eq!(both.write, paths(&["/out"]));
        assert_eq!(both.read, paths(&["/data"]));
    }

    #[test]
    fn names_and_programs_intersect_as_sets_in_order() {
        let a = Grants {
            env: vec!["B".into(), "A".into(), "B".into()],
            run: vec!["git".into(), "ls".into()],
            ..Grants::none()
        };
        let b = Grants {
            env: vec!["A".into(), "B".into(), "C".into()],
            run: vec!["/usr/bin/git".into(), "ls".into()],
            ..Grants::none()
        };
        let both = a.intersect(&b);
        assert_eq!(both.env, ["B", "A"]);
        assert_eq!(both.run, ["ls"]);
    }

    #[test]
    fn nothing_intersects_to_nothing() {
        assert!(sample().intersect(&Grants::none()).is_empty());
        assert!(Grants::none().intersect(&sample()).is_empty());
    }

    // Properties over small grants built from a few fixed values, chosen to
    // nest and to overlap: names under wildcards, wildcards under wildcards,
    // addresses, directories inside directories and beside them.

    const HOSTS: &[&str] = &[
        "api.example.com",
        "example.com",
        "x.api.example.com",
        "*.example.com",
        "*.api.example.com",
        "other.org",
        "127.0.0.1",
        "[::1]",
    ];
    const DIRS: &[&str] = &[
        "/",
        "/data",
        "/data/sub",
        "/data/sub/deep",
        "/data2",
        "/out",
    ];
    const NAMES: &[&str] = &["HOME", "PATH", "KEY"];
    const PROGRAMS: &[&str] = &["git", "/usr/bin/git", "ls"];

    fn any_rule() -> impl Strategy<Value = NetRule> {
        (
            prop::sample::select(HOSTS),
            prop::option::of(prop::sample::select(&[Scheme::Http, Scheme::Https][..])),
            prop::option::of(prop::sample::select(&[80u16, 443][..])),
        )
            .prop_map(|(host, scheme, port)| NetRule {
                scheme,
                host: rule(host).host,
                port,
            })
    }

    fn any_list<T: Clone + fmt::Debug + 'static>(
        items: &'static [T],
    ) -> impl Strategy<Value = Vec<T>> {
        prop::collection::vec(prop::sample::select(items), 0..4)
    }

    fn any_grants() -> impl Strategy<Value = Grants> {
        (
            prop::collection::vec(any_rule(), 0..4),
            any_list(DIRS),
            any_list(DIRS),
            any_list(NAMES),
            any_list(PROGRAMS),
        )
            .prop_map(|(net, read, write, env, run)| Grants {
                net,
                read: read.into_iter().map(PathBuf::from).collect(),
                write: write.into_iter().map(PathBuf::from).collect(),
                env: env.into_iter().map(String::from).collect(),
                run: run.into_iter().map(String::from).collect(),
                secrets: Vec::new(),
                unix_sockets: Vec::new(),
                write_protected: Vec::new(),
                meter: Vec::new(),
                unmetered: false,
            })
    }

    /// Whether `a` and `b` allow the same: each within the other.
    fn same(a: &Grants, b: &Grants) -> bool {
        a.excess_over(b).is_empty() && b.excess_over(a).is_empty()
    }

    // Concrete requests to check what the data means, independently of the
    // coverage rules above: `NetRule::matches` for the network, path
    // containment for directories.
    const REQUEST_HOSTS: &[&str] = &[
        "api.example.com",
        "example.com",
        "x.api.example.com",
        "y.x.api.example.com",
        "z.example.com",
        "other.org",
        "127.0.0.1",
        "::1",
    ];
    const REQUEST_PATHS: &[&str] = &[
        "/",
        "/data",
        "/data/sub",
        "/data/sub/deep/file",
        "/data/other",
        "/data2/file",
        "/out/file",
        "/etc",
    ];

    fn reaches(grants: &Grants, scheme: Scheme, host: &str, port: u16) -> bool {
        grants.net.iter().any(|r| r.matches(scheme, host, port))
    }

    fn can_read(grants: &Grants, path: &str) -> bool {
        grants
            .read
            .iter()
            .chain(&grants.write)
            .any(|d| Path::new(path).starts_with(d))
    }

    fn can_write(grants: &Grants, path: &str) -> bool {
        grants.write.iter().any(|d| Path::new(path).starts_with(d))
    }

    proptest! {
        #[test]
        fn the_intersection_is_within_both_sides(a in any_grants(), b in any_grants()) {
            let both = a.intersect(&b);
            prop_assert_eq!(both.excess_over(&a), vec![]);
            prop_assert_eq!(both.excess_over(&b), vec![]);
        }

        #[test]
        fn grants_are_within_themselves(a in any_grants()) {
            prop_assert_eq!(a.excess_over(&a), vec![]);
        }

        #[test]
        fn intersecting_with_itself_allows_the_same(a in any_grants()) {
            prop_assert!(same(&a.intersect(&a), &a));
        }

        #[test]
        fn intersecting_with_a_wider_side_allows_the_same(a in any_grants(), b in any_grants()) {
            if a.excess_over(&b).is_empty() {
                prop_assert!(same(&a.intersect(&b), &a));
            }
        }

        #[test]
        fn a_request_within_the_ceiling_reaches_nothing_more(
            a in any_grants(),
            b in any_grants(),
        ) {
            if a.excess_over(&b).is_empty() {
                for &host in REQUEST_HOSTS {
                    for scheme in [Scheme::Http, Scheme::Https] {
                        for port in [80, 443, 8080] {
                            prop_assert!(!reaches(&a, scheme, host, port) || reaches(&b, scheme, host, port));
                        }
                    }
                }
                for &path in REQUEST_PATHS {
                    prop_assert!(!can_read(&a, path) || can_read(&b, path));
                    prop_assert!(!can_write(&a, path) || can_write(&b, path));
                }
            }
        }

        #[test]
        fn the_intersection_allows_exactly_what_both_allow(
            a in any_grants(),
            b in any_grants(),
        ) {
            let both = a.intersect(&b);
            for &host in REQUEST_HOSTS {
                for scheme in [Scheme::Http, Scheme::Https] {
                    for port in [80, 443, 8080] {
                        prop_assert_eq!(
                            reaches(&both, scheme, host, port),
                            reaches(&a, scheme, host, port) && reaches(&b, scheme, host, port),
                            "{} {}:{}", scheme.as_str(), host, port
                        );
                    }
                }
            }
            for &path in REQUEST_PATHS {
                prop_assert_eq!(can_read(&both, path), can_read(&a, path) && can_read(&b, path), "read {}", path);
                prop_assert_eq!(can_write(&both, path), can_write(&a, path) && can_write(&b, path), "write {}", path);
            }
            for name in NAMES {
                let name = name.to_string();
                prop_assert_eq!(both.env.contains(&name), a.env.contains(&name) && b.env.contains(&name));
            }
            for program in PROGRAMS {
                let program = program.to_string();
                prop_assert_eq!(both.run.contains(&program), a.run.contains(&program) && b.run.contains(&program));
            }
        }

        #[test]
        fn the_intersection_lists_no_entry_inside_another(a in any_grants(), b in any_grants()) {
            let both = a.intersect(&b);
            for list in [&both.read, &both.write] {
                for (i, x) in list.iter().enumerate() {
                    for (j, y) in list.iter().enumerate() {
                        prop_assert!(i == j || !x.starts_with(y), "{:?} within {:?}", x, y);
                    }
                }
            }
            for dir in &both.read {
                prop_assert!(!both.write.iter().any(|w| dir.starts_with(w)), "{:?} already writable", dir);
            }
            for (i, x) in both.net.iter().enumerate() {
                for (j, y) in both.net.iter().enumerate() {
                    prop_assert!(i == j || !rule_covers(y, x), "{} covered by {}", x, y);
                }
            }
        }
    }
}
