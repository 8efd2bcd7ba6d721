//! The model APIs moat reads, where they live and which of their calls
//! answer with usage.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

/// A model API whose answers moat reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Vendor {
    /// OpenAI's API (chat completions, legacy completions, the Responses
    /// API) and every server that speaks it (Ollama, vLLM, Codex signed
    /// in with ChatGPT).
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
    /// Google's Gemini API (generateContent and streamGenerateContent).
    Gemini,
}

impl Vendor {
    /// Every vendor, in the order their names are listed to users.
    pub const ALL: [Vendor; 3] = [Vendor::OpenAi, Vendor::Anthropic, Vendor::Gemini];

    /// The vendor's name: `openai`, `anthropic` or `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            Vendor::OpenAi => "openai",
            Vendor::Anthropic => "anthropic",
            Vendor::Gemini => "gemini",
        }
    }

    /// The vendor named `name` (its [`as_str`](Self::as_str), in any case).
    pub fn parse(name: &str) -> Option<Vendor> {
        Vendor::ALL
            .into_iter()
            .find(|vendor| vendor.as_str().eq_ignore_ascii_case(name))
    }

    /// The vendor whose own API answers at `host`: `api.openai.com` and
    /// `chatgpt.com` (Codex signed in with ChatGPT posts to
    /// `/backend-api/codex/responses` there), `api.anthropic.com`,
    /// `generativelanguage.googleapis.com`. Case-insensitive; a trailing
    /// dot and a `:port` are ignored. Any other host (a local Ollama, a
    /// gateway) is not known by name: its caller says what it speaks.
    pub fn of_host(host: &str) -> Option<Vendor> {
        let host = match host.rsplit_once(':') {
            // A port, not part of an IPv6 literal (none of ours is one).
            Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
                name
            }
            _ => host,
        };
        let host = host.strip_suffix('.').unwrap_or(host);
        const HOSTS: [(&str, Vendor); 4] = [
            ("api.openai.com", Vendor::OpenAi),
            ("chatgpt.com", Vendor::OpenAi),
            ("api.anthropic.com", Vendor::Anthropic),
            ("generativelanguage.googleapis.com", Vendor::Gemini),
        ];
        HOSTS
            .into_iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(host))
            .map(|(_, vendor)| vendor)
    }

    /// Whether a request with this method and path (which may carry a
    /// query) asks the vendor's model for an answer, and so is billed:
    /// a `POST` to
    /// - OpenAI: a path ending in `/chat/completions`, `/responses` or
    ///   `/completions`, under any prefix (`/v1`, `/backend-api/codex`,
    ///   a gateway's own);
    /// - Anthropic: a path ending in `/messages` (not its
    ///   `/messages/count_tokens` nor `/messages/batches…`);
    /// - Gemini: a path whose last segment holds `:generateContent` or
    ///   `:streamGenerateContent`.
    ///
    /// Percent-escapes are decoded and trailing slashes dropped first, as
    /// the vendors' servers do, so a caller cannot slip a billed call past
    /// the meter by spelling its path differently.
    pub fn is_model_call(self, method: &str, path: &str) -> bool {
        if !method.eq_ignore_ascii_case("POST") {
            return false;
        }
        let path = path.split(['?', '#']).next().unwrap_or_default();
        let decoded = percent_decoded(path);
        let path = decoded.trim_end_matches('/');
        match self {
            Vendor::OpenAi => ["/chat/completions", "/responses", "/completions"]
                .iter()
                .any(|end| path.ends_with(end)),
            Vendor::Anthropic => path.ends_with("/messages"),
            Vendor::Gemini => {
                let last = path.rsplit('/').next().unwrap_or_default();
                last.contains(":generateContent") || last.contains(":streamGenerateContent")
            }
        }
    }
}

