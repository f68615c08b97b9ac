//! Whole frames built byte by byte the way the Python cassandra-driver sends them on connect
//! and query, decoded through the header and the request dispatch, and the response frames
//! the driver expects back.

use crate::error::{ErrorBody, WireError};
use crate::frame::{FrameError, FrameHeader, HEADER_BYTES};
use crate::request::{Query, QueryParameters, Request, Values};
use crate::response::{Ready, Response, Supported};
use crate::wire::{Consistency, DecodeError};

/// Splits a frame into its decoded header and its body, as the connection loop will.
fn decode(frame: &[u8]) -> Result<(FrameHeader, &[u8]), FrameError> {
    let head: &[u8; HEADER_BYTES] = frame[..HEADER_BYTES].try_into().expect("9 bytes");
    let header = FrameHeader::decode_request(head)?;
    let body = &frame[HEADER_BYTES..];
    assert_eq!(
        body.len(),
        header.body_length_bytes as usize,
        "test frame length is wrong"
    );
    Ok((header, body))
}

#[test]
fn options_then_startup_as_the_python_driver_opens_a_connection() {
    // The driver first sends OPTIONS on stream 0 with an empty body ...
    let options = [0x04, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00];
    let (header, body) = decode(&options).expect("header");
    assert_eq!(
        Request::decode(&header, body).expect("body").request,
        Request::Options(crate::request::Options)
    );

    // ... then STARTUP with {"CQL_VERSION": "3.0.0"}.
    let mut startup = vec![0x04, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x16];
    startup.extend_from_slice(&[0x00, 0x01, 0x00, 0x0B]);
    startup.extend_from_slice(b"CQL_VERSION");
    startup.extend_from_slice(&[0x00, 0x05]);
    startup.extend_from_slice(b"3.0.0");
    let (header, body) = decode(&startup).expect("header");
    assert_eq!(header.stream, 1);
    let Request::Startup(s) = Request::decode(&header, body).expect("body").request else {
        panic!("not a STARTUP");
    };
    assert_eq!(s.cql_version(), Some("3.0.0"));
    assert_eq!(s.compression(), None);
}

#[test]
fn a_paged_select_at_consistency_one_with_a_client_timestamp() {
    // The driver's default: page size 5000 (flag 0x04) and a client-side timestamp (0x20).
    let query = "SELECT peer, rpc_address FROM system.peers";
    let mut body = Vec::new();
    body.extend_from_slice(&(query.len() as u32).to_be_bytes());
    body.extend_from_slice(query.as_bytes());
    body.extend_from_slice(&[0x00, 0x01]); // consistency ONE
    body.push(0x24); // flags: page size | default timestamp
    body.extend_from_slice(&[0x00, 0x00, 0x13, 0x88]); // 5000
    body.extend_from_slice(&1_700_000_000_123_456i64.to_be_bytes());
    let mut frame = vec![0x04, 0x00, 0x00, 0x07, 0x07];
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);

    let (header, body) = decode(&frame).expect("header");
    let decoded = Request::decode(&header, body).expect("body");
    let mut expected = QueryParameters::with_consistency(Consistency::One);
    expected.page_size = Some(5000);
    expected.default_timestamp_us = Some(1_700_000_000_123_456);
    assert_eq!(
        decoded.request,
        Request::Query(Query {
            query,
            parameters: expected
        })
    );
    assert!(!decoded.tracing);
}

#[test]
fn a_custom_payload_precedes_the_message_and_is_kept() {
    let mut body = vec![0x00, 0x01, 0x00, 0x01, b'k', 0x00, 0x00, 0x00, 0x01, b'v'];
    let mut q = Vec::new();
    Query {
        query: "SELECT 1",
        parameters: QueryParameters::with_consistency(Consistency::Quorum),
    }
    .encode(&mut q);
    body.extend_from_slice(&q);
    let mut frame = vec![0x04, 0x04, 0x00, 0x02, 0x07];
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    let (header, body) = decode(&frame).expect("header");
    let decoded = Request::decode(&header, body).expect("body");
    assert_eq!(decoded.custom_payload, Some(vec![("k", Some(&b"v"[..]))]));
    assert!(matches!(
        decoded.request,
        Request::Query(Query {
            query: "SELECT 1",
            ..
        })
    ));
}

#[test]
fn a_malformed_body_is_a_decode_error_that_becomes_a_protocol_error() {
    // QUERY whose [long string] claims 100 bytes but the body holds 3.
    let frame = [
        0x04, 0x00, 0x00, 0x03, 0x07, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x64, b'a', b'b', b'c',
    ];
    let (header, body) = decode(&frame).expect("header");
    let err = Request::decode(&header, body).expect_err("truncated");
    assert!(matches!(err, DecodeError::Truncated { .. }));
    let wire: WireError = err.into();
    assert_eq!(wire.body, ErrorBody::ProtocolError);
}

