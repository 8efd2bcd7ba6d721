//! Limits narrow like grants: a run's limits are what it asks for, never
//! more than the ceiling of whoever started it nor more than its parent
//! has left; what it does not ask for is the default, lowered to fit.

use std::time::Duration;

use moat_engine::{RunLimits, Setting};
use moat_runs::{AskedProgramLimits, RecordedLimits, RunId};
use moat_sandbox::MAX_MEMORY_CEILING;

use crate::refusal::{Bound, Refusal};

/// The most any run may have of each limit, on any path: what no ceiling
/// can raise (the flags refuse more, and so does every admission).
pub const MAX_COUNT: usize = 65_536;

/// The most memory any run's programs may have together (1 TiB): what
/// no ceiling can raise. The adapter's own share is at most
/// [`MAX_MEMORY_CEILING`].
pub const MAX_PROGRAM_MEMORY: u64 = 1 << 40;

/// A run's wall-clock limit as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    /// Stop the run after this long.
    After(Duration),
    /// No limit, asked for explicitly.
    Never,
}

/// The most of each limit a run may have anywhere, whatever a ceiling
/// says (the flags refuse more, and so does every admission): for a
/// command whose own flags are the run's limits (`moat run`). A ceiling's
/// limits are [`RunLimits`] read as "the most": a `None` timeout or fuel
/// sets no ceiling.
pub fn unbounded() -> RunLimits {
    RunLimits {
        timeout: None,
        fuel: None,
        max_memory_bytes: MAX_MEMORY_CEILING,
        max_program_memory_bytes: MAX_PROGRAM_MEMORY,
        max_event_bytes: MAX_COUNT * 1024 * 1024,
        max_connections: MAX_COUNT,
        max_open_files: MAX_COUNT,
        max_processes: MAX_COUNT as u64,
        milli_cpus: None,
    }
}

/// What a server or worker allows when its operator says nothing: any
/// time and fuel, the largest memory cap, and the defaults of the limits
/// on what the host shares (connections, files, event size), so a request
/// cannot take the host's descriptors.
pub fn shared_host() -> RunLimits {
    RunLimits {
        timeout: None,
        fuel: None,
        max_memory_bytes: MAX_MEMORY_CEILING,
        max_program_memory_bytes: MAX_PROGRAM_MEMORY,
        ..RunLimits::default()
    }
}

/// The limits a run asks for; each `None` takes the default (lowered to
/// fit the ceiling and the parent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AskedLimits {
    /// Its wall-clock limit; default: the adapter's.
    pub timeout: Option<Timeout>,
    /// Its CPU budget; default: the ceiling's (unlimited without one).
    pub fuel: Option<u64>,
    /// Its memory cap: its programs', and its adapter's up to
    /// [`MAX_MEMORY_CEILING`].
    pub max_memory_bytes: Option<u64>,
    /// Its programs' memory cap, when it differs from
    /// [`max_memory_bytes`](Self::max_memory_bytes) (a recorded run's).
    pub max_program_memory_bytes: Option<u64>,
    /// Its largest event.
    pub max_event_bytes: Option<usize>,
    /// Its most open connections.
    pub max_connections: Option<usize>,
    /// Its most open files.
    pub max_open_files: Option<usize>,
    /// Its programs' most processes.
    pub max_processes: Option<u64>,
    /// Its programs' CPU time, in thousandths of a CPU; default: the
    /// ceiling's (unlimited without one).
    pub milli_cpus: Option<u64>,
    /// The most tokens it (with its children) may use. (Its budget in
    /// dollars is its options' `max_budget_usd`.)
    pub max_tokens: Option<u64>,
    /// The most model calls it (with its children) may make.
    pub max_model_calls: Option<u64>,
    /// Which limits of its programs its user asked for, when the values
    /// above are given exactly (a job's, decided by its submitter);
    /// `None`: those set above (see [`programs_asked`](Self::programs_asked)).
    pub programs_asked: Option<AskedProgramLimits>,
}