/// `path` with its valid `%XX` escapes decoded (lossily, should they
/// decode to bytes that are not UTF-8); borrowed when it has none.
fn percent_decoded(path: &str) -> Cow<'_, str> {
    if !path.contains('%') {
        return Cow::Borrowed(path);
    }
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(high), Some(low)) = (
                bytes.get(i + 1).and_then(|b| hex(*b)),
                bytes.get(i + 2).and_then(|b| hex(*b)),
            )
        {
            out.push(high << 4 | low);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

fn hex(digit: u8) -> Option<u8> {
    char::from(digit)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

impl fmt::Display for Vendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Vendor {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Vendor::parse(name).ok_or_else(|| {
            format!("`{name}` is not a model API moat reads: say openai, anthropic or gemini")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for vendor in Vendor::ALL {
            assert_eq!(Vendor::parse(vendor.as_str()), Some(vendor));
            assert_eq!(vendor.to_string().parse::<Vendor>(), Ok(vendor));
            assert_eq!(Vendor::parse(&vendor.as_str().to_uppercase()), Some(vendor));
        }
        assert_eq!(Vendor::parse("OpenAI"), Some(Vendor::OpenAi));
        assert_eq!(Vendor::parse("ollama"), None);
        assert_eq!(Vendor::parse(""), None);
        assert_eq!(
            "mistral".parse::<Vendor>(),
            Err("`mistral` is not a model API moat reads: say openai, anthropic or gemini".into())
        );
    }

    #[test]
    fn hosts() {
        let known = [
            ("api.openai.com", Vendor::OpenAi),
            ("API.OpenAI.com", Vendor::OpenAi),
            ("api.openai.com.", Vendor::OpenAi),
            ("api.openai.com:443", Vendor::OpenAi),
            ("chatgpt.com", Vendor::OpenAi),
            ("api.anthropic.com", Vendor::Anthropic),
            ("api.anthropic.com.:443", Vendor::Anthropic),
            ("generativelanguage.googleapis.com", Vendor::Gemini),
            ("GenerativeLanguage.GoogleAPIs.com.", Vendor::Gemini),
        ];
        for (host, vendor) in known {
            assert_eq!(Vendor::of_host(host), Some(vendor), "{host}");
        }
        for host in [
            "",
            ".",
            "openai.com",
            "api.openai.com.evil.example",
            "evilapi.openai.com",
            "xapi.anthropic.com",
            "localhost:11434",
            "127.0.0.1",
            "api.anthropic.com..",
            "googleapis.com",
            "api.openai.com:",
            "api.openai.com:x",
        ] {
            assert_eq!(Vendor::of_host(host), None, "{host}");
        }
    }

    #[test]
    fn openai_calls() {
        let calls = [
            "/v1/chat/completions",
            "/v1/completions",
            "/v1/responses",
            "/backend-api/codex/responses",
            "/v1/chat/completions?api-version=2024-10-21",
            "/openai/deployments/gpt/chat/completions?api-version=1",
            "/v1/responses/",
            "/v1/chat/complet%69ons",
            "/chat/completions",
        ];
        for path in calls {
            assert!(Vendor::OpenAi.is_model_call("POST", path), "{path}");
            assert!(Vendor::OpenAi.is_model_call("post", path), "{path}");
            assert!(!Vendor::OpenAi.is_model_call("GET", path), "{path}");
        }
        for path in [
            "/v1/models",
            "/v1/embeddings",
            "/v1/responses/resp_123",
            "/v1/responses/resp_123/cancel",
            "/v1/responses/resp_123/input_items",
            "/v1/chat/completions/chatcmpl-1",
            "/v1/files?purpose=/responses",
            "/v1/responsesx",
            "",
        ] {
            assert!(!Vendor::OpenAi.is_model_call("POST", path), "{path}");
        }
    }

    #[test]
    fn anthropic_calls() {
        for path in ["/v1/messages", "/v1/messages?beta=true", "/v1/messages/"] {
            assert!(Vendor::Anthropic.is_model_call("POST", path), "{path}");
            assert!(!Vendor::Anthropic.is_model_call("GET", path), "{path}");
        }
        for path in [
            "/v1/messages/count_tokens",
            "/v1/messages/batches",
            "/v1/messages/batches/msgbatch_1",
            "/v1/messages/batches/msgbatch_1/cancel",
            "/v1/models",
            "/v1/complete",
            "/v1/chat/completions",
        ] {
            assert!(!Vendor::Anthropic.is_model_call("POST", path), "{path}");
        }
    }

    #[test]
    fn gemini_calls() {
        for path in [
            "/v1beta/models/gemini-2.5-pro:generateContent",
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            "/v1/models/gemini-2.5-flash:streamGenerateContent",
            "/v1beta/models/gemini-2.5-pro%3AgenerateContent",
            "/v1beta/tunedModels/mine:generateContent?key=k",
        ] {
            assert!(Vendor::Gemini.is_model_call("POST", path), "{path}");
            assert!(!Vendor::Gemini.is_model_call("GET", path), "{path}");
        }
        for path in [
            "/v1beta/models/gemini-2.5-pro:countTokens",
            "/v1beta/models/gemini-2.5-pro:embedContent",
            "/v1beta/models/gemini-2.5-pro",
            "/v1beta/models/x:generateContent/operations",
            "/v1beta/models?filter=:generateContent",
        ] {
            assert!(!Vendor::Gemini.is_model_call("POST", path), "{path}");
        }
    }

    #[test]
    fn decoding_never_panics() {
        for path in ["%", "%%", "%4", "%zz", "%ff%fe", "/%e2%82", "/a%2"] {
            let _ = percent_decoded(path);
        }
        assert_eq!(percent_decoded("/a%2Fb%"), "/a/b%");
    }
}
