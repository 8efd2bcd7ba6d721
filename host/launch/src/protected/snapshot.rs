//! What a protected path held when a run started, and putting it back:
//! each file's bytes and mode, each link's target, each directory's
//! entries. Nothing here follows a link: a link is kept as a link, and a
//! link the run made on the way to a protected path is removed.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use moat_grants::protected::Kind;
use serde_json::Value;

/// The most bytes of one file kept to put it back; a larger file is kept
/// by its size, time and inode, so a change is seen and reported but not
/// undone.
const MOST_KEPT_FILE: u64 = 1 << 20;

/// The most entries of one protected directory kept.
const MOST_ENTRIES: usize = 10_000;

/// The most levels of directories kept below a protected directory: a
/// tree deeper than this (anyone could have made one there) is kept as
/// being a directory, not entry by entry, and the walk stays shallow.
const MOST_DEPTH: usize = 32;

/// What was at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    Missing,
    File {
        mode: u32,
        /// `None` when too large to keep.
        bytes: Option<Vec<u8>>,
        /// Size, change time and inode: how a file too large to keep is
        /// compared.
        stamp: (u64, i64, i64, u64),
    },
    Link(PathBuf),
    /// A directory; `entries` is `None` when its entries are not kept
    /// (a [`Kind::File`] entry that is a directory, or too many).
    Dir {
        mode: u32,
        entries: Option<BTreeMap<OsString, Node>>,
    },
    /// A socket, a device: kept by being there.
    Other,
}

/// What a run did to one path, and what moat did about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) path: PathBuf,
    pub(crate) what: &'static str,
    /// Why the path is protected.
    pub(crate) why: &'static str,
}

/// What is at `path` now, to compare with what was: directories without
/// their entries, files with their bytes when `bytes` (else by their
/// stamp alone).
fn now(path: &Path, bytes: bool) -> Node {
    take(path, None, bytes, &mut 0)
}

/// `path` as it is; directories with their entries `depth` levels down
/// when `Some` (up to `left` entries in all), files with their bytes when
/// `bytes`.
fn take(path: &Path, depth: Option<usize>, bytes: bool, left: &mut usize) -> Node {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Node::Missing;
    };
    let kind = meta.file_type();
    let mode = meta.permissions().mode() & 0o7777;
    if kind.is_symlink() {
        return fs::read_link(path).map_or(Node::Other, Node::Link);
    }
    if kind.is_file() {
        let stamp = (meta.len(), meta.ctime(), meta.ctime_nsec(), meta.ino());
        let bytes = (bytes && meta.len() <= MOST_KEPT_FILE)
            .then(|| read(path, meta.len()))
            .flatten();
        return Node::File { mode, bytes, stamp };
    }
    if kind.is_dir() {
        let entries = depth
            .filter(|depth| *depth > 0)
            .and_then(|depth| entries(path, depth - 1, left));
        return Node::Dir { mode, entries };
    }
    Node::Other
}

/// The bytes of the file at `path`, of `len` bytes when it was looked
/// at (read to its end whatever it holds now). Opened without following a
/// link or waiting: a pipe put there since opens at once.
fn read(path: &Path, len: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).ok()?.saturating_add(1));
    file.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The entries of `dir`, each kept `depth` levels further down.
fn entries(dir: &Path, depth: usize, left: &mut usize) -> Option<BTreeMap<OsString, Node>> {
    let mut kept = BTreeMap::new();
    for entry in fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        if *left == 0 {
            return None;
        }
        *left -= 1;
        kept.insert(
            entry.file_name(),
            take(&entry.path(), Some(depth), true, left),
        );
    }
    Some(kept)
}

/// A protected path as the run found it.
#[derive(Debug)]
pub(crate) struct Kept {
    pub(crate) path: PathBuf,
    pub(crate) kind: Kind,
    pub(crate) why: &'static str,
    /// The directories between the write grant that covers it and it.
    pub(crate) between: Vec<PathBuf>,
    /// Which of those were links when the run started (the user's own).
    pub(crate) links: Vec<PathBuf>,
    pub(crate) node: Node,
}

/// A protected path kept by runs live in this process, as the first of
/// them found it.
struct Held {
    node: Node,
    links: Vec<PathBuf>,
    holders: usize,
}

