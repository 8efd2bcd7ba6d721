//! A task's prompt, assembled in this order:
//!
//! 1. the **constitution** — its files, merged in the order the workflow
//!    lists them;
//! 2. the **handover** of each task it depends on (in `depends_on`
//!    order), then its own from the previous iteration of its loop;
//! 3. the contents of its **input files**, each headed by its path;
//! 4. the **task** itself: its rendered prompt, the files it must produce
//!    and how to hand over.
//!
//! The whole must fit the workflow's `context_budget` (bytes). The task
//! comes first: it is never cut, and a task that does not fit alone fails.
//! The rest take what is left in the order above; a piece that does not
//! fit is cut, and says so in the prompt itself (`[moat: truncated …]`),
//! and the engine reports a `context_truncated` event: truncation is
//! visible, never silent. The markers are the only bytes outside the
//! budget.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Map, Value};

use crate::definition::{Task, Workflow};
use crate::handover::FENCE_INFO;
use crate::template::{self, Values};

/// A piece that was cut to fit the budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// Which piece: `constitution PATH`, `handover of ID`, `input PATH`.
    pub piece: String,
    /// The bytes of it in the prompt.
    pub shown: usize,
    /// Its whole size.
    pub total: usize,
}

/// An assembled prompt.
#[derive(Debug, Clone)]
pub struct Assembled {
    /// The prompt.
    pub prompt: String,
    /// What was cut.
    pub truncations: Vec<Truncation>,
}

/// The handovers a task receives.
#[derive(Debug, Clone, Default)]
pub struct Handovers<'a> {
    /// Of the tasks it depends on, in `depends_on` order.
    pub dependencies: Vec<(&'a str, &'a Map<String, Value>)>,
    /// Its own, from its loop's previous iteration.
    pub previous: Option<&'a Map<String, Value>>,
}

/// Where a piece's text comes from.
enum Text<'a> {
    /// A file of the project, read only as far as it fits.
    File(&'a Path),
    /// A handover, as JSON.
    Json(String),
}

/// One piece of context under its header.
struct Piece<'a> {
    name: String,
    header: String,
    text: Text<'a>,
}

/// The pieces of context under their headings, in order.
fn sections<'a>(
    workflow: &'a Workflow,
    task: &'a Task,
    handovers: &Handovers<'_>,
) -> Vec<(&'static str, Vec<Piece<'a>>)> {
    let constitution = workflow
        .constitution
        .iter()
        .map(|path| {
            let shown = path
                .strip_prefix(&workflow.project)
                .unwrap_or(path)
                .display()
                .to_string();
            Piece {
                name: format!("constitution {shown}"),
                header: String::new(),
                text: Text::File(path),
            }
        })
        .collect();
    let json = |handover: &Map<String, Value>| {
        Text::Json(serde_json::to_string_pretty(handover).unwrap_or_default())
    };
    let handover = handovers
        .dependencies
        .iter()
        .map(|(id, handover)| Piece {
            name: format!("handover of {id}"),
            header: format!("## {id}\n"),
            text: json(handover),
        })
        .chain(handovers.previous.map(|handover| Piece {
            name: format!("handover of {}", task.id),
            header: format!("## {} (your previous iteration)\n", task.id),
            text: json(handover),
        }))
        .collect();
    let inputs = task
        .inputs
        .iter()
        .map(|input| Piece {
            name: format!("input {}", input.display()),
            header: format!("## {}\n", input.display()),
            text: Text::File(Path::new(input)),
        })
        .collect();
    [
        ("# Constitution\n\n", constitution),
        ("# Handover from earlier tasks\n\n", handover),
        ("# Input files\n\n", inputs),
    ]
    .into_iter()
    .filter(|(_, pieces): &(_, Vec<Piece<'_>>)| !pieces.is_empty())
    .collect()
}

/// What separates pieces.
const SEPARATOR: &str = "\n\n";

/// Assembles the prompt of `task` for one attempt.
pub fn assemble(
    workflow: &Workflow,
    task: &Task,
    handovers: &Handovers<'_>,
    values: Values<'_>,
) -> Result<Assembled, String> {
    let definition = definition(task, values);
    let sections = sections(workflow, task, handovers);
    // Headings, headers and separators are reserved first: then every
    // byte but the truncation markers is within the budget.
    let structure: usize = sections
        .iter()
        .map(|(heading, pieces)| {
            heading.len()
                + pieces
                    .iter()
                    .map(|p| p.header.len() + SEPARATOR.len())
                    .sum::<usize>()
        })
        .sum();
    let fixed = definition.len() + structure;
    if fixed > workflow.context_budget {
        return Err(format!(
            "the task's own prompt and its context's headings have {fixed} bytes, more than the workflow's context_budget of {}; shorten the prompt, give it fewer inputs or raise context_budget",
            workflow.context_budget
        ));
    }
    let mut left = workflow.context_budget - fixed;
    let mut prompt = String::with_capacity(workflow.context_budget.min(1 << 20) + 256);
    let mut truncations = Vec::new();
    for (heading, pieces) in sections {
        prompt.push_str(heading);
        for piece in pieces {
            prompt.push_str(&piece.header);
            let (text, total) = match piece.text {
                Text::Json(json) => {
                    let total = json.len();
                    (json, total)
                }
                Text::File(path) => crate::project::read_prefix(&workflow.project, path, left)
                    .map_err(|e| format!("cannot read the {}: {e}", piece.name))?,
            };
            let mut shown = text.len().min(left);
            while !text.is_char_boundary(shown) {
                shown -= 1;
            }
            prompt.push_str(&text[..shown]);
            left -= shown;
            if shown < total {
                let _ = write!(
                    prompt,
                    "\n[moat: truncated {}: showed {shown} of {total} bytes (the workflow's context_budget)]",
                    piece.name
                );
                truncations.push(Truncation {
                    piece: piece.name,
                    shown,
                    total,
                });
            }
            prompt.push_str(SEPARATOR);
        }
    }
    prompt.push_str(&definition);
    Ok(Assembled {
        prompt,
        truncations,
    })
}

/// The task's own part: never cut.
fn definition(task: &Task, values: Values<'_>) -> String {
    let mut text = String::from("# Your task\n\n");
    text.push_str(template::render(&task.prompt, values).trim_end());
    text.push_str("\n\n");
    if !task.outputs.is_empty() {
        text.push_str("Produce these files (paths relative to the working directory):\n");
        for output in &task.outputs {
            let _ = writeln!(text, "- {}", output.display());
        }
        text.push('\n');
    }
    let _ = write!(
        text,
        "When you are done, end your answer with what the next tasks need to know, as one JSON object in a fenced block whose info string is `{FENCE_INFO}`:\n\n```{FENCE_INFO}\n{{\"summary\": \"…\"}}\n```\n"
    );
    text
}
