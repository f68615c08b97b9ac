//! A GET of a node's status document over plain HTTP (the metrics endpoint), without a
//! client library: one request, one response, connection closed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A response larger than this is not a status document.
const RESPONSE_MAX_BYTES: u64 = 16 << 20;

/// GETs `path` from `addr`; the body of a 200 answer.
pub fn get(addr: SocketAddr, path: &str, timeout: Duration) -> Result<String, String> {
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("cannot reach {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| e.to_string())?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
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
    if !head.starts_with("HTTP/1.1 200") {
        let line = head.lines().next().unwrap_or_default();
        return Err(format!("{addr} answered {line}: {}", body.trim()));
    }
    Ok(body.to_owned())
}
