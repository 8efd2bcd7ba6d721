//! Run ids: `r_` and a UUIDv7 in lowercase Crockford base32 — unique
//! without coordination between moat processes, sortable by creation time
//! (as text), and short enough to type a prefix of.

use std::fmt;

/// What every run id starts with.
pub const PREFIX: &str = "r_";

/// Crockford's base32 alphabet, lowercase (no i, l, o, u).
const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// One run's id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(String);

impl RunId {
    /// A fresh id, later than every id this process made before.
    pub fn new() -> Self {
        let value = uuid::Uuid::now_v7().as_u128();
        // 26 digits of 5 bits hold 130 bits: the top two are zero.
        let mut text = String::with_capacity(PREFIX.len() + 26);
        text.push_str(PREFIX);
        for digit in (0..26).rev() {
            let index = ((value >> (digit * 5)) & 0x1f) as usize;
            text.push(char::from(ALPHABET[index]));
        }
        Self(text)
    }

    /// An id read back from the store or given by a user in full.
    pub fn parse(text: &str) -> Option<Self> {
        let digits = text.strip_prefix(PREFIX)?;
        let valid = digits.len() == 26 && digits.bytes().all(|b| ALPHABET.contains(&b));
        valid.then(|| Self(text.to_owned()))
    }

    /// The id prefix a user's `text` stands for: ids may be given with
    /// or without their `r_`, which is added when missing.
    pub fn prefix_from(text: &str) -> String {
        let text = text.trim();
        if text.starts_with(PREFIX) || PREFIX.starts_with(text) {
            text.to_owned()
        } else {
            format!("{PREFIX}{text}")
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for RunId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_may_be_given_without_its_r_() {
        assert_eq!(RunId::prefix_from("01m8f"), "r_01m8f");
        assert_eq!(RunId::prefix_from(" r_01m8f "), "r_01m8f");
        assert_eq!(RunId::prefix_from("r"), "r");
        assert_eq!(RunId::prefix_from(""), "");
    }

    #[test]
    fn ids_are_unique_sortable_and_parse_back() {
        let ids: Vec<RunId> = (0..1000).map(|_| RunId::new()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, ids, "unique and in creation order");
        assert_eq!(RunId::parse(ids[0].as_str()), Some(ids[0].clone()));
        assert_eq!(ids[0].as_str().len(), 28);
        assert!(RunId::parse("r_short").is_none());
        assert!(RunId::parse(&ids[0].as_str().replace("r_", "x_")).is_none());
    }
}
