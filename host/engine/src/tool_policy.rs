//! The tool policy of a run (ENG-013): which tools an adapter may use.
//!
//! The effective set is `allowed_tools` minus `disallowed_tools`:
//!
//! - `allowed_tools: None`: no restriction from the caller (every tool not
//!   disallowed); `Some(vec![])`: no tools at all.
//! - `disallowed_tools` removes tools from that set.
//!
//! It is enforced twice. The adapter receives the effective list in its
//! options ([`ToolPolicy::adapter_options`]) and maps it to its backend,
//! or refuses the run when it cannot. The engine does not trust that: it
//! checks every `tool_use` and `permission_request` with
//! [`ToolPolicy::check`] and ends the run fail-closed on a tool outside the
//! set.
//!
//! Names match exactly. Only when the adapter declares
//! `info().tool_patterns` are list entries patterns: `*` then matches any
//! run of characters, possibly empty (`mcp__*`, `*_read`, `*`), and every
//! other character matches itself. There is no escape, so such an adapter
//! cannot name a tool containing a literal `*` apart from the pattern.

use super::adapter::RunOptions;
use super::names::{FieldNames, Setting, SettingNames};

/// A tool the run's policy does not permit.
///
/// Its `Display` names the lists by the library's field names
/// ([`FieldNames`]); [`message`](Self::message) names them in the caller's
/// words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolPolicyViolation {
    /// An entry of `disallowed_tools` names the tool.
    #[error("{}", self.message(&FieldNames))]
    Disallowed {
        /// The tool the adapter used.
        tool: String,
        /// The `disallowed_tools` entry that matched it.
        entry: String,
    },
    /// `allowed_tools` was given and no entry names the tool.
    #[error("{}", self.message(&FieldNames))]
    NotAllowed {
        /// The tool the adapter used.
        tool: String,
        /// The `allowed_tools` entries.
        allowed: Vec<String>,
    },
}

impl ToolPolicyViolation {
    /// The tool the adapter tried to use.
    pub fn tool(&self) -> &str {
        match self {
            Self::Disallowed { tool, .. } | Self::NotAllowed { tool, .. } => tool,
        }
    }

    /// What happened, naming the lists as the caller's users write them.
    pub fn message(&self, names: &dyn SettingNames) -> String {
        match self {
            Self::Disallowed { tool, entry } => format!(
                "the adapter tried to use the tool `{tool}`, which {} forbids (entry `{entry}`); the run was stopped",
                names.setting(Setting::DisallowedTools)
            ),
            Self::NotAllowed { tool, allowed } => {
                let allowed_tools = names.setting(Setting::AllowedTools);
                let why = if allowed.is_empty() {
                    format!("but {allowed_tools} is empty, so no tool is allowed")
                } else {
                    format!(
                        "which {allowed_tools} does not include (allowed: {})",
                        allowed.join(", ")
                    )
                };
                format!("the adapter tried to use the tool `{tool}`, {why}; the run was stopped")
            }
        }
    }
}

/// The tools one run may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolPolicy {
    allowed: Option<Vec<String>>,
    disallowed: Vec<String>,
    patterns: bool,
}

impl ToolPolicy {
    /// A policy from the two lists; `patterns` turns on `*` wildcards (the
    /// adapter's `info().tool_patterns`).
    pub fn new(allowed: Option<Vec<String>>, disallowed: Vec<String>, patterns: bool) -> Self {
        Self {
            allowed,
            disallowed,
            patterns,
        }
    }

    /// The policy of a run with `options`, for an adapter that does or does
    /// not understand patterns.
    pub fn from_options(options: &RunOptions, patterns: bool) -> Self {
        Self::new(
            options.allowed_tools.clone(),
            options.disallowed_tools.clone(),
            patterns,
        )
    }

    /// Whether every tool is permitted (no list restricts anything).
    pub fn is_unrestricted(&self) -> bool {
        self.allowed.is_none() && self.disallowed.is_empty()
    }

    /// Checks one tool the adapter used or asked to use.
    pub fn check(&self, tool: &str) -> Result<(), ToolPolicyViolation> {
        // A disallowed entry wins over an allowed one: that is the
        // "minus" of the effective set, and names the more precise flag.
        if let Some(entry) = self.disallowed.iter().find(|d| self.matches(d, tool)) {
            return Err(ToolPolicyViolation::Disallowed {
                tool: shown(tool),
                entry: entry.clone(),
            });
        }
        match &self.allowed {
            Some(allowed) if !allowed.iter().any(|a| self.matches(a, tool)) => {
                Err(ToolPolicyViolation::NotAllowed {
                    tool: shown(tool),
                    allowed: allowed.clone(),
                })
            }
            _ => Ok(()),
        }
    }

