//! What a run's programs may take together: `--max-processes` (the run's
//! cgroup's `pids.max`) and `--cpus` (`cpu.max`), end to end through the
//! real `moat` binary with real `python3` and `sh`. Each limit is also
//! tried where it is not set (the default, or a run without the flag),
//! where the same program goes past it.

use std::time::Duration;

use moat_engine::DoneStatus;
use moat_testkit::{error_codes, error_message, single_done};

use crate::egress::{python, shell, word};

/// Whether this machine holds the limits of a run's programs: a cgroup
/// that moat may make, with the controllers (v2, or a hybrid layout's v1
/// hierarchies).
fn limits_held_here() -> bool {
    let root = unsafe { libc::geteuid() } == 0;
    let v2 = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .contains(" - cgroup2 ");
    root && v2
}

/// A program that forks `n` children (each sleeping, its output closed:
/// the shell's output ends with the program's), then kills them.
fn forks(n: usize) -> String {
    python(
        "forks",
        &format!(
            "import time; k=[os.fork() or (os.closerange(1, 3), time.sleep(30), os._exit(0)) for i in range({n})]; [os.kill(p, 9) for p in k]"
        ),
    )
}

/// How many `error` events with `code` the run had.
fn count_of(events: &[moat_engine::AgentEvent], code: &str) -> usize {
    error_codes(events).iter().filter(|c| *c == code).count()
}

/// What a limit is tried with: the program, its probe's word held and
/// free, the flag, the error's code and the words its message names.
struct Trial<'a> {
    script: &'a str,
    probe: &'a str,
    held: &'a str,
    free: &'a str,
    flag: &'a str,
    code: &'a str,
    words: &'a str,
}

