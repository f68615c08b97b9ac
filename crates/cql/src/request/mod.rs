//! Requests: messages a client sends. One file per opcode (spec section 4.1).

pub mod auth_response;
pub mod batch;
pub mod execute;
pub mod options;
pub mod prepare;
pub mod query;
pub mod register;
pub mod startup;

pub use auth_response::AuthResponse;
pub use batch::{Batch, BatchStatement, BatchType};
pub use execute::Execute;
pub use options::Options;
pub use prepare::Prepare;
pub use query::{Query, QueryParameters, Values};
pub use register::{EventType, Register};
pub use startup::Startup;

use crate::frame::FrameHeader;
use crate::opcode::Opcode;
use crate::wire::{read_bytes_map, BytesMap, DecodeError};

/// A decoded request body, borrowing from the frame it came in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    Startup(Startup<'a>),
    Options(Options),
    Query(Query<'a>),
    Prepare(Prepare<'a>),
    Execute(Execute<'a>),
    Batch(Batch<'a>),
    Register(Register),
    AuthResponse(AuthResponse<'a>),
}

/// A request and what its frame flags added around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestFrame<'a> {
    pub request: Request<'a>,
    /// The client asked for tracing (flag 0x02).
    pub tracing: bool,
    /// The custom payload (flag 0x04), which precedes the message in a request body.
    pub custom_payload: Option<BytesMap<'a>>,
}

impl<'a> Request<'a> {
    /// Decodes the body of a request frame whose header has been decoded already.
    ///
    /// `body` must be exactly the `header.body_length_bytes` bytes that followed the header;
    /// bytes left over after the message are ignored, as the spec tells readers to do.
    /// A compressed body is refused: hayate offers no compression in SUPPORTED, so a client
    /// that compresses has not negotiated it.
    pub fn decode(header: &FrameHeader, body: &'a [u8]) -> Result<RequestFrame<'a>, DecodeError> {
        assert_eq!(
            body.len(),
            header.body_length_bytes as usize,
            "caller must pass exactly the frame body"
        );
        if header.flags.compression() {
            return Err(DecodeError::Invalid {
                what: "frame flags: compression was not negotiated",
                value: header.flags.0.into(),
            });
        }
        let mut buf = body;
        let custom_payload = if header.flags.custom_payload() {
            Some(read_bytes_map(&mut buf)?)
        } else {
            None
        };
        let buf = &mut buf;
        let request = match header.opcode {
            Opcode::Startup => Request::Startup(Startup::decode(buf)?),
            Opcode::Options => Request::Options(Options::decode(buf)),
            Opcode::Query => Request::Query(Query::decode_versioned(buf, header.version)?),
            Opcode::Prepare => Request::Prepare(Prepare::decode_versioned(buf, header.version)?),
            Opcode::Execute => Request::Execute(Execute::decode_versioned(buf, header.version)?),
            Opcode::Batch => Request::Batch(Batch::decode_versioned(buf, header.version)?),
            Opcode::Register => Request::Register(Register::decode(buf)?),
            Opcode::AuthResponse => Request::AuthResponse(AuthResponse::decode(buf)?),
            op @ (Opcode::Error
            | Opcode::Ready
            | Opcode::Authenticate
            | Opcode::Supported
            | Opcode::Result
            | Opcode::Event
            | Opcode::AuthChallenge
            | Opcode::AuthSuccess) => {
                return Err(DecodeError::Invalid {
                    what: "opcode: a response sent as a request",
                    value: (op as u8).into(),
                })
            }
        };
        Ok(RequestFrame {
            request,
            tracing: header.flags.tracing(),
            custom_payload,
        })
    }

    pub fn opcode(&self) -> Opcode {
        match self {
            Request::Startup(_) => Opcode::Startup,
            Request::Options(_) => Opcode::Options,
            Request::Query(_) => Opcode::Query,
            Request::Prepare(_) => Opcode::Prepare,
            Request::Execute(_) => Opcode::Execute,
            Request::Batch(_) => Opcode::Batch,
            Request::Register(_) => Opcode::Register,
            Request::AuthResponse(_) => Opcode::AuthResponse,
        }
    }

    /// Encodes a protocol v4 body (client side: tests and the bench).
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        self.encode_body_versioned(out, crate::frame::PROTOCOL_V4);
    }

    /// Encodes the body in the form `version` uses.
    pub fn encode_body_versioned(&self, out: &mut Vec<u8>, version: u8) {
        match self {
            Request::Startup(r) => r.encode(out),
            Request::Options(r) => r.encode(out),
            Request::Query(r) => r.encode_versioned(out, version),
            Request::Prepare(r) => r.encode_versioned(out, version),
            Request::Execute(r) => r.encode_versioned(out, version),
            Request::Batch(r) => r.encode_versioned(out, version),
            Request::Register(r) => r.encode(out),
            Request::AuthResponse(r) => r.encode(out),
        }
    }
}
