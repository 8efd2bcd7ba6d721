//! Model answers as the vendors send them, byte for byte: the meter's
//! tests, its fuzz target's seeds and its benchmarks share them.

use crate::Vendor;

/// `Content-Type` of a JSON answer.
pub const JSON: &str = "application/json";
/// `Content-Type` of a streamed answer.
pub const EVENTS: &str = "text/event-stream";

/// OpenAI chat completion, not streamed; a tool call whose arguments
/// spell a usage object (not the answer's).
pub const OPENAI_CHAT: &[u8] = br#"{
  "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
  "object": "chat.completion",
  "created": 1741569952,
  "model": "gpt-4.1-2025-04-14",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": null,
        "tool_calls": [
          {
            "id": "call_abc123",
            "type": "function",
            "function": {
              "name": "record",
              "arguments": "{\"usage\":{\"input_tokens\":999,\"prompt_tokens\":999},\"model\":\"decoy\"}"
            }
          }
        ],
        "refusal": null,
        "annotations": [],
        "usage": {"prompt_tokens": 999}
      },
      "logprobs": null,
      "finish_reason": "tool_calls"
    }
  ],
  "usage": {
    "prompt_tokens": 82,
    "completion_tokens": 17,
    "total_tokens": 99,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_3aa7262c27"
}
"#;

/// OpenAI chat completion streamed with `stream_options.include_usage`:
/// the last chunk carries the usage and no choices.
pub const OPENAI_CHAT_STREAM_USAGE: &[u8] = b"data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1741569952,\"model\":\"gpt-4o-mini-2024-07-18\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_06737a9306\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}

data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1741569952,\"model\":\"gpt-4o-mini-2024-07-18\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_06737a9306\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}

data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1741569952,\"model\":\"gpt-4o-mini-2024-07-18\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_06737a9306\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"! \\\"usage\\\": {\\\"prompt_tokens\\\": 999}\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}

data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1741569952,\"model\":\"gpt-4o-mini-2024-07-18\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_06737a9306\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":null}

data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1741569952,\"model\":\"gpt-4o-mini-2024-07-18\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_06737a9306\",\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":9,\"total_tokens\":17,\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}}

data: [DONE]

";

/// OpenAI chat completion streamed without usage (an Ollama's, with
/// `data:` lines and no space).
pub const OPENAI_CHAT_STREAM_NO_USAGE: &[u8] = b"data:{\"id\":\"chatcmpl-42\",\"object\":\"chat.completion.chunk\",\"created\":1741569952,\"model\":\"llama3.2\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":null}]}