impl AskedLimits {
    /// Exactly `limits`, each asked for.
    pub fn exactly(limits: &RunLimits) -> Self {
        Self {
            timeout: Some(match limits.timeout {
                Some(after) => Timeout::After(after),
                None => Timeout::Never,
            }),
            fuel: limits.fuel,
            max_memory_bytes: Some(limits.max_memory_bytes),
            max_program_memory_bytes: Some(limits.max_program_memory_bytes),
            max_event_bytes: Some(limits.max_event_bytes),
            max_connections: Some(limits.max_connections),
            max_open_files: Some(limits.max_open_files),
            max_processes: Some(limits.max_processes),
            milli_cpus: limits.milli_cpus,
            max_tokens: None,
            max_model_calls: None,
            programs_asked: None,
        }
    }

    /// Which limits of its programs its user asked for: a place that
    /// cannot hold one refuses the run; its memory counts in a memory
    /// budget.
    pub fn programs_asked(&self) -> AskedProgramLimits {
        self.programs_asked.unwrap_or(AskedProgramLimits {
            memory: self.max_memory_bytes.is_some() || self.max_program_memory_bytes.is_some(),
            processes: self.max_processes.is_some(),
            cpus: self.milli_cpus.is_some(),
        })
    }
}

/// `ceiling` lowered by `most` (a policy's limits for an adapter): each
/// limit `most` names and the ceiling exceeds, `most`'s.
pub fn lowered(ceiling: &RunLimits, most: &AskedLimits) -> RunLimits {
    let timeout = match (ceiling.timeout, most.timeout) {
        (Some(a), Some(Timeout::After(b))) => Some(a.min(b)),
        (None, Some(Timeout::After(b))) => Some(b),
        (a, _) => a,
    };
    RunLimits {
        timeout,
        fuel: match (ceiling.fuel, most.fuel) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        },
        max_memory_bytes: most.max_memory_bytes.map_or(ceiling.max_memory_bytes, |b| {
            b.min(ceiling.max_memory_bytes)
        }),
        max_program_memory_bytes: most
            .max_program_memory_bytes
            .or(most.max_memory_bytes)
            .map_or(ceiling.max_program_memory_bytes, |b| {
                b.min(ceiling.max_program_memory_bytes)
            }),
        max_event_bytes: most
            .max_event_bytes
            .map_or(ceiling.max_event_bytes, |b| b.min(ceiling.max_event_bytes)),
        max_connections: most
            .max_connections
            .map_or(ceiling.max_connections, |b| b.min(ceiling.max_connections)),
        max_open_files: most
            .max_open_files
            .map_or(ceiling.max_open_files, |b| b.min(ceiling.max_open_files)),
        max_processes: most
            .max_processes
            .map_or(ceiling.max_processes, |b| b.min(ceiling.max_processes)),
        milli_cpus: match (ceiling.milli_cpus, most.milli_cpus) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        },
    }
}

/// What a parent run leaves its children.
#[derive(Debug, Clone, PartialEq)]
pub struct ParentLimits {
    /// The parent.
    pub id: RunId,
    /// How long it has left; `None`: no limit.
    pub remaining: Option<Duration>,
    /// Its limits.
    pub limits: RecordedLimits,
}

