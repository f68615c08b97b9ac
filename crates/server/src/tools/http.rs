//! Requests to a node's HTTP endpoint (the metrics port) without a client library: one
//! request, one response, connection closed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A response larger than this is not a status document.
const RESPONSE_MAX_BYTES: u64 = 16 << 20;

/// GETs `path` from `addr`; the body of a 200 answer.
pub fn get(addr: SocketAddr, path: &str, timeout: Duration) -> Result<String, String> {
    match request(addr, "GET", path, timeout)? {
        (200, body) => Ok(body),
        (_, body) => Err(format!("{addr} answered: {}", body.trim())),
    }
}

/// Sends `method path` to `addr`; the status code and the body, whatever the status.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    timeout: Duration,
) -> Result<(u16, String), String> {
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("cannot reach {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| e.to_string())?;
    let request =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("cannot ask {addr}: {e}"))?;
    let mut response = String::new();
    stream
        .take(RESPONSE_MAX_BYTES)
        .read_to_string(&mut response)
        .map_err(|e| format!("no answer from {addr}: {e}"))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{addr} did not answer in HTTP"))?;
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| format!("{addr} did not answer in HTTP"))?;
    Ok((code, body.to_owned()))
}

/// What a tool says when the node does not answer at all.
const UNREACHABLE_HINT: &str =
    "is a node running there, with its metrics endpoint on this port? see --host and --port";

/// GETs the JSON document at `path`.
pub fn get_json(addr: SocketAddr, path: &str, timeout: Duration) -> Result<serde_json::Value, String> {
    let (code, body) =
        request(addr, "GET", path, timeout).map_err(|e| format!("{e} ({UNREACHABLE_HINT})"))?;
    if code != 200 {
        return Err(format!("{addr} answered {path} with {code}: {}", body.trim()));
    }
    serde_json::from_str(&body)
        .map_err(|e| format!("{addr} answered {path} with what this build cannot read: {e}"))
}

/// POSTs to `path`; the answer's body, or the node's refusal as the error.
pub fn post(addr: SocketAddr, path: &str, timeout: Duration) -> Result<String, String> {
    match request(addr, "POST", path, timeout).map_err(|e| format!("{e} ({UNREACHABLE_HINT})"))? {
        (200, body) => Ok(body.trim().to_owned()),
        (_, body) => Err(body.trim().to_owned()),
    }
}