/// Runs `trial`'s program contained and not: under its flag it is held
/// (the probe says `held`, one recoverable `code` error naming the words
/// and the flag, the run a success); under the default it is not.
fn held_to(trial: Trial) {
    let flag_name = trial.flag.split('=').next().unwrap();
    for contain in [true, false] {
        let mode: Vec<String> = if contain {
            Vec::new()
        } else {
            vec!["--no-contain".into()]
        };
        let limited = [mode.clone(), vec![trial.flag.to_owned()]].concat();
        let (output, events, printed) = shell(trial.script, &limited, &[]);
        let said = format!(
            "contained: {contain}: {printed}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(word(&printed, trial.probe), trial.held, "{said}");
        assert_eq!(count_of(&events, trial.code), 1, "{said}");
        let message = error_message(&events, trial.code);
        assert!(message.contains(trial.words), "{message}");
        assert!(message.contains(flag_name), "{message}");
        // Recoverable: the adapter went on and ended the run its way.
        assert_eq!(single_done(&events).status, DoneStatus::Success, "{said}");

        // The same program under the default limit is not held.
        let (_, events, printed) = shell(trial.script, &mode, &[]);
        assert_eq!(
            word(&printed, trial.probe),
            trial.free,
            "contained: {contain}: {printed}"
        );
        assert_eq!(count_of(&events, trial.code), 0);
    }
}

#[test]
fn a_fork_past_the_process_limit_is_refused_and_the_run_says_which_limit() {
    if !limits_held_here() {
        eprintln!("skipped: no cgroup moat may limit here");
        return;
    }
    held_to(Trial {
        script: &forks(100),
        probe: "forks",
        held: "refused:EAGAIN",
        free: "reached",
        flag: "--max-processes=40",
        code: "PROCESS_LIMIT",
        words: "40 processes",
    });
}

#[test]
fn a_program_past_the_memory_limit_is_killed_and_the_run_says_which_limit() {
    if !limits_held_here() {
        eprintln!("skipped: no cgroup moat may limit here");
        return;
    }
    // 300 MB written (so the pages are there); `$?` is 137 when the
    // kernel killed it, 0 under the default (4 GiB).
    held_to(Trial {
        script: "/usr/bin/python3 -c 'b = b\"x\" * (300 * 1024 * 1024)'; echo memory=$?",
        probe: "memory",
        held: "137",
        free: "0",
        flag: "--max-memory=128MiB",
        code: "MEMORY_LIMIT",
        words: "128 MiB",
    });
}

#[test]
fn a_fork_bomb_in_one_run_leaves_another_run_unharmed() {
    if !limits_held_here() {
        eprintln!("skipped: no cgroup moat may limit here");
        return;
    }
    // The bomb forks until the limit and stays there for ten seconds
    // (bash retries a refused fork); the other run starts while it does.
    let bomb = std::thread::spawn(|| {
        shell(
            "timeout -s KILL 10 bash -c ':(){ :|:& };:' 2>/dev/null; echo bomb=over",
            &["--max-processes=200".into()],
            &[],
        )
    });
    std::thread::sleep(Duration::from_secs(2));
    let (output, events, printed) = shell(
        &python(
            "other",
            "[os.waitpid(os.fork() or os._exit(0), 0) for i in range(20)]",
        ),
        &[],
        &[],
    );
    assert_eq!(
        word(&printed, "other"),
        "reached",
        "{printed}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(single_done(&events).status, DoneStatus::Success);
    let (_, events, printed) = bomb.join().unwrap();
    assert_eq!(word(&printed, "bomb"), "over", "{printed}");
    assert!(
        count_of(&events, "PROCESS_LIMIT") >= 1,
        "the bomb met the limit: {printed}"
    );
}

#[test]
fn a_spinning_program_gets_the_cpus_the_run_may_use() {
    if !limits_held_here() {
        eprintln!("skipped: no cgroup moat may limit here");
        return;
    }
    let cpu = |flags: &[String]| -> u32 {
        let (output, _, printed) = shell(&spin_script(), flags, &[]);
        word(&printed, "cpu")
            .parse()
            .unwrap_or_else(|_| panic!("{printed}: {}", String::from_utf8_lossy(&output.stderr)))
    };
    let limited = cpu(&["--cpus=0.2".into()]);
    let free = cpu(&[]);
    // A fifth of a CPU: about 40 hundredths of the two seconds;
    // unlimited, all it can get beside the other tests (on two CPUs at
    // least, more than one second).
    assert!(limited <= 55, "limited to 0.2 CPUs, it got {limited}/100 s");
    assert!(free >= 90, "unlimited, it got {free}/100 s");
}

/// A program that spins for two seconds of wall time and prints the CPU
/// time it got, in hundredths of a second (`cpu=N`).
fn spin_script() -> String {
    "/usr/bin/python3 -c 'exec(\"import os, time\\nend = time.time() + 2\\nwhile time.time() < end: pass\\nt = os.times()\\nprint(\\\"cpu=\\\" + str(round((t.user + t.system) * 100)))\")'".to_owned()
}

#[test]
fn a_limit_that_cannot_be_held_here_is_refused_up_front_not_ignored() {
    for setting in crate::own_network::settings() {
        if setting.wrapper().is_empty() {
            continue;
        }
        // An unprivileged user: no cgroup moat may make here (moat's is
        // root's), so no limit of its programs can be held by one...
        let refused = |flag: &str, extra: &[&str]| {
            let mut flags = vec![flag];
            flags.extend(extra);
            let (output, events, printed) =
                shell(&forks(5), &setting.flags(&flags), &setting.wrapper());
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{flag}: {printed}\n{stderr}");
            assert!(events.is_empty(), "{flag}: the run never started");
            let name = flag.split('=').next().unwrap();
            assert!(
                stderr.contains(&format!("{name} cannot be held here"))
                    && stderr.contains("systemd-run --user --scope"),
                "{flag}: {stderr}"
            );
        };
        for flag in ["--max-memory=512MiB", "--cpus=0.5"] {
            refused(flag, &[]);
        }
        // ...but a contained run's programs have a user namespace of the
        // run's own, whose process count is the run's: its init holds the
        // process limit (RLIMIT_NPROC), which an uncontained run's cannot.
        let (output, events, printed) = shell(
            &forks(60),
            &setting.flags(&["--max-processes=40"]),
            &setting.wrapper(),
        );
        let said = format!("{printed}\n{}", String::from_utf8_lossy(&output.stderr));
        assert_eq!(word(&printed, "forks"), "refused:EAGAIN", "{said}");
        assert_eq!(single_done(&events).status, DoneStatus::Success, "{said}");
        refused("--max-processes=40", &["--no-contain"]);
        // Without the flags, the run goes on, the same program under the
        // default limits.
        let (_, events, printed) = shell(&forks(60), &setting.flags(&[]), &setting.wrapper());
        assert_eq!(word(&printed, "forks"), "reached", "{printed}");
        assert_eq!(single_done(&events).status, DoneStatus::Success);
        // A user whose own hard limit is below the default: its programs
        // start, held to the user's limit.
        let mut capped = vec!["prlimit", "--nproc=3000:3000"];
        capped.extend(setting.wrapper());
        let (output, events, printed) = shell(&forks(5), &setting.flags(&[]), &capped);
        let said = format!("{printed}\n{}", String::from_utf8_lossy(&output.stderr));
        assert_eq!(word(&printed, "forks"), "reached", "{said}");
        assert_eq!(single_done(&events).status, DoneStatus::Success, "{said}");
    }
}

#[test]
fn doctor_says_which_limits_of_the_programs_hold_here() {
    for setting in crate::own_network::settings() {
        let wrapper = setting.wrapper();
        let output = crate::egress::moat_through(&wrapper)
            .arg("doctor")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stdout);
        let line = said
            .lines()
            .find(|line| line.contains("program limits"))
            .unwrap_or_else(|| panic!("{said}"));
        if wrapper.is_empty() && limits_held_here() {
            assert!(line.starts_with("ok"), "{line}");
            for limit in ["--max-memory", "--max-processes", "--cpus"] {
                assert!(line.contains(limit), "{line}");
            }
        } else {
            assert!(
                line.starts_with("missing") && line.contains("systemd-run --user --scope"),
                "{}: {line}",
                setting.who()
            );
            // Where programs have a user namespace of the run's own (an
            // unprivileged user's, here), the process limit holds there.
            if !wrapper.is_empty() {
                assert!(
                    line.contains("held here: processes (--max-processes: RLIMIT_NPROC"),
                    "{line}"
                );
            }
        }
    }
}

/// A server's memory budget (`--max-total-memory`) counts the programs'
/// memory of a run that may start programs and asked for its memory: two
/// such runs of 2 GiB (1 GiB of it the adapter's) do not fit in 4 GiB
/// together, where counting the adapters alone they would. A run that
/// starts no program counts its adapter's share only, and one that did
/// not ask for its memory its adapter's default (its programs' default
/// ceiling is not reserved).
#[test]
fn a_servers_memory_budget_counts_the_programs_memory_a_run_asked_for() {
    use moat_testkit::components::ESCAPE;
    use serde_json::json;

    use crate::serve::client::Server;

    let (_server, mut client) = Server::stdio(&["--max-total-memory", "4GiB", "--allow-run=sh"]);
    let run = |memory: Option<&str>, programs: bool| {
        // Asking no grants would be asking the server's (`sh` among them).
        let grants = if programs {
            json!({"run": ["sh"]})
        } else {
            json!({})
        };
        let mut fields = json!({"adapter": ESCAPE, "prompt": "shell sleep 60", "grants": grants});
        if let Some(memory) = memory {
            fields["limits"] = json!({"maxMemoryBytes": memory});
        }
        fields
    };
    // 1 GiB of adapter and 2 GiB of programs: 3 GiB held.
    let first = client.ok("run", run(Some("2GiB"), true))["run"]
        .as_str()
        .unwrap()
        .to_owned();
    // Another 3 GiB does not fit in the 1 GiB left (the adapter's 1 GiB
    // alone would).
    let refused = client.error("run", run(Some("2GiB"), true));
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("4.0 GiB they may hold together") && message.contains("3.0 GiB"),
        "{refused}"
    );
    // Without programs, its adapter's share only: 512 MiB of the 1 GiB.
    let adapter_only = client.ok("run", run(Some("512MiB"), false));
    // Programs, their memory not asked for: the adapter's 256 MiB.
    let default = client.ok("run", run(None, true));
    let runs = [
        first,
        adapter_only["run"].as_str().unwrap().to_owned(),
        default["run"].as_str().unwrap().to_owned(),
    ];
    for run in &runs {
        client.ok("cancel", json!({"run": run}));
    }
}