data:{\"id\":\"chatcmpl-42\",\"object\":\"chat.completion.chunk\",\"created\":1741569952,\"model\":\"llama3.2\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":\"stop\"}]}

data:[DONE]

";

/// OpenAI Responses API, not streamed.
pub const OPENAI_RESPONSES: &[u8] = br#"{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1741476542,"status":"completed","error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"gpt-4.1-2025-04-14","output":[{"type":"message","id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","status":"completed","role":"assistant","content":[{"type":"output_text","text":"In a peaceful grove beneath a silver moon, a unicorn named Lumina discovered a hidden pool that reflected the stars.","annotations":[]}]}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":0},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":123},"user":null,"metadata":{"usage":"{\"input_tokens\":999}"}}"#;

/// OpenAI Responses API streamed (as Codex reads it): the usage comes
/// under `response.usage` of `response.completed`.
pub const OPENAI_RESPONSES_STREAM: &[u8] = b"event: response.created
data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_68b0\",\"object\":\"response\",\"created_at\":1756400000,\"status\":\"in_progress\",\"model\":\"gpt-5-codex\",\"output\":[],\"reasoning\":{\"effort\":\"medium\",\"summary\":\"auto\"},\"usage\":null}}

event: response.in_progress
data: {\"type\":\"response.in_progress\",\"sequence_number\":1,\"response\":{\"id\":\"resp_68b0\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-5-codex\",\"output\":[],\"usage\":null}}

event: response.output_item.added
data: {\"type\":\"response.output_item.added\",\"sequence_number\":2,\"output_index\":0,\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[]}}

event: response.output_text.delta
data: {\"type\":\"response.output_text.delta\",\"sequence_number\":5,\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"delta\":\"I'll read the file.\"}

event: response.function_call_arguments.delta
data: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":7,\"item_id\":\"fc_1\",\"output_index\":2,\"delta\":\"{\\\"usage\\\":{\\\"input_tokens\\\":999}}\"}

event: response.output_item.done
data: {\"type\":\"response.output_item.done\",\"sequence_number\":8,\"output_index\":2,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"status\":\"completed\",\"arguments\":\"{\\\"usage\\\":{\\\"input_tokens\\\":999}}\",\"call_id\":\"call_1\",\"name\":\"shell\",\"usage\":{\"input_tokens\":999},\"model\":\"decoy\"}}

event: response.completed
data: {\"type\":\"response.completed\",\"sequence_number\":9,\"response\":{\"id\":\"resp_68b0\",\"object\":\"response\",\"created_at\":1756400000,\"status\":\"completed\",\"model\":\"gpt-5-codex\",\"output\":[{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"**Reading the file**\\n\\nThe user wants the file read; I will run `cat` on it and then summarize the \\\"usage\\\" section.\"}]},{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"annotations\":[],\"text\":\"I'll read the file. Here is what it says about {\\\"usage\\\": {\\\"input_tokens\\\": 999}} and more: Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat.\"}]},{\"id\":\"fc_1\",\"type\":\"function_call\",\"status\":\"completed\",\"arguments\":\"{\\\"command\\\":[\\\"bash\\\",\\\"-lc\\\",\\\"cat README.md\\\"],\\\"usage\\\":{\\\"input_tokens\\\":999}}\",\"call_id\":\"call_1\",\"name\":\"shell\"}],\"parallel_tool_calls\":false,\"reasoning\":{\"effort\":\"medium\",\"summary\":\"auto\"},\"store\":false,\"tools\":[{\"type\":\"function\",\"name\":\"shell\",\"parameters\":{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}}}],\"usage\":{\"input_tokens\":4096,\"input_tokens_details\":{\"cached_tokens\":3072},\"output_tokens\":512,\"output_tokens_details\":{\"reasoning_tokens\":384},\"total_tokens\":4608},\"metadata\":{\"usage\":{\"input_tokens\":999}}}}

";

/// Anthropic message, not streamed, with cache reads.
pub const ANTHROPIC_MESSAGE: &[u8] = br#"{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Hello! The \"usage\" of tokens: {\"input_tokens\": 999}"},{"type":"tool_use","id":"toolu_1","name":"get","input":{"usage":{"input_tokens":999,"output_tokens":999},"model":"decoy"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":2048,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":60,"service_tier":"standard"}}"#;

/// Anthropic message streamed: `message_start` carries the input (with
/// the cache's) and one output token, `message_delta` the final output.
pub const ANTHROPIC_STREAM: &[u8] = b"event: message_start
data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-opus-4-1-20250805\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":2000,\"cache_read_input_tokens\":10000,\"output_tokens\":1,\"service_tier\":\"standard\"}}}

event: content_block_start
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}

event: ping
data: {\"type\": \"ping\"}

event: content_block_delta
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}

event: content_block_delta
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"! data: {\\\"usage\\\": {\\\"output_tokens\\\": 999}}\"}}

event: content_block_stop
data: {\"type\":\"content_block_stop\",\"index\":0}

event: content_block_start
data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01T1x1fJ34qAmk2tNTrN7Up6\",\"name\":\"get_weather\",\"input\":{}}}

event: content_block_delta
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"usage\\\": {\\\"input_tokens\\\": 999\"}}

event: content_block_stop
data: {\"type\":\"content_block_stop\",\"index\":1}

event: message_delta
data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":89}}

event: message_stop
data: {\"type\":\"message_stop\"}

";

/// Anthropic stream that fails before its usage.
pub const ANTHROPIC_STREAM_ERROR: &[u8] = b"event: error
data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}

";

/// Gemini generateContent, with thoughts.
pub const GEMINI_CONTENT: &[u8] = br#"{
  "candidates": [
    {
      "content": {
        "parts": [
          {
            "text": "Hello there! {\"usageMetadata\": {\"promptTokenCount\": 999}}"
          }
        ],
        "role": "model"
      },
      "finishReason": "STOP",
      "index": 0
    }
  ],
  "usageMetadata": {
    "promptTokenCount": 4,
    "candidatesTokenCount": 12,
    "totalTokenCount": 46,
    "promptTokensDetails": [
      {
        "modality": "TEXT",
        "tokenCount": 4
      }
    ],
    "thoughtsTokenCount": 30
  },
  "modelVersion": "gemini-2.5-flash",
  "responseId": "aBcDeFgHiJkLmNoPqRsTuV"
}
"#;

/// Gemini streamGenerateContent with `alt=sse`: cumulative counts, lines
/// ended by CRLF.
pub const GEMINI_STREAM_SSE: &[u8] = b"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"The\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 9,\"totalTokenCount\": 9,\"promptTokensDetails\": [{\"modality\": \"TEXT\",\"tokenCount\": 9}]},\"modelVersion\": \"gemini-2.5-pro\",\"responseId\": \"r1\"}\r
\r
data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \" sky is blue because of Rayleigh scattering.\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 9,\"candidatesTokenCount\": 5,\"totalTokenCount\": 140,\"thoughtsTokenCount\": 126},\"modelVersion\": \"gemini-2.5-pro\",\"responseId\": \"r1\"}\r
\r
data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 9,\"candidatesTokenCount\": 11,\"totalTokenCount\": 146,\"promptTokensDetails\": [{\"modality\": \"TEXT\",\"tokenCount\": 9}],\"thoughtsTokenCount\": 126},\"modelVersion\": \"gemini-2.5-pro\",\"responseId\": \"r1\"}\r
\r
";

/// Gemini streamGenerateContent without `alt=sse`: one JSON array of the
/// chunks, pretty-printed.
pub const GEMINI_STREAM_ARRAY: &[u8] = br#"[{
  "candidates": [
    {
      "content": {
        "parts": [
          {
            "text": "Once"
          }
        ],
        "role": "model"
      },
      "index": 0
    }
  ],
  "usageMetadata": {
    "promptTokenCount": 7,
    "totalTokenCount": 7,
    "promptTokensDetails": [
      {
        "modality": "TEXT",
        "tokenCount": 7
      }
    ]
  },
  "modelVersion": "gemini-2.0-flash"
}
,
{
  "candidates": [
    {
      "content": {
        "parts": [
          {
            "text": " upon a time, \"usageMetadata\": [\"promptTokenCount\", 999]"
          }
        ],
        "role": "model"
      },
      "finishReason": "STOP",
      "index": 0
    }
  ],
  "usageMetadata": {
    "promptTokenCount": 7,
    "candidatesTokenCount": 21,
    "totalTokenCount": 28,
    "promptTokensDetails": [
      {
        "modality": "TEXT",
        "tokenCount": 7
      }
    ],
    "candidatesTokensDetails": [
      {
        "modality": "TEXT",
        "tokenCount": 21
      }
    ]
  },
  "modelVersion": "gemini-2.0-flash"
}
]"#;

/// OpenAI's refusal of a bad key.
pub const OPENAI_ERROR: &[u8] = br#"{
  "error": {
    "message": "Incorrect API key provided: sk-abc. You can find your API key at https://platform.openai.com/account/api-keys.",
    "type": "invalid_request_error",
    "param": null,
    "code": "invalid_api_key"
  }
}
"#;

/// A gateway's error page.
pub const HTML_ERROR: &[u8] = b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n";

/// Every sample answer: its vendor, its `Content-Type` and its body.
pub fn sample_answers() -> Vec<(Vendor, &'static str, &'static [u8])> {
    vec![
        (Vendor::OpenAi, JSON, OPENAI_CHAT),
        (Vendor::OpenAi, EVENTS, OPENAI_CHAT_STREAM_USAGE),
        (Vendor::OpenAi, EVENTS, OPENAI_CHAT_STREAM_NO_USAGE),
        (Vendor::OpenAi, JSON, OPENAI_RESPONSES),
        (Vendor::OpenAi, EVENTS, OPENAI_RESPONSES_STREAM),
        (Vendor::OpenAi, JSON, OPENAI_ERROR),
        (Vendor::Anthropic, JSON, ANTHROPIC_MESSAGE),
        (Vendor::Anthropic, EVENTS, ANTHROPIC_STREAM),
        (Vendor::Anthropic, EVENTS, ANTHROPIC_STREAM_ERROR),
        (
            Vendor::Gemini,
            "application/json; charset=UTF-8",
            GEMINI_CONTENT,
        ),
        (
            Vendor::Gemini,
            "text/event-stream; charset=UTF-8",
            GEMINI_STREAM_SSE,
        ),
        (
            Vendor::Gemini,
            "application/json; charset=UTF-8",
            GEMINI_STREAM_ARRAY,
        ),
        (Vendor::OpenAi, "text/html", HTML_ERROR),
    ]
}
