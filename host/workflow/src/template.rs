//! Prompt templates: `{{name}}` is replaced by a value moat knows when the
//! task starts. Only these names exist, so a typo is found when the file is
//! checked, not in a model's answer.

/// The names a template may use.
pub const NAMES: [&str; 4] = ["task", "workflow", "attempt", "iteration"];

/// The values of one attempt.
#[derive(Debug, Clone, Copy)]
pub struct Values<'a> {
    /// The task's id.
    pub task: &'a str,
    /// The workflow's name.
    pub workflow: &'a str,
    /// The attempt, from 1.
    pub attempt: u32,
    /// The loop's iteration, from 1 (1 for a task without a loop).
    pub iteration: u32,
}

/// Checks that every `{{…}}` in `template` is a known name and closed.
pub fn check(template: &str) -> Result<(), String> {
    for piece in pieces(template) {
        match piece {
            Piece::Text(_) => {}
            Piece::Name(name) if NAMES.contains(&name) => {}
            Piece::Name(name) => {
                return Err(format!(
                    "the prompt uses {{{{{name}}}}}, which is not one of {}",
                    NAMES.map(|n| format!("{{{{{n}}}}}")).join(", ")
                ));
            }
            Piece::Unclosed => return Err("the prompt has a `{{` without its `}}`".into()),
        }
    }
    Ok(())
}

/// `template` with its names replaced (an unknown one is left as it is:
/// [`check`] refuses it first).
pub fn render(template: &str, values: Values<'_>) -> String {
    let mut out = String::with_capacity(template.len());
    for piece in pieces(template) {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Name("task") => out.push_str(values.task),
            Piece::Name("workflow") => out.push_str(values.workflow),
            Piece::Name("attempt") => out.push_str(&values.attempt.to_string()),
            Piece::Name("iteration") => out.push_str(&values.iteration.to_string()),
            Piece::Name(other) => {
                out.push_str("{{");
                out.push_str(other);
                out.push_str("}}");
            }
            Piece::Unclosed => {}
        }
    }
    out
}

enum Piece<'a> {
    Text(&'a str),
    Name(&'a str),
    Unclosed,
}

fn pieces(template: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        pieces.push(Piece::Text(&rest[..open]));
        let after = &rest[open + 2..];
        match after.find("}}") {
            Some(close) => {
                pieces.push(Piece::Name(after[..close].trim()));
                rest = &after[close + 2..];
            }
            None => {
                pieces.push(Piece::Text(&rest[open..]));
                pieces.push(Piece::Unclosed);
                return pieces;
            }
        }
    }
    pieces.push(Piece::Text(rest));
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_known_names_and_refuses_others() {
        let values = Values {
            task: "review",
            workflow: "ship",
            attempt: 2,
            iteration: 3,
        };
        assert_eq!(
            render(
                "{{task}} of {{ workflow }}, try {{attempt}}, round {{iteration}}",
                values
            ),
            "review of ship, try 2, round 3"
        );
        assert!(check("plain {{task}}").is_ok());
        assert!(check("{{tsak}}").unwrap_err().contains("{{tsak}}"));
        assert!(check("{{task").is_err());
    }
}