/// The limits of a run asking `asked` of an adapter whose runs take
/// `default_timeout` unless told, under `ceiling` (the most of each limit,
/// held by `holder`) and `parent`.
///
/// Asking for more than the ceiling or the parent allows is refused,
/// except time: a child's timeout is cut to what its parent has left (the
/// parent's end would stop it then anyway).
pub fn narrow(
    asked: &AskedLimits,
    default_timeout: Duration,
    ceiling: &RunLimits,
    holder: &str,
    parent: Option<&ParentLimits>,
) -> Result<RunLimits, Refusal> {
    let ceiling_bound = || Bound::Ceiling(holder.to_owned());
    let defaults = RunLimits::default();
    // One count: asked (or the default), within the ceiling's and the
    // parent's.
    let count = |setting,
                 asked: Option<u64>,
                 default: u64,
                 most: u64,
                 of_parent: fn(&RecordedLimits) -> u64| {
        let parent = parent.map(|p| (of_parent(&p.limits), Bound::Parent(p.id.clone())));
        narrow_count(setting, asked, default, (most, ceiling_bound()), parent)
    };
    let size = |n: usize| n as u64;
    Ok(RunLimits {
        timeout: narrow_timeout(
            asked.timeout,
            default_timeout,
            ceiling.timeout,
            ceiling_bound,
            parent,
        )?,
        fuel: narrow_optional(
            Setting::Fuel,
            asked.fuel,
            ceiling.fuel,
            &ceiling_bound,
            parent.map(|p| (p.limits.fuel, &p.id)),
        )?,
        // A request's memory is the run's: the adapter's share of it is
        // at most what an adapter can have. Limits asked exactly (a job's,
        // with its programs' apart) are taken as they are: a forged
        // adapter memory is refused, not lowered.
        max_memory_bytes: count(
            Setting::MaxMemory,
            match asked.max_program_memory_bytes {
                Some(_) => asked.max_memory_bytes,
                None => asked.max_memory_bytes.map(|b| b.min(MAX_MEMORY_CEILING)),
            },
            defaults.max_memory_bytes,
            ceiling.max_memory_bytes,
            |p| p.max_memory_bytes,
        )?,
        max_program_memory_bytes: count(
            Setting::MaxMemory,
            asked.max_program_memory_bytes.or(asked.max_memory_bytes),
            defaults.max_program_memory_bytes,
            ceiling.max_program_memory_bytes,
            |p| p.max_program_memory_bytes,
        )?,
        max_event_bytes: count(
            Setting::MaxEventSize,
            asked.max_event_bytes.map(size),
            size(defaults.max_event_bytes),
            size(ceiling.max_event_bytes),
            |p| p.max_event_bytes,
        )? as usize,
        max_connections: count(
            Setting::MaxConnections,
            asked.max_connections.map(size),
            size(defaults.max_connections),
            size(ceiling.max_connections),
            |p| p.max_connections,
        )? as usize,
        max_open_files: count(
            Setting::MaxOpenFiles,
            asked.max_open_files.map(size),
            size(defaults.max_open_files),
            size(ceiling.max_open_files),
            |p| p.max_open_files,
        )? as usize,
        max_processes: count(
            Setting::MaxProcesses,
            asked.max_processes,
            defaults.max_processes,
            ceiling.max_processes,
            |p| p.max_processes,
        )?,
        milli_cpus: narrow_optional(
            Setting::Cpus,
            asked.milli_cpus,
            ceiling.milli_cpus,
            &ceiling_bound,
            parent.map(|p| (p.limits.milli_cpus, &p.id)),
        )?,
    })
}

fn narrow_timeout(
    asked: Option<Timeout>,
    default_timeout: Duration,
    ceiling: Option<Duration>,
    ceiling_bound: impl Fn() -> Bound,
    parent: Option<&ParentLimits>,
) -> Result<Option<Duration>, Refusal> {
    let wanted = match asked {
        Some(Timeout::After(after)) => Some(after),
        Some(Timeout::Never) => None,
        None => Some(match ceiling {
            Some(most) => default_timeout.min(most),
            None => default_timeout,
        }),
    };
    if let Some(most) = ceiling
        && wanted.is_none_or(|wanted| wanted > most)
    {
        return Err(Refusal::Limit {
            setting: Setting::Timeout,
            asked: wanted.map_or_else(|| "none".to_owned(), |w| format!("{}ms", w.as_millis())),
            most: format!("{}ms", most.as_millis()),
            bound: ceiling_bound(),
        });
    }
    // A child ends by its parent's deadline at the latest.
    Ok(match parent.and_then(|p| p.remaining) {
        Some(left) => Some(wanted.map_or(left, |wanted| wanted.min(left))),
        None => wanted,
    })
}

/// A limit that may be none (fuel, CPUs): asked, or the least of the
/// ceiling's and the parent's (`(its limit, its id)`).
fn narrow_optional(
    setting: Setting,
    asked: Option<u64>,
    ceiling: Option<u64>,
    ceiling_bound: &impl Fn() -> Bound,
    parent: Option<(Option<u64>, &RunId)>,
) -> Result<Option<u64>, Refusal> {
    let bounds = [
        (ceiling, ceiling_bound()),
        (
            parent.and_then(|(most, _)| most),
            parent.map_or_else(ceiling_bound, |(_, id)| Bound::Parent(id.clone())),
        ),
    ];
    let mut fuel = asked;
    for (most, bound) in bounds {
        let Some(most) = most else { continue };
        match (asked, fuel) {
            (Some(wanted), _) if wanted > most => {
                return Err(Refusal::Limit {
                    setting,
                    asked: wanted.to_string(),
                    most: most.to_string(),
                    bound,
                });
            }
            // Not asked: the least of the bounds.
            (None, current) => fuel = Some(current.map_or(most, |c| c.min(most))),
            _ => {}
        }
    }
    Ok(fuel)
}

