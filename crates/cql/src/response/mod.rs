//! Responses: messages the server sends. One file per opcode (spec section 4.2).

pub mod auth_challenge;
pub mod auth_success;
pub mod authenticate;
pub mod error;
pub mod event;
pub mod ready;
pub mod result;
pub mod supported;

pub use auth_challenge::AuthChallenge;
pub use auth_success::AuthSuccess;
pub use authenticate::Authenticate;
pub use event::{Event, SchemaChange};
pub use ready::Ready;
pub use result::ResultBody;
pub use supported::Supported;

use std::fmt;

use crate::error::WireError;
use crate::frame::{Direction, FrameFlags, FrameHeader, HEADER_BYTES, PROTOCOL_BODY_MAX_BYTES};
use crate::opcode::Opcode;

/// A response, ready to be framed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Error(WireError),
    Ready(Ready),
    Authenticate(Authenticate),
    Supported(Supported),
    Result(ResultBody),
    Event(Event),
    AuthChallenge(AuthChallenge),
    AuthSuccess(AuthSuccess),
}

/// A response body came out larger than [`PROTOCOL_BODY_MAX_BYTES`]. The caller should answer
/// with an ERROR instead (and page smaller next time); nothing was left in the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseTooLarge {
    pub body_length_bytes: usize,
}

impl fmt::Display for ResponseTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "response body of {} bytes exceeds the frame maximum of {PROTOCOL_BODY_MAX_BYTES} bytes; \
             use a smaller page size",
            self.body_length_bytes
        )
    }
}

impl std::error::Error for ResponseTooLarge {}

impl Response {
    pub fn opcode(&self) -> Opcode {
        match self {
            Response::Error(_) => Opcode::Error,
            Response::Ready(_) => Opcode::Ready,
            Response::Authenticate(_) => Opcode::Authenticate,
            Response::Supported(_) => Opcode::Supported,
            Response::Result(_) => Opcode::Result,
            Response::Event(_) => Opcode::Event,
            Response::AuthChallenge(_) => Opcode::AuthChallenge,
            Response::AuthSuccess(_) => Opcode::AuthSuccess,
        }
    }

    /// Appends the body in the form protocol `version` uses.
    pub fn encode_body(&self, version: u8, out: &mut Vec<u8>) {
        match self {
            Response::Error(r) => r.encode_versioned(out, version),
            Response::Ready(r) => r.encode(out),
            Response::Authenticate(r) => r.encode(out),
            Response::Supported(r) => r.encode(out),
            Response::Result(r) => r.encode_versioned(out, version),
            Response::Event(r) => r.encode(out),
            Response::AuthChallenge(r) => r.encode(out),
            Response::AuthSuccess(r) => r.encode(out),
        }
    }

    /// Appends a whole response frame (header and body) of protocol `version` on `stream`.
    /// Appending lets the connection coalesce many responses into one socket write.
    pub fn encode_frame(&self, stream: i16, version: u8, out: &mut Vec<u8>) -> Result<(), ResponseTooLarge> {
        self.encode_traced_frame(stream, version, None, &[], out)
    }

    /// Like [`Response::encode_frame`], with the tracing flag and the session id first in the
    /// body when the request was traced (spec section 2.2, flag 0x02), then the warning flag
    /// and the server's warnings as a [string list] when there are any (flag 0x08, which
    /// drivers show as the query's warnings).
    pub fn encode_traced_frame(
        &self,
        stream: i16,
        version: u8,
        tracing_id: Option<&[u8; 16]>,
        warnings: &[String],
        out: &mut Vec<u8>,
    ) -> Result<(), ResponseTooLarge> {
        let start = out.len();
        out.resize(start + HEADER_BYTES, 0);
        let mut flags = 0;
        if let Some(id) = tracing_id {
            flags |= FrameFlags::TRACING;
            out.extend_from_slice(id);
        }
        if !warnings.is_empty() {
            flags |= FrameFlags::WARNING;
            crate::wire::write_string_list(out, warnings);
        }
        self.encode_body(version, out);
        let body_length_bytes = out.len() - start - HEADER_BYTES;
        let Some(length) = u32::try_from(body_length_bytes)
            .ok()
            .filter(|n| *n <= PROTOCOL_BODY_MAX_BYTES)
        else {
            out.truncate(start);
            return Err(ResponseTooLarge { body_length_bytes });
        };
        let header = FrameHeader {
            version,
            direction: Direction::Response,
            flags: FrameFlags(flags),
            stream,
            opcode: self.opcode(),
            body_length_bytes: length,
        };
        let mut head = Vec::with_capacity(HEADER_BYTES);
        header.encode(&mut head);
        out[start..start + HEADER_BYTES].copy_from_slice(&head);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{read_string_list, read_uuid};

    #[test]
    fn warnings_follow_the_tracing_id_and_set_their_flag() {
        let warnings = vec!["Batch for [ks.t] is of size 6000".to_owned()];
        let id = [7u8; 16];
        let mut out = Vec::new();
        Response::Result(ResultBody::Void)
            .encode_traced_frame(3, 4, Some(&id), &warnings, &mut out)
            .expect("fits");
        let header = FrameHeader::decode(out[..HEADER_BYTES].try_into().expect("9 bytes")).expect("header");
        assert!(header.flags.tracing() && header.flags.warning());
        let mut body = &out[HEADER_BYTES..];
        assert_eq!(read_uuid(&mut body), Ok(id));
        assert_eq!(read_string_list(&mut body), Ok(vec![warnings[0].as_str()]));
        // What is left is the RESULT body: kind 1 (Void).
        assert_eq!(body, &[0, 0, 0, 1]);
    }

    #[test]
    fn no_warnings_no_flag() {
        let mut out = Vec::new();
        Response::Result(ResultBody::Void)
            .encode_traced_frame(3, 4, None, &[], &mut out)
            .expect("fits");
        assert_eq!(out[1], 0, "no flags");
        assert_eq!(&out[HEADER_BYTES..], &[0, 0, 0, 1]);
    }
}