    /// The allowed list with the disallowed entries taken out, in the
    /// caller's order without repeats; `None` when no allowed list was
    /// given.
    ///
    /// With patterns, an allowed entry goes when a disallowed entry matches
    /// it as a whole (`read_*` removes `read_file` and `read_*`). What
    /// cannot be subtracted from a list (`mcp__*` minus `mcp__shell`) stays
    /// in it and is left to the disallowed list, which the adapter receives
    /// too.
    pub fn effective_allowed(&self) -> Option<Vec<String>> {
        let allowed = self.allowed.as_ref()?;
        let mut effective: Vec<String> = Vec::with_capacity(allowed.len());
        for entry in allowed {
            let removed = self.disallowed.iter().any(|d| self.matches(d, entry));
            if !removed && !effective.contains(entry) {
                effective.push(entry.clone());
            }
        }
        Some(effective)
    }

    /// `options` as the adapter receives them: `allowed_tools` is the
    /// effective list when an allowed list was given, `disallowed_tools`
    /// is passed through.
    pub fn adapter_options(&self, options: &RunOptions) -> RunOptions {
        RunOptions {
            allowed_tools: self.effective_allowed(),
            ..options.clone()
        }
    }

    fn matches(&self, entry: &str, tool: &str) -> bool {
        if self.patterns {
            glob_match(entry, tool)
        } else {
            entry == tool
        }
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of
/// characters and everything else matches itself.
///
/// Greedy with one backtrack point (the last `*`), so it runs in
/// O(pattern × name) at worst and never recurses: patterns come from
/// users and names from untrusted adapters.
fn glob_match(pattern: &str, name: &str) -> bool {
    // Bytes are enough: `*` is ASCII and never part of a multi-byte UTF-8
    // sequence, and literal parts compare equal as bytes exactly when they
    // do as characters.
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    // Where the last `*` was, and where in the name it started matching.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((star_pi, star_ni)) = star {
            // Let the last `*` swallow one more character and retry.
            pi = star_pi + 1;
            ni = star_ni + 1;
            star = Some((star_pi, star_ni + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

/// Longest tool name quoted in a violation: the name comes from the
/// guest, unbounded, and goes into an error event and the log.
const MAX_TOOL_NAME_SHOWN: usize = 200;

/// `tool` as quoted in a violation, cut to [`MAX_TOOL_NAME_SHOWN`] chars.
fn shown(tool: &str) -> String {
    match tool.char_indices().nth(MAX_TOOL_NAME_SHOWN) {
        Some((end, _)) => format!("{}…", &tool[..end]),
        None => tool.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn policy(allowed: Option<&[&str]>, disallowed: &[&str], patterns: bool) -> ToolPolicy {
        ToolPolicy::new(allowed.map(names), names(disallowed), patterns)
    }

    #[test]
    fn no_lists_allow_everything() {
        let p = policy(None, &[], false);
        assert!(p.is_unrestricted());
        assert_eq!(p.check("anything"), Ok(()));
        assert_eq!(p.effective_allowed(), None);
    }

    #[test]
    fn an_allowed_list_restricts_to_its_exact_names() {
        let p = policy(Some(&["read", "grep"]), &[], false);
        assert!(!p.is_unrestricted());
        assert_eq!(p.check("read"), Ok(()));
        assert_eq!(p.check("grep"), Ok(()));
        for other in ["Read", "read ", "bash", "", "rea"] {
            assert!(p.check(other).is_err(), "{other:?}");
        }
    }

    #[test]
    fn an_empty_allowed_list_allows_no_tool() {
        let p = policy(Some(&[]), &[], false);
        let err = p.check("read").unwrap_err();
        assert_eq!(err.tool(), "read");
        assert!(
            err.to_string().contains("`options.allowed_tools` is empty"),
            "{err}"
        );
        assert_eq!(p.effective_allowed(), Some(vec![]));
    }

    #[test]
    fn disallowed_removes_from_the_allowed_set() {
        let p = policy(Some(&["read", "write", "read"]), &["write"], false);
        assert_eq!(p.effective_allowed(), Some(names(&["read"])));
        assert_eq!(p.check("read"), Ok(()));
        assert_eq!(
            p.check("write"),
            Err(ToolPolicyViolation::Disallowed {
                tool: "write".into(),
                entry: "write".into()
            })
        );
    }

    #[test]
    fn disallowed_alone_removes_from_every_tool() {
        let p = policy(None, &["bash"], false);
        assert!(!p.is_unrestricted());
        assert_eq!(p.check("read"), Ok(()));
        assert!(p.check("bash").is_err());
        assert_eq!(p.effective_allowed(), None);
    }

    #[test]
    fn messages_name_the_tool_and_the_list_in_the_callers_words() {
        struct Flags;
        impl SettingNames for Flags {
            fn setting(&self, setting: Setting) -> String {
                format!("--{setting:?}")
            }
            fn grant(&self, _: &crate::Grant) -> String {
                unreachable!()
            }
        }
        let p = policy(Some(&["read", "grep"]), &["grep"], false);
        let not_allowed = p.check("bash").unwrap_err().message(&Flags);
        assert!(not_allowed.contains("`bash`"), "{not_allowed}");
        assert!(not_allowed.contains("--AllowedTools"), "{not_allowed}");
        assert!(not_allowed.contains("read, grep"), "{not_allowed}");
        let disallowed = p.check("grep").unwrap_err().message(&Flags);
        assert!(disallowed.contains("`grep`"), "{disallowed}");
        assert!(disallowed.contains("--DisallowedTools"), "{disallowed}");
        let plain = p.check("grep").unwrap_err().to_string();
        assert!(plain.contains("`options.disallowed_tools`"), "{plain}");
    }

    #[test]
    fn without_pattern_support_a_star_is_an_ordinary_character() {
        let p = policy(Some(&["mcp__*"]), &[], false);
        assert!(p.check("mcp__files").is_err());
        assert_eq!(p.check("mcp__*"), Ok(()));
    }

    #[test]
    fn with_pattern_support_stars_are_wildcards() {
        let p = policy(Some(&["mcp__*", "*_read", "exact"]), &["mcp__shell*"], true);
        assert_eq!(p.check("mcp__files"), Ok(()));
        assert_eq!(p.check("mcp__"), Ok(()));
        assert_eq!(p.check("file_read"), Ok(()));
        assert_eq!(p.check("_read"), Ok(()));
        assert_eq!(p.check("exact"), Ok(()));
        assert!(p.check("exactly").is_err());
        assert!(p.check("mcp_files").is_err());
        assert!(matches!(
            p.check("mcp__shell_exec"),
            Err(ToolPolicyViolation::Disallowed { entry, .. }) if entry == "mcp__shell*"
        ));
    }

    #[test]
    fn with_patterns_the_effective_list_drops_entries_a_disallowed_pattern_covers() {
        let p = policy(
            Some(&["read_file", "read_*", "mcp__*", "write"]),
            &["read_*", "mcp__shell"],
            true,
        );
        assert_eq!(p.effective_allowed(), Some(names(&["mcp__*", "write"])));
        assert!(
            p.check("mcp__shell").is_err(),
            "left to the disallowed list"
        );
        assert_eq!(p.check("mcp__git"), Ok(()));
    }

    #[test]
    fn adapter_options_carry_the_effective_list_and_the_disallowed_list() {
        let options = RunOptions {
            model: Some("m".into()),
            allowed_tools: Some(names(&["read", "bash"])),
            disallowed_tools: names(&["bash", "rm"]),
            ..RunOptions::default()
        };
        let p = ToolPolicy::from_options(&options, false);
        let given = p.adapter_options(&options);
        assert_eq!(given.allowed_tools, Some(names(&["read"])));
        assert_eq!(given.disallowed_tools, names(&["bash", "rm"]));
        assert_eq!(given.model.as_deref(), Some("m"));

        let open = RunOptions::default();
        let given = ToolPolicy::from_options(&open, false).adapter_options(&open);
        assert_eq!(given, open);
    }

    #[test]
    fn glob_matching() {
        let cases = [
            ("*", "", true),
            ("*", "abc", true),
            ("", "", true),
            ("", "a", false),
            ("a*", "a", true),
            ("a*", "ba", false),
            ("*a", "ba", true),
            ("*a", "ab", false),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "abc", true),
            ("a*b*c", "acb", false),
            ("a**b", "ab", true),
            ("*ab", "aab", true),
            ("*aab", "aaab", true),
            ("x*y", "x", false),
            ("é*", "éa", true),
            ("*é", "aé", true),
        ];
        for (pattern, name, expected) in cases {
            assert_eq!(glob_match(pattern, name), expected, "{pattern:?} {name:?}");
        }
    }

    #[test]
    fn glob_matching_stays_fast_on_hostile_input() {
        let pattern = format!("{}b", "*a".repeat(50));
        let name = "a".repeat(5000);
        assert!(!glob_match(&pattern, &name));
    }

    #[test]
    fn a_huge_tool_name_is_quoted_cut_short() {
        let policy = ToolPolicy::new(Some(vec!["Read".into()]), vec![], false);
        let huge = "x".repeat(1_000_000);
        let violation = policy.check(&huge).unwrap_err();
        assert!(violation.to_string().len() < 1_000);
        assert!(violation.tool().ends_with('…'));
    }
}