/// `moat parallel` under a total memory counts the programs' memory of
/// its tasks the same way: two tasks of 2 GiB that may start programs do
/// not run together within 4 GiB (each waits for room: one's span ends
/// before the other's begins), and do within 8 GiB.
#[test]
fn parallel_tasks_wait_for_room_for_their_programs_memory() {
    use moat_testkit::components::ESCAPE;

    // The span of a task: when its program started and ended.
    let span = |label: &str| {
        format!(
            "{label}:{ESCAPE}=shell echo {label}s=$(date +%s%N); sleep 1.5; echo {label}e=$(date +%s%N)"
        )
    };
    let (a, b) = (span("a"), span("b"));
    let overlapping = |total: &str| {
        let output = crate::cli::common::moat()
            .args(["parallel", "--task", &a, "--task", &b, "--allow-run=sh"])
            .args(["--max-memory=2GiB", "--max-total-memory", total])
            .args(["--output", "ndjson"])
            .output()
            .unwrap();
        let events = crate::cli::common::events(&output);
        let printed: String = events
            .iter()
            .filter_map(|event| match &event.payload {
                moat_engine::EventPayload::Text(text) => Some(text.content.clone()),
                _ => None,
            })
            .collect();
        // `out=as=…|ae=…`: the digits after the probe's name.
        let at = |probe: &str| -> u128 {
            let (_, after) = printed
                .split_once(&format!("{probe}="))
                .unwrap_or_else(|| panic!("no {probe} in {printed}"));
            let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap()
        };
        let said = format!("{printed}\n{}", String::from_utf8_lossy(&output.stderr));
        assert_eq!(output.status.code(), Some(0), "{said}");
        at("as") < at("be") && at("bs") < at("ae")
    };
    assert!(!overlapping("4GiB"), "one at a time within 4 GiB");
    assert!(overlapping("8GiB"), "together within 8 GiB");
}

/// An operator who keeps runs out of cgroups (`MOAT_RUN_CGROUPS=0`) has
/// no limit a cgroup holds: a run asking `--max-memory` is refused up
/// front (as root, where the same run is held without the switch), and
/// `moat doctor` says none holds.
#[test]
fn runs_kept_out_of_cgroups_refuse_the_limits_they_cannot_hold() {
    if !limits_held_here() {
        return;
    }
    let asked = |switch: &[(&str, &str)]| {
        let mut command = crate::cli::common::moat();
        command.envs(switch.iter().copied());
        command
            .args(["run", "echo", "hi", "--allow-run=sh", "--max-memory=512MiB"])
            .args(["--no-store", "--output", "text"])
            .output()
            .unwrap()
    };
    let held = asked(&[]);
    assert_eq!(held.status.code(), Some(0), "{held:?}");
    let refused = asked(&[("MOAT_RUN_CGROUPS", "0")]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--max-memory cannot be held here"),
        "{stderr}"
    );
    let doctor = crate::cli::common::moat()
        .env("MOAT_RUN_CGROUPS", "0")
        .arg("doctor")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(said.contains("held here: none"), "{said}");
}
