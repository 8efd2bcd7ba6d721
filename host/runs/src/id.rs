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

/// The fewest characters a short id shows: `r_` and the ten digits of its
/// creation time in milliseconds, so runs made in different milliseconds
/// (nearly all) stay apart by their short ids even beside runs not listed
/// with them, as docker's twelve characters do.
pub const SHORT_MIN: usize = PREFIX.len() + 10;

/// The short forms of `ids`, git-style: each the shortest prefix of at
/// least [`SHORT_MIN`] characters that no other of `ids` starts with (the
/// whole id when another id is the same).
pub fn short_ids<'a>(ids: &[&'a RunId]) -> Vec<&'a str> {
    fn common(a: &str, b: &str) -> usize {
        a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
    }
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by(|&a, &b| ids[a].cmp(ids[b]));
    let mut lengths = vec![SHORT_MIN; ids.len()];
    for pair in order.windows(2) {
        let (a, b) = (ids[pair[0]].as_str(), ids[pair[1]].as_str());
        let needed = common(a, b) + 1;
        lengths[pair[0]] = lengths[pair[0]].max(needed);
        lengths[pair[1]] = lengths[pair[1]].max(needed);
    }
    ids.iter()
        .zip(lengths)
        .map(|(id, length)| &id.as_str()[..length.min(id.as_str().len())])
        .collect()
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
    fn short_ids_are_the_shortest_unique_prefixes_of_at_least_the_minimum() {
        let parse = |text: &str| RunId::parse(text).unwrap();
        let ids = [
            parse("r_01m8fxa0y2essrasa9azn84z4d"),
            parse("r_01m8fxa0y2essrbsa9azn84z4d"),
            parse("r_01m8fwyvfserrr05t0573bvcnw"),
        ];
        let refs: Vec<&RunId> = ids.iter().collect();
        assert_eq!(
            short_ids(&refs),
            ["r_01m8fxa0y2essra", "r_01m8fxa0y2essrb", "r_01m8fwyvfs"]
        );
        assert_eq!(short_ids(&refs[2..]), ["r_01m8fwyvfs"]);
        let same = [ids[0].clone(), ids[0].clone()];
        let refs: Vec<&RunId> = same.iter().collect();
        assert_eq!(short_ids(&refs), [ids[0].as_str(), ids[0].as_str()]);
        let many: Vec<RunId> = (0..500).map(|_| RunId::new()).collect();
        let refs: Vec<&RunId> = many.iter().collect();
        let shorts = short_ids(&refs);
        for (short, id) in shorts.iter().zip(&many) {
            let starting = many
                .iter()
                .filter(|other| other.as_str().starts_with(short));
            assert_eq!(starting.count(), 1, "{short} names more than {id}");
        }
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