#[test]
fn compressed_frames_and_response_opcodes_are_refused() {
    let frame = [0x04, 0x01, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00];
    let (header, body) = decode(&frame).expect("header");
    assert!(Request::decode(&header, body).is_err());
    let frame = [0x04, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00];
    let (header, body) = decode(&frame).expect("header");
    assert!(Request::decode(&header, body).is_err());
}

#[test]
fn ready_frame_bytes_echo_the_stream() {
    let mut out = Vec::new();
    Response::Ready(Ready).encode_frame(1, 4, &mut out).expect("fits");
    assert_eq!(out, [0x84, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00]);
}

#[test]
fn responses_are_appended_so_they_coalesce_into_one_write() {
    let mut out = Vec::new();
    Response::Supported(Supported::hayate())
        .encode_frame(0, 4, &mut out)
        .expect("fits");
    let first = out.len();
    Response::Ready(Ready).encode_frame(1, 4, &mut out).expect("fits");
    let length = u32::from_be_bytes(out[5..9].try_into().expect("4 bytes")) as usize;
    assert_eq!(first, HEADER_BYTES + length);
    assert_eq!(out[first], 0x84);
    assert_eq!(out[first + 4], 0x02);
}

#[test]
fn a_v6_probe_is_answered_with_a_protocol_error_the_driver_downgrades_on() {
    // Cassandra answers a version above its newest in its newest (5), and so do we.
    let probe = [0x06, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00];
    let err = decode(&probe).expect_err("v6");
    let mut out = Vec::new();
    Response::Error(err.clone().into())
        .encode_frame(err.stream(), crate::frame::PROTOCOL_VERSION_MAX, &mut out)
        .expect("fits");
    assert_eq!(&out[..5], [0x85, 0x00, 0x00, 0x00, 0x00]);
    let mut body = &out[HEADER_BYTES..];
    let decoded = WireError::decode(&mut body).expect("error body");
    assert_eq!(decoded.body, ErrorBody::ProtocolError);
    assert!(decoded
        .message
        .starts_with("Invalid or unsupported protocol version (6)"));
}

#[test]
fn a_request_encoded_by_this_crate_decodes_to_itself() {
    let mut p = QueryParameters::with_consistency(Consistency::LocalOne);
    p.values = Values::Positional(vec![crate::wire::Value::Bytes(&[0, 0, 0, 42])]);
    let request = Request::Query(Query {
        query: "SELECT * FROM ks.t WHERE k = ?",
        parameters: p,
    });
    let mut body = Vec::new();
    request.encode_body(&mut body);
    let mut frame = vec![0x04, 0x00, 0x00, 0x09, request.opcode() as u8];
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    let (header, body) = decode(&frame).expect("header");
    assert_eq!(Request::decode(&header, body).expect("body").request, request);
}

/// A small deterministic generator, so a failure names the seed that reproduces it.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn garbage_and_bit_flipped_bodies_are_errors_never_panics() {
    // The server must survive any body: each request opcode is fed random bytes and
    // single-byte corruptions of a valid message. Only "no panic" is checked.
    let mut valid = Vec::new();
    let mut p = QueryParameters::with_consistency(Consistency::One);
    p.values = Values::Named(vec![
        ("k", crate::wire::Value::Bytes(b"abc")),
        ("v", crate::wire::Value::Null),
    ]);
    p.page_size = Some(100);
    p.paging_state = Some(b"state");
    p.serial_consistency = Some(Consistency::Serial);
    p.default_timestamp_us = Some(5);
    Query {
        query: "SELECT * FROM t WHERE k = :k",
        parameters: p,
    }
    .encode(&mut valid);
    let request_opcodes = [0x01u8, 0x05, 0x07, 0x09, 0x0A, 0x0B, 0x0D, 0x0F];
    for seed in 1..=2_000u64 {
        let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let opcode = request_opcodes[(rng.next() % request_opcodes.len() as u64) as usize];
        let flags = (rng.next() & 0x06) as u8; // tracing and custom payload, never compression
        let body: Vec<u8> = if seed % 2 == 0 {
            let len = (rng.next() % 64) as usize;
            (0..len).map(|_| rng.next() as u8).collect()
        } else {
            let mut b = valid.clone();
            let at = (rng.next() % b.len() as u64) as usize;
            b[at] ^= 1 << (rng.next() % 8);
            b
        };
        let mut head = [0x04, flags, 0x00, 0x00, opcode, 0, 0, 0, 0];
        head[5..9].copy_from_slice(&(body.len() as u32).to_be_bytes());
        let header = FrameHeader::decode_request(&head).expect("valid header");
        let _ = Request::decode(&header, &body);
    }
}