fn narrow_count(
    setting: Setting,
    asked: Option<u64>,
    default: u64,
    ceiling: (u64, Bound),
    parent: Option<(u64, Bound)>,
) -> Result<u64, Refusal> {
    let Some(wanted) = asked else {
        let of_parent = parent.as_ref().map_or(u64::MAX, |(most, _)| *most);
        return Ok(default.min(ceiling.0).min(of_parent));
    };
    for (most, bound) in [Some(ceiling), parent].into_iter().flatten() {
        if wanted > most {
            return Err(Refusal::Limit {
                setting,
                asked: wanted.to_string(),
                most: most.to_string(),
                bound,
            });
        }
    }
    Ok(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    fn parent(memory: u64, fuel: Option<u64>, left: Duration) -> ParentLimits {
        ParentLimits {
            id: RunId::new(),
            remaining: Some(left),
            limits: RecordedLimits {
                fuel,
                max_memory_bytes: memory,
                ..RecordedLimits::of(&RunLimits::default())
            },
        }
    }

    #[test]
    fn what_is_not_asked_is_the_default_lowered_to_fit() {
        let mib = 1024 * 1024;
        let ceiling = RunLimits {
            max_open_files: 32,
            ..shared_host()
        };
        let limits = narrow(&AskedLimits::default(), HOUR, &ceiling, "h", None).unwrap();
        assert_eq!(limits.max_open_files, 32);
        assert_eq!(limits.timeout, Some(HOUR));
        assert_eq!(limits.fuel, None);

        let small = parent(64 * mib, Some(1000), Duration::from_secs(10));
        let child = narrow(&AskedLimits::default(), HOUR, &ceiling, "h", Some(&small)).unwrap();
        assert_eq!(child.max_memory_bytes, 64 * mib);
        assert_eq!(child.fuel, Some(1000));
        assert_eq!(child.timeout, Some(Duration::from_secs(10)));
    }

    #[test]
    fn asking_beyond_the_ceiling_or_the_parent_is_refused_and_says_which() {
        let mib = 1024 * 1024;
        let ceiling = shared_host();
        let many_files = AskedLimits {
            max_open_files: Some(10_000_000),
            ..AskedLimits::default()
        };
        let refused = narrow(&many_files, HOUR, &ceiling, "h", None).unwrap_err();
        assert!(
            matches!(
                refused,
                Refusal::Limit {
                    setting: Setting::MaxOpenFiles,
                    bound: Bound::Ceiling(_),
                    ..
                }
            ),
            "{refused:?}"
        );
        let small = parent(64 * mib, Some(1000), Duration::from_secs(10));
        let more_memory = AskedLimits {
            max_memory_bytes: Some(128 * mib),
            ..AskedLimits::default()
        };
        let refused = narrow(&more_memory, HOUR, &ceiling, "h", Some(&small)).unwrap_err();
        assert!(matches!(
            refused,
            Refusal::Limit {
                bound: Bound::Parent(_),
                ..
            }
        ));
        let more_fuel = AskedLimits {
            fuel: Some(5000),
            ..AskedLimits::default()
        };
        assert!(narrow(&more_fuel, HOUR, &ceiling, "h", Some(&small)).is_err());
        // Time is cut to what the parent has left, not refused.
        let longer = AskedLimits {
            timeout: Some(Timeout::Never),
            ..AskedLimits::default()
        };
        let cut = narrow(&longer, HOUR, &ceiling, "h", Some(&small)).unwrap();
        assert_eq!(cut.timeout, Some(Duration::from_secs(10)));
    }

    #[test]
    fn the_programs_limits_narrow_like_the_others() {
        let ceiling = RunLimits {
            max_processes: 256,
            milli_cpus: Some(2000),
            ..shared_host()
        };
        let limits = narrow(&AskedLimits::default(), HOUR, &ceiling, "h", None).unwrap();
        assert_eq!(limits.max_processes, 256, "the default, lowered to fit");
        assert_eq!(limits.milli_cpus, Some(2000), "the ceiling's, unasked");
        let free = narrow(&AskedLimits::default(), HOUR, &shared_host(), "h", None).unwrap();
        assert_eq!(free.max_processes, RunLimits::DEFAULT_MAX_PROCESSES);
        assert_eq!(free.milli_cpus, None, "no CPU limit by default");

        for (asked, setting) in [
            (
                AskedLimits {
                    max_processes: Some(1000),
                    ..AskedLimits::default()
                },
                Setting::MaxProcesses,
            ),
            (
                AskedLimits {
                    milli_cpus: Some(4000),
                    ..AskedLimits::default()
                },
                Setting::Cpus,
            ),
        ] {
            let refused = narrow(&asked, HOUR, &ceiling, "h", None).unwrap_err();
            assert!(
                matches!(refused, Refusal::Limit { setting: s, bound: Bound::Ceiling(_), .. } if s == setting),
                "{refused:?}"
            );
        }
        // A run's memory: its programs', the adapter's share at most an
        // adapter's ceiling; unasked, the defaults of each.
        let gib = 1024 * 1024 * 1024;
        let big = AskedLimits {
            max_memory_bytes: Some(8 * gib),
            ..AskedLimits::default()
        };
        let limits = narrow(&big, HOUR, &unbounded(), "h", None).unwrap();
        assert_eq!(limits.max_program_memory_bytes, 8 * gib);
        assert_eq!(limits.max_memory_bytes, MAX_MEMORY_CEILING);
        assert_eq!(
            free.max_program_memory_bytes,
            RunLimits::DEFAULT_MAX_PROGRAM_MEMORY_BYTES
        );
        assert_eq!(free.max_memory_bytes, RunLimits::DEFAULT_MAX_MEMORY_BYTES);
        let small_server = narrow(
            &AskedLimits {
                max_memory_bytes: Some(gib),
                ..AskedLimits::default()
            },
            HOUR,
            &unbounded(),
            "h",
            None,
        )
        .unwrap();
        let refused = narrow(&big, HOUR, &small_server, "h", None).unwrap_err();
        assert!(
            matches!(
                refused,
                Refusal::Limit {
                    setting: Setting::MaxMemory,
                    bound: Bound::Ceiling(_),
                    ..
                }
            ),
            "{refused:?}"
        );
        let under = narrow(&AskedLimits::default(), HOUR, &small_server, "h", None).unwrap();
        assert_eq!(
            under.max_program_memory_bytes, gib,
            "the default, lowered to fit"
        );

        // A child: within what its parent has.
        let mut limited = parent(64 * 1024 * 1024, None, HOUR);
        limited.limits.max_processes = 32;
        limited.limits.milli_cpus = Some(500);
        let child = narrow(
            &AskedLimits::default(),
            HOUR,
            &shared_host(),
            "h",
            Some(&limited),
        )
        .unwrap();
        assert_eq!((child.max_processes, child.milli_cpus), (32, Some(500)));
        let more = AskedLimits {
            milli_cpus: Some(1000),
            ..AskedLimits::default()
        };
        let refused = narrow(&more, HOUR, &shared_host(), "h", Some(&limited)).unwrap_err();
        assert!(
            matches!(
                refused,
                Refusal::Limit {
                    setting: Setting::Cpus,
                    bound: Bound::Parent(_),
                    ..
                }
            ),
            "{refused:?}"
        );
    }

    #[test]
    fn no_timeout_is_refused_under_a_ceiling_with_one() {
        let ceiling = RunLimits {
            timeout: Some(Duration::from_secs(60)),
            ..shared_host()
        };
        let never = AskedLimits {
            timeout: Some(Timeout::Never),
            ..AskedLimits::default()
        };
        assert!(narrow(&never, HOUR, &ceiling, "h", None).is_err());
        let defaulted = narrow(&AskedLimits::default(), HOUR, &ceiling, "h", None).unwrap();
        assert_eq!(defaulted.timeout, Some(Duration::from_secs(60)));
    }
}
