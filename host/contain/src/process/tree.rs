//! Finding what a run's children started, where no cgroup holds it
//! ([`super::cgroup`]): the process tree read from `/proc`, and the orphans
//! moat adopts.
//!
//! Process groups reach what stays in a child's group; a descendant that
//! calls `setsid` leaves it. Walking the tree from the run's children
//! finds such a descendant while its parents live. One whose parent died
//! is re-parented; moat makes itself the "child subreaper" of its process
//! (`PR_SET_CHILD_SUBREAPER`) so such orphans come to moat rather than to
//! init, and kills them when no other run could have started them.

use std::collections::{HashMap, HashSet};
use std::sync::Once;

/// Makes moat the subreaper of its descendants, once per process.
pub(crate) fn adopt_orphans() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: prctl with these arguments has no memory-safety
        // preconditions.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == -1 {
            tracing::warn!(
                "cannot adopt orphaned processes: {}",
                std::io::Error::last_os_error()
            );
        }
    });
}

/// Every process and its parent, read from `/proc`.
fn parents() -> HashMap<u32, u32> {
    let mut parents = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return parents;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid …": the name may hold spaces and parens.
        let Some(after) = stat.rfind(')').map(|at| &stat[at + 1..]) else {
            continue;
        };
        if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            parents.insert(pid, ppid);
        }
    }
    parents
}

/// Every live descendant of `roots` (not the roots themselves).
pub(crate) fn descendants(roots: &[u32]) -> Vec<u32> {
    let parents = parents();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, &ppid) in &parents {
        children.entry(ppid).or_default().push(pid);
    }
    let mut found = Vec::new();
    let mut seen: HashSet<u32> = roots.iter().copied().collect();
    let mut queue: Vec<u32> = roots.to_vec();
    while let Some(pid) = queue.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            if seen.insert(child) {
                found.push(child);
                queue.push(child);
            }
        }
    }
    found
}

/// The processes moat adopted (its children it did not start itself:
/// `started` are the ones it did), with theirs.
pub(crate) fn adopted(started: &HashSet<u32>) -> Vec<u32> {
    let host = std::process::id();
    let orphans: Vec<u32> = parents()
        .into_iter()
        .filter(|&(pid, ppid)| ppid == host && !started.contains(&pid))
        .map(|(pid, _)| pid)
        .collect();
    let mut all = descendants(&orphans);
    all.extend(orphans);
    all
}

/// Kills `pids` and reaps the ones that are moat's children (adopted
/// orphans are: nobody else would wait for them).
pub(crate) fn kill_and_reap(pids: &[u32]) {
    let pids: Vec<libc::pid_t> = pids
        .iter()
        .filter_map(|&pid| libc::pid_t::try_from(pid).ok())
        .filter(|&pid| pid > 1)
        .collect();
    for &pid in &pids {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let until = std::time::Instant::now() + std::time::Duration::from_millis(200);
    let mut waiting = pids;
    while !waiting.is_empty() && std::time::Instant::now() < until {
        // SAFETY: waitpid has no memory-safety preconditions; a pid that is
        // not moat's child answers ECHILD at once.
        waiting.retain(|&pid| unsafe {
            libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG | libc::__WALL) == 0
        });
        if !waiting.is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

/// The entries of `dir` named `<prefix><pid>-…` whose moat process `pid`
/// is gone: what a moat killed with `SIGKILL` could not remove itself.
pub(crate) fn left_by_gone_moats(dir: &std::path::Path, prefix: &str) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| {
            let name = entry.file_name();
            let owner = name
                .to_str()
                .and_then(|name| name.strip_prefix(prefix))
                .and_then(|rest| rest.split_once('-'))
                .and_then(|(pid, _)| pid.parse::<libc::pid_t>().ok());
            owner.is_some_and(|pid| pid > 0 && !process_exists(pid))
        })
        .map(|entry| entry.path())
        .collect()
}

/// Whether a process with this id exists (of any user).
pub(crate) fn process_exists(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks; it has no memory-safety preconditions.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_are_found_through_the_process_tree() {
        // sh starts a sleep in a session of its own (setsid), leaving its
        // process group; the tree still leads to it.
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 30 & echo started; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(shell.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let found = descendants(&[shell.id()]);
        assert!(!found.is_empty(), "the setsid sleep is found");
        for pid in &found {
            // SAFETY: no memory-safety preconditions.
            unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
        }
        shell.kill().unwrap();
        shell.wait().unwrap();
    }
}
