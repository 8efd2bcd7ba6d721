//! Where in the workflow file a problem is: a line and column for TOML
//! (from the parser's spans), the path of keys for JSON (serde_json keeps
//! no positions of values).

use std::collections::HashMap;
use std::fmt;

use toml::de::{DeTable, DeValue};

/// A place in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The path of keys to it: `task[2].depends_on[0]`.
    pub path: String,
    /// Its line and column (from 1), when the format keeps them.
    pub line_col: Option<(usize, usize)>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line_col {
            // A parse error knows its place but no path of keys.
            Some((line, column)) if self.path.is_empty() => write!(f, "{line}:{column}"),
            Some((line, column)) => write!(f, "{line}:{column} ({})", self.path),
            None => f.write_str(&self.path),
        }
    }
}

/// Finds the location of a path of keys.
#[derive(Debug, Default)]
pub struct Locator {
    /// Byte offset of each path's value, for TOML.
    offsets: HashMap<String, usize>,
    /// Byte offset of each line's start.
    line_starts: Vec<usize>,
}

impl Locator {
    /// A locator of the TOML `text` (nothing is located if it does not
    /// parse: the parse error says where).
    pub fn toml(text: &str) -> Self {
        let mut locator = Self {
            line_starts: std::iter::once(0)
                .chain(text.match_indices('\n').map(|(at, _)| at + 1))
                .collect(),
            ..Self::default()
        };
        if let Ok(root) = DeTable::parse(text) {
            locator.index_table("", root.get_ref());
        }
        locator
    }

    /// A locator of a JSON file: paths only.
    pub fn json() -> Self {
        Self::default()
    }

    /// Where `path` is (`task[1].id`); the nearest enclosing path that is
    /// known gives the line when `path` itself is not (a key left out).
    pub fn at(&self, path: &str) -> Location {
        let mut probe = path;
        let offset = loop {
            if let Some(offset) = self.offsets.get(probe) {
                break Some(*offset);
            }
            match probe.rfind(['.', '[']) {
                Some(cut) => probe = &probe[..cut],
                None => break None,
            }
        };
        Location {
            path: path.to_owned(),
            line_col: offset.map(|offset| self.line_col(offset)),
        }
    }

    fn line_col(&self, offset: usize) -> (usize, usize) {
        let line = self.line_starts.partition_point(|start| *start <= offset);
        let start = self
            .line_starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        (line.max(1), offset - start + 1)
    }

    fn index_table(&mut self, prefix: &str, table: &DeTable<'_>) {
        for (key, value) in table {
            let key = canonical_key(key.get_ref());
            let path = if prefix.is_empty() {
                key.to_owned()
            } else {
                format!("{prefix}.{key}")
            };
            self.index_value(path, value);
        }
    }

    fn index_value(&mut self, path: String, value: &toml::Spanned<DeValue<'_>>) {
        self.offsets.insert(path.clone(), value.span().start);
        match value.get_ref() {
            DeValue::Table(table) => self.index_table(&path, table),
            DeValue::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    self.index_value(format!("{path}[{index}]"), item);
                }
            }
            _ => {}
        }
    }
}

/// `tasks` and `hooks` are the JSON spellings of `task` and `hook`: one
/// path for both.
fn canonical_key(key: &str) -> &str {
    match key {
        "tasks" => "task",
        "hooks" => "hook",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_lines_of_nested_values() {
        let text = "name = \"x\"\n\n[[task]]\nid = \"a\"\ndepends_on = [\"b\", \"c\"]\n\n[[task]]\nid = \"b\"\n";
        let locator = Locator::toml(text);
        assert_eq!(locator.at("task[0].id").line_col, Some((4, 6)));
        assert_eq!(locator.at("task[0].depends_on[1]").line_col, Some((5, 20)));
        assert_eq!(locator.at("task[1].id").line_col, Some((8, 6)));
        // A key left out: the line of its table.
        assert_eq!(locator.at("task[1].prompt").line_col.map(|l| l.0), Some(7));
        assert_eq!(Locator::json().at("task[0].id").to_string(), "task[0].id");
    }
}
