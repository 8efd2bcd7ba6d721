//! The command line's words for settings and grants: the flags. The
//! libraries state problems as data; this is where they become "raise it
//! with --fuel" and "run with --allow-net=example.com:80".

use moat_engine::{Grant, Setting, SettingNames};

/// Names every setting and grant by the `moat` flag that sets it.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlagNames;

impl SettingNames for FlagNames {
    fn setting(&self, setting: Setting) -> String {
        match setting {
            Setting::Timeout => "--timeout",
            Setting::Fuel => "--fuel",
            Setting::MaxMemory => "--max-memory",
            Setting::AllowedTools => "--allowed-tools",
            Setting::DisallowedTools => "--disallowed-tools",
            Setting::MaxEventSize => "--max-event-size",
            Setting::MaxConnections => "--max-connections",
            Setting::MaxOpenFiles => "--max-open-files",
            Setting::MaxProcesses => "--max-processes",
            Setting::Cpus => "--cpus",
            Setting::Trust => "--trust",
            Setting::AllowNet => "--allow-net",
            Setting::AllowRead => "--allow-read",
            Setting::AllowWrite => "--allow-write",
            Setting::AllowEnv => "--allow-env",
            Setting::AllowRun => "--allow-run",
            Setting::Secret => "--secret",
            Setting::AllowUnixSocket => "--allow-unix-socket",
            Setting::AllowWriteProtected => "--allow-write-protected",
            Setting::AllowUnmetered => "--allow-unmetered",
            Setting::Meter => "--meter",
            Setting::MaxBudget => "--max-budget-usd",
            Setting::MaxTokens => "--max-tokens",
            Setting::Model => "--model",
            Setting::MaxModelCalls => "--max-model-calls",
        }
        .to_owned()
    }

    fn assignment(&self, setting: Setting, value: &str) -> String {
        format!("{}={}", self.setting(setting), flag_value(value))
    }

    fn grant(&self, grant: &Grant) -> String {
        match grant {
            Grant::Net { host, port } => {
                format!(
                    "run with --allow-net={}",
                    flag_value(&format!("{host}:{port}"))
                )
            }
            Grant::Read { dir } => format!("run with --allow-read={}", flag_value(dir)),
            Grant::Run { program } => format!("run with --allow-run={}", flag_value(program)),
            Grant::RunByNameOrPath => {
                "run with --allow-run with a program name or an absolute path".to_owned()
            }
            Grant::Env { name } => format!("run with --allow-env={}", flag_value(name)),
            Grant::UnixSocket { path } => {
                format!("run with --allow-unix-socket={}", flag_value(path))
            }
            Grant::Unmetered => "run with --allow-unmetered".to_owned(),
        }
    }
}

/// `value` as typed after `--flag=`: as it is when a shell leaves it
/// alone, quoted otherwise (it may come from an adapter).
fn flag_value(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+@:[]".contains(c));
    if plain {
        value.to_owned()
    } else {
        format!("{value:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_named_by_the_flag_that_gives_them() {
        let net = Grant::Net {
            host: "[::1]".into(),
            port: 9000,
        };
        assert_eq!(FlagNames.grant(&net), "run with --allow-net=[::1]:9000");
        let program = Grant::Run {
            program: "/opt/my tool".into(),
        };
        assert_eq!(
            FlagNames.grant(&program),
            "run with --allow-run=\"/opt/my tool\""
        );
        let dir = Grant::Read { dir: "/etc".into() };
        assert_eq!(FlagNames.grant(&dir), "run with --allow-read=/etc");
        assert_eq!(FlagNames.setting(Setting::Fuel), "--fuel");
    }
}