/// The protected paths runs of this process keep. A run started while
/// another holds a path takes the path as that one found it, not as it is
/// now: what a run planted is not taken for the user's by a run beside it
/// (which would put it back after the first removed it).
fn held() -> std::sync::MutexGuard<'static, std::collections::HashMap<PathBuf, Held>> {
    static HELD: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<PathBuf, Held>>> =
        std::sync::OnceLock::new();
    HELD.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Kept {
    /// `path` (of `kind`) as it is now, under the write grant `root` — or
    /// as another run live in this process found it.
    pub(crate) fn take(path: PathBuf, kind: Kind, why: &'static str, root: &Path) -> Self {
        let between: Vec<PathBuf> = path
            .ancestors()
            .skip(1)
            .take_while(|dir| dir.starts_with(root) && *dir != root)
            .map(Path::to_path_buf)
            .collect();
        let mut all = held();
        let (node, links) = match all.get_mut(&path) {
            Some(held) => {
                held.holders += 1;
                (held.node.clone(), held.links.clone())
            }
            None => {
                let links: Vec<PathBuf> =
                    between.iter().filter(|dir| is_link(dir)).cloned().collect();
                let depth = (kind == Kind::Dir).then_some(MOST_DEPTH);
                let mut left = MOST_ENTRIES;
                let node = take(&path, depth, true, &mut left);
                all.insert(
                    path.clone(),
                    Held {
                        node: node.clone(),
                        links: links.clone(),
                        holders: 1,
                    },
                );
                (node, links)
            }
        };
        drop(all);
        Self {
            path,
            kind,
            why,
            between,
            links,
            node,
        }
    }

    /// Whether it may be made read-only where it is (a mount over it): a
    /// file or directory of its kind that is there. Not a file holding a
    /// program's state beside its commands (the program writes it), nor
    /// `.git` kept as a worktree's link that is a repository here.
    pub(crate) fn read_only(&self) -> bool {
        matches!(
            (self.kind, &self.node),
            (Kind::File, Node::File { .. }) | (Kind::Dir, Node::Dir { .. })
        )
    }

    /// Puts the path back as it was, as far as the run changed it: what
    /// it made is removed, what it changed or removed is written back.
    pub(crate) fn put_back(&self, changes: &mut Vec<Change>) {
        // A link made on the way would make the path mean another place.
        for dir in self.between.iter().rev() {
            if is_link(dir) && !self.links.contains(dir) {
                let _ = fs::remove_file(dir);
                changes.push(self.change(dir, "a link made on the way to it; removed"));
                // What the link led to is not the protected path: there
                // is nothing more to compare.
                if let Some(parent) = self.path.parent() {
                    let _ = fs::create_dir_all(parent);
                }
                return self.recreate(&self.path, &self.node, changes, false);
            }
        }
        match self.kind {
            Kind::JsonCommands(members) => self.merge_back(members, changes),
            Kind::File | Kind::Dir => self.compare(&self.path, &self.node, changes),
        }
    }

    /// `path` against `was`, changes undone.
    fn compare(&self, path: &Path, was: &Node, changes: &mut Vec<Change>) {
        let deep = matches!(
            was,
            Node::Dir {
                entries: Some(_),
                ..
            }
        ) || (self.kind == Kind::Dir && *was == Node::Missing);
        let now = now(path, false);
        match (was, &now) {
            (Node::Missing, Node::Missing) => {}
            // A directory where a protected file was missing: `git init`
            // making `.git`, whose own entries are protected.
            (Node::Missing, Node::Dir { .. }) if !deep => {}
            (Node::Missing, _) => {
                remove(path);
                changes.push(self.change(path, "made; removed"));
            }
            (
                Node::Dir {
                    mode,
                    entries: Some(entries),
                },
                Node::Dir { mode: now_mode, .. },
            ) => {
                if mode != now_mode {
                    let _ = fs::set_permissions(path, fs::Permissions::from_mode(*mode));
                    changes.push(self.change(path, "its mode changed; put back"));
                }
                let mut names: Vec<OsString> = fs::read_dir(path)
                    .map(|dir| dir.flatten().map(|e| e.file_name()).collect())
                    .unwrap_or_default();
                names.extend(entries.keys().cloned());
                names.sort();
                names.dedup();
                for name in names {
                    let was = entries.get(&name).unwrap_or(&Node::Missing);
                    self.compare(&path.join(&name), was, changes);
                }
            }
            // Its entries not kept: only being a directory matters.
            (Node::Dir { entries: None, .. }, Node::Dir { .. }) => {}
            (
                Node::File { mode, bytes, stamp },
                Node::File {
                    mode: now_mode,
                    stamp: now_stamp,
                    ..
                },
            ) => {
                // Its inode's change time moves with every write: the
                // same stamp is the same file, without reading it again.
                let same = stamp == now_stamp
                    || bytes.as_ref().is_some_and(|bytes| {
                        read(path, now_stamp.0).is_some_and(|now| now == *bytes)
                    });
                if same && mode == now_mode {
                    return;
                }
                if same {
                    let _ = fs::set_permissions(path, fs::Permissions::from_mode(*mode));
                    changes.push(self.change(path, "its mode changed; put back"));
                    return;
                }
                self.recreate(path, was, changes, true);
            }
            (Node::Link(target), Node::Link(now)) if target == now => {}
            (Node::Other, Node::Other) => {}
            _ => self.recreate(path, was, changes, true),
        }
    }

    /// Removes what is at `path` and writes back what `was` there.
    fn recreate(&self, path: &Path, was: &Node, changes: &mut Vec<Change>, report: bool) {
        remove(path);
        let what = match was {
            Node::Missing => "made; removed",
            Node::File { bytes: None, .. } => "changed; too large to keep, removed",
            Node::Dir { entries: None, .. } => "replaced; removed",
            Node::Other => "replaced; removed",
            _ => "changed; put back",
        };
        write_back(path, was);
        if report {
            changes.push(self.change(path, what));
        }
    }

    /// Puts back the members of a JSON file that name programs; the rest,
    /// the program's state, stays as the run left it.
    fn merge_back(&self, members: &[&str], changes: &mut Vec<Change>) {
        let now = now(&self.path, true);
        let (
            Node::File {
                bytes: Some(was), ..
            },
            Node::File {
                bytes: Some(is), ..
            },
        ) = (&self.node, &now)
        else {
            return self.compare(&self.path, &self.node, changes);
        };
        if was == is {
            return;
        }
        let (Ok(was_json), Ok(mut is_json)) = (
            serde_json::from_slice::<Value>(was),
            serde_json::from_slice::<Value>(is),
        ) else {
            return self.recreate(&self.path, &self.node, changes, true);
        };
        let mut put_back = false;
        for member in members {
            let path: Vec<&str> = member.split('.').collect();
            put_back |= restore_member(&was_json, &mut is_json, &path);
        }
        if !put_back {
            return;
        }
        let Ok(mut text) = serde_json::to_vec_pretty(&is_json) else {
            return;
        };
        text.push(b'\n');
        let mode = match self.node {
            Node::File { mode, .. } => mode,
            _ => 0o600,
        };
        remove(&self.path);
        write_file(&self.path, mode, &text);
        changes.push(self.change(
            &self.path,
            "commands in it changed; put back, its state kept",
        ));
    }

    fn change(&self, path: &Path, what: &'static str) -> Change {
        Change {
            path: path.to_path_buf(),
            what,
            why: self.why,
        }
    }
}

