//! The tasks as a graph: cycles, ancestors, a topological order, and the
//! graph drawn as text, Graphviz dot or Mermaid.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use crate::model::Task;

/// A cycle of dependencies, if there is one: its ids, the first repeated
/// at the end (`a → b → a` is `["a", "b", "a"]`), each depending on the
/// next. Unknown dependencies are ignored (reported elsewhere).
pub fn find_cycle(tasks: &[Task]) -> Option<Vec<String>> {
    let by_id: HashMap<&str, &Task> = tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    // 0: not seen, 1: on the current path, 2: done.
    let mut mark: HashMap<&str, u8> = HashMap::new();
    for task in tasks {
        let mut path: Vec<&str> = Vec::new();
        // An explicit stack (a deep chain must not overflow the real one):
        // each entry is a task and the index of its next dependency.
        let mut stack: Vec<(&str, usize)> = vec![(task.id.as_str(), 0)];
        while let Some(&(id, next)) = stack.last() {
            if next == 0 {
                if mark.get(id) == Some(&2) {
                    stack.pop();
                    continue;
                }
                mark.insert(id, 1);
                path.push(id);
            }
            let dependencies = by_id.get(id).map_or(&[][..], |t| t.depends_on.as_slice());
            let Some(dependency) = dependencies.get(next) else {
                mark.insert(id, 2);
                path.pop();
                stack.pop();
                continue;
            };
            if let Some(top) = stack.last_mut() {
                top.1 += 1;
            }
            let dependency = dependency.as_str();
            if !by_id.contains_key(dependency) {
                continue;
            }
            match mark.get(dependency) {
                Some(1) => {
                    let start = path.iter().position(|p| *p == dependency).unwrap_or(0);
                    let mut cycle: Vec<String> =
                        path[start..].iter().map(|s| s.to_string()).collect();
                    cycle.push(dependency.to_owned());
                    return Some(cycle);
                }
                Some(2) => {}
                _ => stack.push((dependency, 0)),
            }
        }
    }
    None
}

/// Every task `id` depends on, directly or not.
pub fn ancestors(id: &str, by_id: &HashMap<&str, &Task>) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut todo: Vec<&str> = by_id
        .get(id)
        .map(|t| t.depends_on.iter().map(String::as_str).collect())
        .unwrap_or_default();
    while let Some(next) = todo.pop() {
        if seen.insert(next.to_owned())
            && let Some(task) = by_id.get(next)
        {
            todo.extend(task.depends_on.iter().map(String::as_str));
        }
    }
    seen
}

/// The tasks in an order where each comes after what it depends on, ties
/// in file order; grouped in levels (a level's tasks depend only on
/// earlier levels). The tasks must have no cycle.
pub fn levels(tasks: &[Task]) -> Vec<Vec<&Task>> {
    let mut level_of: HashMap<&str, usize> = HashMap::new();
    let mut remaining: Vec<&Task> = tasks.iter().collect();
    let mut levels: Vec<Vec<&Task>> = Vec::new();
    while !remaining.is_empty() {
        let (ready, blocked): (Vec<&Task>, Vec<&Task>) = remaining.into_iter().partition(|task| {
            task.depends_on
                .iter()
                .all(|d| level_of.contains_key(d.as_str()))
        });
        if ready.is_empty() {
            // A cycle: cannot happen for a checked workflow.
            break;
        }
        for task in &ready {
            level_of.insert(&task.id, levels.len());
        }
        levels.push(ready);
        remaining = blocked;
    }
    levels
}

/// The graph as text: one line per task, by level, with what it needs.
pub fn text(tasks: &[Task]) -> String {
    let mut out = String::new();
    for (number, level) in levels(tasks).iter().enumerate() {
        for task in level {
            let _ = write!(out, "{number:>3}  {}  [{}]", task.id, task.adapter);
            if !task.depends_on.is_empty() {
                let _ = write!(out, "  ← {}", task.depends_on.join(", "));
            }
            if let Some(repeat) = &task.repeat {
                let _ = write!(out, "  ↻ up to {}", repeat.max_iterations);
            }
            out.push('\n');
        }
    }
    out
}

/// The graph in Graphviz's dot language.
pub fn dot(name: &str, tasks: &[Task]) -> String {
    let mut out = format!("digraph {} {{\n  rankdir=LR;\n", quoted(name));
    for task in tasks {
        let _ = writeln!(
            out,
            "  {} [label={}];",
            quoted(&task.id),
            quoted(&format!("{}\n{}", task.id, task.adapter))
        );
    }
    for task in tasks {
        for dependency in &task.depends_on {
            let _ = writeln!(out, "  {} -> {};", quoted(dependency), quoted(&task.id));
        }
    }
    out.push_str("}\n");
    out
}

/// The graph as a Mermaid flowchart.
pub fn mermaid(tasks: &[Task]) -> String {
    // Mermaid ids are plain words: tasks are numbered, their ids are labels.
    let number: HashMap<&str, usize> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id.as_str(), i))
        .collect();
    let mut out = String::from("flowchart LR\n");
    for (i, task) in tasks.iter().enumerate() {
        let _ = writeln!(
            out,
            "  t{i}[\"{} ({})\"]",
            task.id,
            task.adapter.replace('"', "#quot;")
        );
    }
    for (i, task) in tasks.iter().enumerate() {
        for dependency in &task.depends_on {
            if let Some(from) = number.get(dependency.as_str()) {
                let _ = writeln!(out, "  t{from} --> t{i}");
            }
        }
    }
    out
}

fn quoted(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}
