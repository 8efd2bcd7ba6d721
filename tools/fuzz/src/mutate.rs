//! Mutating inputs: the byte-level moves of coverage-guided fuzzers
//! (flips, replacements, insertions, deletions, duplications, splices
//! from another seed) and structure-aware ones for the text formats here
//! (JSON, TOML, SSE, JSON lines): tokens that end strings, open and close
//! nesting, extreme numbers, escapes and invalid UTF-8.

/// A small, fast, seeded generator (xorshift64*): runs are reproducible
/// from their seed.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; zero is moved off).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// The next number.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Pieces that are meaningful to the formats' parsers.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"\\",
    b":",
    b",",
    b"\n",
    b"\r\n",
    b"\0",
    b"null",
    b"true",
    b"false",
    b"-0",
    b"1e999",
    b"-1e999",
    b"18446744073709551616",
    b"9007199254740993",
    b"-9223372036854775809",
    b"0.0000000000000000001",
    b"\\u0000",
    b"\\ud800",
    b"\\uDFFF",
    b"\xff\xfe",
    b"\xc3\x28",
    b"\xf0\x9f\x92",
    b"[[",
    b"]]",
    b"= ",
    b"\"\"\"",
    b"'''",
    b"#",
    b"data: ",
    b"event: ",
    b"id: ",
    b"retry: ",
    b"\n\n",
    b"{\"type\":",
    b"\"id\":",
    b"\"op\":",
    b"\"runs\":",
    b"../",
    b"/etc/passwd",
    b"~",
    b"$HOME",
    b"*",
    b"\xe2\x80\xae",
];

/// Mutates `input` in place with one to eight moves; `other` is another
/// input to splice from.
pub fn mutate(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8], max_len: usize) {
    let moves = 1 + rng.below(8);
    for _ in 0..moves {
        match rng.below(11) {
            0 if !input.is_empty() => {
                let at = rng.below(input.len());
                input[at] ^= 1 << rng.below(8);
            }
            1 if !input.is_empty() => {
                let at = rng.below(input.len());
                input[at] = rng.next() as u8;
            }
            2 => {
                let at = rng.below(input.len() + 1);
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                input.splice(at..at, bytes);
            }
            3 if !input.is_empty() => {
                let at = rng.below(input.len());
                let n = 1 + rng.below((input.len() - at).min(64));
                input.drain(at..at + n);
            }
            4 if !input.is_empty() => {
                // A stretch repeated: long strings, deep nesting.
                let at = rng.below(input.len());
                let n = 1 + rng.below((input.len() - at).min(32));
                let piece = input[at..at + n].to_vec();
                let times = 1 + rng.below(64);
                let mut grown = Vec::with_capacity(piece.len() * times);
                for _ in 0..times {
                    grown.extend_from_slice(&piece);
                }
                input.splice(at..at, grown);
            }
            5 | 6 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                let at = rng.below(input.len() + 1);
                input.splice(at..at, token.iter().copied());
            }
            7 if !other.is_empty() => {
                // Splice: a piece of another seed.
                let from = rng.below(other.len());
                let n = 1 + rng.below((other.len() - from).min(256));
                let at = rng.below(input.len() + 1);
                input.splice(at..at, other[from..from + n].iter().copied());
            }
            8 if !input.is_empty() => {
                // A number replaced by an extreme one.
                if let Some(at) = input.iter().position(u8::is_ascii_digit) {
                    let end = input[at..]
                        .iter()
                        .position(|b| !b.is_ascii_digit())
                        .map_or(input.len(), |n| at + n);
                    let token = [
                        &b"18446744073709551616"[..],
                        b"-1",
                        b"0",
                        b"4294967296",
                        b"1e308",
                    ][rng.below(5)];
                    input.splice(at..end, token.iter().copied());
                }
            }
            9 if input.len() > 1 => {
                // Cut short: a stream that ends mid-way.
                let keep = rng.below(input.len());
                input.truncate(keep);
            }
            10 => {
                // Deep nesting.
                let depth = 1 + rng.below(300);
                let at = rng.below(input.len() + 1);
                let open = if rng.below(2) == 0 { b'[' } else { b'{' };
                input.splice(at..at, std::iter::repeat_n(open, depth));
            }
            _ => {}
        }
    }
    input.truncate(max_len);
}