impl Drop for Kept {
    /// The run no longer keeps the path: the last to keep it lets it go.
    fn drop(&mut self) {
        let mut all = held();
        if let Some(held) = all.get_mut(&self.path) {
            held.holders = held.holders.saturating_sub(1);
            if held.holders == 0 {
                all.remove(&self.path);
            }
        }
    }
}

/// Makes `member` (a path of names, `*` for every member of an object)
/// of `now` what it was in `was`; whether anything changed.
fn restore_member(was: &Value, now: &mut Value, member: &[&str]) -> bool {
    let Some((first, rest)) = member.split_first() else {
        return false;
    };
    let Some(object) = now.as_object_mut() else {
        return false;
    };
    if *first == "*" {
        let mut changed = false;
        for (name, inner) in object.iter_mut() {
            let was_inner = was.get(name).unwrap_or(&Value::Null);
            changed |= restore_member(was_inner, inner, rest);
        }
        return changed;
    }
    let was_inner = was.get(*first);
    if rest.is_empty() {
        let changed = object.get(*first) != was_inner;
        match was_inner {
            Some(value) => {
                object.insert((*first).to_owned(), value.clone());
            }
            None => {
                object.remove(*first);
            }
        }
        return changed;
    }
    match object.get_mut(*first) {
        Some(inner) => restore_member(was_inner.unwrap_or(&Value::Null), inner, rest),
        None => false,
    }
}

