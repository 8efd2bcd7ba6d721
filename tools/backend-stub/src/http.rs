//! Just enough HTTP/1.1 for the stub: read a request (bounded), answer with
//! a JSON body or a chunked stream that can be cut off mid-way.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use serde_json::Value;

/// The largest request head (request line and headers) accepted.
const MAX_HEAD: usize = 64 * 1024;
/// The largest request body accepted. The CLIs send their whole
/// conversation and tool catalogue with every call: a few hundred KiB.
const MAX_BODY: usize = 32 * 1024 * 1024;

/// Why a request could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The connection failed or closed mid-request.
    #[error("connection: {0}")]
    Io(#[from] io::Error),
    /// The request was not HTTP/1.1 as the stub understands it.
    #[error("bad request: {0}")]
    Malformed(&'static str),
}

/// One HTTP request.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target: path and query.
    pub target: String,
    /// Header names (lowercased) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Request {
    /// The path, without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The body as JSON, or `Null` when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// Reads the next request on a connection; `None` when the client closed it
/// between requests.
pub fn read_request(reader: &mut BufReader<TcpStream>) -> Result<Option<Request>, HttpError> {
    let mut head_size = 0;
    let mut line = String::new();
    // Tolerate blank lines before a request line (RFC 9112 §2.2).
    let request_line = loop {
        line.clear();
        let read = read_line(reader, &mut line, &mut head_size)?;
        if read == 0 {
            return Ok(None);
        }
        if !line.trim().is_empty() {
            break line.trim().to_owned();
        }
    };
    let mut parts = request_line.split_whitespace();
    let method = parts.next().ok_or(HttpError::Malformed("no method"))?;
    let target = parts.next().ok_or(HttpError::Malformed("no target"))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if read_line(reader, &mut line, &mut head_size)? == 0 {
            return Err(HttpError::Malformed("connection closed in the headers"));
        }
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            break;
        }
        let (name, value) = header
            .split_once(':')
            .ok_or(HttpError::Malformed("header without a colon"))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let mut request = Request {
        method: method.to_owned(),
        target: target.to_owned(),
        headers,
        body: Vec::new(),
    };
    if request
        .header("transfer-encoding")
        .is_some_and(|value| value.to_ascii_lowercase().contains("chunked"))
    {
        request.body = read_chunked(reader)?;
    } else if let Some(length) = request.header("content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| HttpError::Malformed("bad content-length"))?;
        if length > MAX_BODY {
            return Err(HttpError::Malformed("body too large"));
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        request.body = body;
    }
    Ok(Some(request))
}

/// Reads one line into `line`, counting it against the head limit.
fn read_line(
    reader: &mut BufReader<TcpStream>,
    line: &mut String,
    head_size: &mut usize,
) -> Result<usize, HttpError> {
    let read = reader
        .by_ref()
        .take((MAX_HEAD - *head_size) as u64 + 1)
        .read_line(line)?;
    *head_size += read;
    if *head_size > MAX_HEAD {
        return Err(HttpError::Malformed("request head too large"));
    }
    Ok(read)
}

/// Reads a chunked body up to its last chunk and trailers.
fn read_chunked(reader: &mut BufReader<TcpStream>) -> Result<Vec<u8>, HttpError> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        let mut size_line_budget = 0;
        read_line(reader, &mut line, &mut size_line_budget)?;
        let size = line.trim().split(';').next().unwrap_or("");
        let size =
            usize::from_str_radix(size, 16).map_err(|_| HttpError::Malformed("bad chunk size"))?;
        if body.len() + size > MAX_BODY {
            return Err(HttpError::Malformed("body too large"));
        }
        if size == 0 {
            // Trailers, up to a blank line.
            loop {
                line.clear();
                let mut budget = 0;
                if read_line(reader, &mut line, &mut budget)? == 0 || line.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = [0; 2];
        reader.read_exact(&mut crlf)?;
    }
}

/// The reason phrase for the statuses the stub sends.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// The last element of the array `field` of a request body: the newest
/// message (or input item, or content) of the conversation a client sent,
/// which says whether it is answering a tool call.
pub fn last_of<'a>(body: &'a Value, field: &str) -> Option<&'a Value> {
    body[field].as_array().and_then(|items| items.last())
}

/// Writes a complete JSON response.
pub fn write_json(
    stream: &mut TcpStream,
    status: u16,
    extra_headers: &[(&str, &str)],
    body: &Value,
) -> io::Result<()> {
    let body = body.to_string();
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        reason(status),
        body.len()
    );
    for (name, value) in extra_headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

/// Starts a complete JSON response but sends only the first half of the
/// body before dropping the connection: a non-streaming call that fails
/// mid-way.
pub fn write_json_cut(stream: &mut TcpStream, body: &Value) -> io::Result<()> {
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(&body.as_bytes()[..body.len() / 2])?;
    stream.flush()?;
    stream.shutdown(std::net::Shutdown::Both)
}

/// Answers a `HEAD` request: 200, no body.
pub fn write_head_ok(stream: &mut TcpStream) -> io::Result<()> {
    stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")?;
    stream.flush()
}

/// A streamed (chunked) response. Chunked framing matters: a body cut
/// before its last chunk is a detectable failure for the client, where a
/// close-delimited body would look complete.
pub struct ChunkedResponse<'a> {
    stream: &'a mut TcpStream,
}

impl<'a> ChunkedResponse<'a> {
    /// Sends the head of a 200 response with `content_type`.
    pub fn start(stream: &'a mut TcpStream, content_type: &str) -> io::Result<Self> {
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncache-control: no-cache\r\n\
             transfer-encoding: chunked\r\n\r\n"
        );
        stream.write_all(head.as_bytes())?;
        stream.flush()?;
        Ok(ChunkedResponse { stream })
    }

    /// Sends one chunk at once.
    pub fn send(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        write!(self.stream, "{:x}\r\n", data.len())?;
        self.stream.write_all(data)?;
        self.stream.write_all(b"\r\n")?;
        self.stream.flush()
    }

    /// Ends the body properly.
    pub fn finish(self) -> io::Result<()> {
        self.stream.write_all(b"0\r\n\r\n")?;
        self.stream.flush()
    }

    /// Drops the connection without ending the body: the client sees the
    /// stream fail mid-way.
    pub fn cut(self) -> io::Result<()> {
        self.stream.shutdown(std::net::Shutdown::Both)
    }
}
