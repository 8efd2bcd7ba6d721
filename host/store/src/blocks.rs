//! How a block of events is kept in a row: its events as newline-separated
//! JSON, LZ4-compressed when the writer stores a batch. A flood of small
//! events repeats its keys, agent and session id on every line, so a block
//! shrinks several times over, and with it what the WAL and its checkpoint
//! write (the store's cost at high event rates). Blocks written another way
//! (migrated from schema 1, the store's own synthesized `done`) are plain.

/// A block's encoding, as the `encoding` column names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// Newline-separated JSON as it is.
    Plain,
    /// The same, LZ4-compressed (lz4_flex's block format, its length first).
    Lz4,
}

/// The most a block may say it holds once decompressed: a row claiming
/// more is damaged (or was not written by moat) and is not expanded.
const MAX_DECODED_BYTES: usize = 1 << 30;

impl Encoding {
    /// The column's value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Encoding::Plain => "ndjson",
            Encoding::Lz4 => "ndjson+lz4",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "ndjson" => Some(Encoding::Plain),
            "ndjson+lz4" => Some(Encoding::Lz4),
            _ => None,
        }
    }
}

/// `events` (newline-separated JSON) compressed for a row.
pub(crate) fn compress(events: &[u8]) -> Vec<u8> {
    lz4_flex::block::compress_prepend_size(events)
}

/// A row's events, as newline-separated JSON.
pub(crate) fn decode(encoding: &str, stored: Vec<u8>) -> Result<Vec<u8>, String> {
    match Encoding::parse(encoding) {
        Some(Encoding::Plain) => Ok(stored),
        Some(Encoding::Lz4) => {
            let claimed = stored
                .get(..4)
                .map(|len| u32::from_le_bytes(len.try_into().expect("four bytes")) as usize)
                .ok_or("a compressed block too short for its length")?;
            if claimed > MAX_DECODED_BYTES {
                return Err(format!("a compressed block claims {claimed} bytes"));
            }
            let events =
                lz4_flex::block::decompress_size_prepended(&stored).map_err(|e| e.to_string())?;
            if events.len() != claimed {
                return Err(format!(
                    "a compressed block gave {} of its {claimed} bytes",
                    events.len()
                ));
            }
            Ok(events)
        }
        None => Err(format!("a block in an unknown encoding {encoding:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_comes_back_as_it_went_in_and_damage_is_an_error() {
        let events = b"{\"a\":1}\n{\"a\":2}".repeat(100);
        let stored = compress(&events);
        assert!(stored.len() < events.len() / 4, "repetitive JSON shrinks");
        assert_eq!(decode("ndjson+lz4", stored.clone()).unwrap(), events);
        assert_eq!(decode("ndjson", events.clone()).unwrap(), events);
        let mut huge = stored.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode("ndjson+lz4", huge).is_err());
        assert!(decode("ndjson+lz4", stored[..stored.len() / 2].to_vec()).is_err());
        assert!(decode("ndjson+lz4", vec![1]).is_err());
        assert!(decode("zip", events).is_err());
    }
}
