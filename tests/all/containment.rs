//! Granted programs are contained (Landlock): a granted `sh` reaches the
//! run's grants, the system's programs and its private directory, and
//! nothing else of the user's files; it cannot signal moat. Without
//! containment it has the user's rights: the same probes succeed.

use std::path::PathBuf;

use moat_engine::DoneStatus;
use moat_grants::Confinement;
use moat_grants::Grants;
use moat_testkit::components::ESCAPE;
use moat_testkit::{run_component, single_done, texts};

/// A directory the run is not granted, holding a secret; one granted for
/// reading, holding a note; one granted for writing.
struct Dirs {
    _root: tempfile::TempDir,
    secret: PathBuf,
    readable: PathBuf,
    writable: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(root.path()).unwrap();
    let [secret, readable, writable] = ["secret", "readable", "writable"].map(|name| {
        let dir = base.join(name);
        std::fs::create_dir(&dir).unwrap();
        dir
    });
    std::fs::write(secret.join("key"), "the-secret").unwrap();
    std::fs::write(readable.join("note"), "the-note").unwrap();
    Dirs {
        _root: root,
        secret,
        readable,
        writable,
    }
}

/// Runs one `shell` probe with `sh` granted, the dirs' grants and
/// `confinement`: what the script printed.
async fn shell(dirs: &Dirs, script: &str, confinement: Confinement) -> String {
    let grants = Grants {
        run: vec!["sh".into()],
        read: vec![dirs.readable.clone()],
        write: vec![dirs.writable.clone()],
        ..Grants::none()
    };
    let events = run_component(ESCAPE, &format!("shell {script}"), |request| {
        request.scope.grants = grants;
        request.scope.confinement = confinement;
    })
    .await;
    assert_eq!(single_done(&events).status, DoneStatus::Success);
    texts(&events).concat()
}

/// A script that tries each thing and prints one word per outcome.
fn probes(dirs: &Dirs) -> String {
    let try_ = |label: &str, command: String| {
        format!("if {command} >/dev/null 2>&1; then echo {label}=yes; else echo {label}=no; fi;")
    };
    [
        try_("secret", format!("cat {}/key", dirs.secret.display())),
        try_(
            "home",
            format!("ls {}", std::env::var("HOME").expect("HOME is set")),
        ),
        try_("note", format!("cat {}/note", dirs.readable.display())),
        try_(
            "write-read-grant",
            format!("touch {}/new", dirs.readable.display()),
        ),
        try_(
            "write-grant",
            format!("touch {}/new", dirs.writable.display()),
        ),
        try_("tmp", "touch \"$TMPDIR/scratch\"".to_string()),
        // The parent of the run's directories: where any temporary file of
        // the user's lives.
        try_(
            "shared-tmp",
            format!("touch {}/shared", dirs.secret.parent().unwrap().display()),
        ),
        try_("signal-moat", "kill -0 $PPID".to_string()),
    ]
    .concat()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_program_reaches_only_the_runs_grants() {
    assert!(
        moat_contain::landlock_available(),
        "this kernel has no Landlock: containment cannot be tested here"
    );
    let dirs = dirs();
    let out = shell(&dirs, &probes(&dirs), Confinement::default()).await;
    for expected in [
        "secret=no",
        "home=no",
        "note=yes",
        "write-read-grant=no",
        "write-grant=yes",
        "tmp=yes",
        "shared-tmp=no",
        "signal-moat=no",
    ] {
        assert!(out.contains(expected), "{expected} in {out}");
    }
    assert!(!dirs.secret.parent().unwrap().join("shared").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_programs_own_state_is_writable_when_its_profile_says_so() {
    let dirs = dirs();
    let state = dirs.secret.clone();
    let script = format!(
        "cat {}/key && echo more >> {}/key",
        state.display(),
        state.display()
    );
    let out = shell(
        &dirs,
        &script,
        Confinement::Contained {
            state_dirs: vec![state.clone()],
            state_files: Vec::new(),
            read_only: Vec::new(),
        },
    )
    .await;
    assert!(out.contains("the-secret"), "{out}");
    assert_eq!(
        std::fs::read_to_string(state.join("key")).unwrap(),
        "the-secretmore\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_containment_a_program_has_the_users_rights() {
    let dirs = dirs();
    let out = shell(&dirs, &probes(&dirs), Confinement::Off).await;
    for expected in ["secret=yes", "write-read-grant=yes", "signal-moat=yes"] {
        assert!(out.contains(expected), "{expected} in {out}");
    }
}

/// The same line through the real `moat` binary, as this user and as an
/// unprivileged one (`setpriv` to an unused uid), with namespaces and
/// without (Landlock and seccomp): a contained program is
/// refused (`EACCES`) what its grants do not name — a file beside the
/// grants, a write into a read grant, a file next to its directory — and
/// reaches what they do; with `--no-contain` the same program, as the same
/// user, reaches all of it.
#[test]
fn through_the_binary_as_any_user_a_program_reaches_only_its_grants() {
    use crate::egress::{python, shell, word};
    use crate::own_network::settings;

    for setting in settings() {
        let secret = setting.dir().join("secret");
        let readable = setting.dir().join("readable");
        for dir in [&secret, &readable] {
            std::fs::create_dir(dir).unwrap();
        }
        std::fs::write(secret.join("key"), "the-secret").unwrap();
        std::fs::write(readable.join("note"), "the-note").unwrap();
        for path in [&secret, &readable, &setting.grant()] {
            setting.own(path);
        }
        let open = |name: &str, path: String, mode: &str| {
            python(name, &format!("open(\"{path}\", \"{mode}\").close()"))
        };
        let script = [
            open("secret", format!("{}/key", secret.display()), "r"),
            open("note", format!("{}/note", readable.display()), "r"),
            open(
                "write-read-grant",
                format!("{}/new", readable.display()),
                "w",
            ),
            open(
                "write-grant",
                format!("{}/new", setting.grant().display()),
                "w",
            ),
            open("beside", format!("{}/beside", setting.dir().display()), "w"),
        ]
        .concat();
        let read_grant = format!("--allow-read={}", readable.display());
        // Under both mechanisms: namespaces, and Landlock and seccomp
        // where no namespace may be made.
        let mut shared = setting.wrapper();
        shared.extend(crate::egress::NO_NAMESPACES);
        for (contained, wrapper) in [
            (true, setting.wrapper()),
            (true, shared.clone()),
            (false, setting.wrapper()),
            (false, shared),
        ] {
            let mut extra = vec![read_grant.as_str()];
            if !contained {
                extra.push("--no-contain");
            }
            let (output, events, printed) = shell(&script, &setting.flags(&extra), &wrapper);
            let said = format!(
                "{}, contained: {contained}, {wrapper:?}: printed: {printed}\nstderr: {}",
                setting.who(),
                String::from_utf8_lossy(&output.stderr)
            );
            assert_eq!(single_done(&events).status, DoneStatus::Success, "{said}");
            for granted in ["note", "write-grant"] {
                assert_eq!(word(&printed, granted), "reached", "{granted}: {said}");
            }
            let outside = ["secret", "write-read-grant", "beside"];
            for probe in outside {
                let expected = if contained {
                    "refused:EACCES"
                } else {
                    "reached"
                };
                assert_eq!(word(&printed, probe), expected, "{probe}: {said}");
            }
            assert_eq!(setting.dir().join("beside").exists(), !contained, "{said}");
            let _ = std::fs::remove_file(setting.dir().join("beside"));
            let _ = std::fs::remove_file(readable.join("new"));
        }
    }
}