fn is_link(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink())
}

/// Removes whatever is at `path`, a directory with everything in it,
/// following no link.
fn remove(path: &Path) {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            let _ = fs::remove_dir_all(path);
        }
        Ok(_) => {
            let _ = fs::remove_file(path);
        }
        Err(_) => {}
    }
}

/// Writes `node` at `path`, where nothing is.
fn write_back(path: &Path, node: &Node) {
    match node {
        Node::File {
            mode,
            bytes: Some(bytes),
            ..
        } => write_file(path, *mode, bytes),
        Node::Link(target) => {
            let _ = std::os::unix::fs::symlink(target, path);
        }
        Node::Dir {
            mode,
            entries: Some(entries),
        } if fs::create_dir(path).is_ok() => {
            for (name, inner) in entries {
                write_back(&path.join(name), inner);
            }
            let _ = fs::set_permissions(path, fs::Permissions::from_mode(*mode));
        }
        _ => {}
    }
}

/// A new file at `path` (never through a link) with `bytes`.
fn write_file(path: &Path, mode: u32, bytes: &[u8]) {
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path);
    if let Ok(mut file) = file {
        let _ = file.write_all(bytes);
        let _ = file.set_permissions(fs::Permissions::from_mode(mode));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(path: &Path, kind: Kind, root: &Path) -> Kept {
        Kept::take(path.to_path_buf(), kind, "why", root)
    }

    fn put_back(kept: &Kept) -> Vec<String> {
        let mut changes = Vec::new();
        kept.put_back(&mut changes);
        changes
            .iter()
            .map(|c| {
                format!(
                    "{} {}",
                    c.path.file_name().unwrap().to_string_lossy(),
                    c.what
                )
            })
            .collect()
    }

    #[test]
    fn a_directory_is_put_back_entry_by_entry_and_what_is_unchanged_stays() {
        let dir = tempfile::tempdir().unwrap();
        let hooks = dir.path().join("hooks");
        fs::create_dir(&hooks).unwrap();
        fs::write(hooks.join("kept"), "same").unwrap();
        fs::write(hooks.join("changed"), "before").unwrap();
        let before = kept(&hooks, Kind::Dir, dir.path());
        let inode = fs::metadata(hooks.join("kept")).unwrap().ino();
        fs::write(hooks.join("changed"), "after").unwrap();
        fs::write(hooks.join("made"), "new").unwrap();
        fs::set_permissions(hooks.join("kept"), fs::Permissions::from_mode(0o755)).unwrap();
        let mut said = put_back(&before);
        said.sort();
        assert_eq!(
            said,
            [
                "changed changed; put back",
                "kept its mode changed; put back",
                "made made; removed"
            ]
        );
        assert_eq!(fs::read_to_string(hooks.join("changed")).unwrap(), "before");
        assert!(!hooks.join("made").exists());
        assert_eq!(fs::metadata(hooks.join("kept")).unwrap().ino(), inode);
        assert!(put_back(&before).is_empty(), "nothing left to put back");
    }

    #[test]
    fn a_run_beside_another_takes_what_the_first_found_not_what_it_planted() {
        let dir = tempfile::tempdir().unwrap();
        let envrc = dir.path().join(".envrc");
        let first = kept(&envrc, Kind::File, dir.path());
        fs::write(&envrc, "planted").unwrap();
        let beside = kept(&envrc, Kind::File, dir.path());
        assert_eq!(put_back(&first), [".envrc made; removed"]);
        drop(first);
        assert!(put_back(&beside).is_empty(), "nothing to put back");
        assert!(!envrc.exists(), "the planted file is not put back");
        drop(beside);
        // Let go by both: a later run takes the path as it is.
        fs::write(&envrc, "the user's").unwrap();
        let later = kept(&envrc, Kind::File, dir.path());
        assert!(later.read_only());
    }

    #[test]
    fn a_pipe_in_a_files_place_is_removed_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let hook = dir.path().join("post-checkout");
        fs::write(&hook, "the user's").unwrap();
        let before = kept(&hook, Kind::File, dir.path());
        fs::remove_file(&hook).unwrap();
        let path = std::ffi::CString::new(hook.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
        assert!(read(&hook, 0).is_none(), "a pipe is not read");
        assert_eq!(put_back(&before), ["post-checkout changed; put back"]);
        assert_eq!(fs::read_to_string(&hook).unwrap(), "the user's");
    }

    #[test]
    fn a_deep_tree_is_kept_to_a_depth_and_the_walk_stays_shallow() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join(".vscode");
        let mut deepest = top.clone();
        for _ in 0..MOST_DEPTH * 4 {
            deepest.push("d");
        }
        fs::create_dir_all(&deepest).unwrap();
        let before = kept(&top, Kind::Dir, dir.path());
        let shallow = top.join("d/d/tasks.json");
        fs::write(&shallow, "planted").unwrap();
        fs::write(deepest.join("tasks.json"), "below what is kept").unwrap();
        assert_eq!(put_back(&before), ["tasks.json made; removed"]);
        assert!(!shallow.exists());
        assert!(
            deepest.join("tasks.json").exists(),
            "kept as being a directory"
        );
    }

    #[test]
    fn a_missing_file_may_become_a_directory_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join(".git");
        let before = kept(&git, Kind::File, dir.path());
        fs::create_dir(&git).unwrap();
        assert!(put_back(&before).is_empty(), "git init makes .git");
        fs::remove_dir(&git).unwrap();
        fs::write(&git, "gitdir: /elsewhere\n").unwrap();
        assert_eq!(put_back(&before), [".git made; removed"]);
        assert!(!git.exists());
    }

    #[test]
    fn a_link_made_on_the_way_is_removed_and_what_it_hid_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let claude = dir.path().join(".claude");
        fs::create_dir(&claude).unwrap();
        fs::write(claude.join("settings.json"), "{}").unwrap();
        let before = kept(&claude.join("settings.json"), Kind::File, dir.path());
        fs::create_dir(dir.path().join("other")).unwrap();
        fs::write(dir.path().join("other/settings.json"), "{\"hooks\":1}").unwrap();
        fs::remove_dir_all(&claude).unwrap();
        std::os::unix::fs::symlink("other", &claude).unwrap();
        assert_eq!(
            put_back(&before),
            [".claude a link made on the way to it; removed"]
        );
        assert_eq!(
            fs::read_to_string(claude.join("settings.json")).unwrap(),
            "{}"
        );
        assert!(
            !fs::symlink_metadata(&claude)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn claude_json_keeps_the_runs_state_and_loses_its_servers() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".claude.json");
        fs::write(
            &file,
            r#"{"numStartups":1,"mcpServers":{"mine":{"command":"a"}},"projects":{"/p":{"history":[]}}}"#,
        )
        .unwrap();
        let before = kept(
            &file,
            Kind::JsonCommands(&["mcpServers", "projects.*.mcpServers"]),
            dir.path(),
        );
        fs::write(
            &file,
            r#"{"numStartups":2,"mcpServers":{"evil":{"command":"b"}},"projects":{"/p":{"history":["x"],"mcpServers":{"e":{}}},"/q":{"mcpServers":{"f":{}}}}}"#,
        )
        .unwrap();
        assert_eq!(
            put_back(&before),
            [".claude.json commands in it changed; put back, its state kept"]
        );
        let now: Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
        assert_eq!(now["numStartups"], 2);
        assert_eq!(
            now["mcpServers"],
            serde_json::json!({"mine": {"command": "a"}})
        );
        assert_eq!(now["projects"]["/p"], serde_json::json!({"history": ["x"]}));
        assert_eq!(now["projects"]["/q"], serde_json::json!({}));
        // State alone changed: nothing to put back.
        fs::write(
            &file,
            r#"{"numStartups":3,"mcpServers":{"mine":{"command":"a"}}}"#,
        )
        .unwrap();
        let before = kept(&file, Kind::JsonCommands(&["mcpServers"]), dir.path());
        fs::write(
            &file,
            r#"{"numStartups":4,"mcpServers":{"mine":{"command":"a"}}}"#,
        )
        .unwrap();
        assert!(put_back(&before).is_empty());
    }
}
