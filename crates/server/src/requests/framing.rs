//! How a connection's responses go on the wire: which protocol version their headers carry,
//! whether frame bodies are compressed (v4), and whether frames travel inside v5 segments.
//!
//! A v5 connection starts like a v4 one: OPTIONS, STARTUP and the answer to STARTUP (READY or
//! AUTHENTICATE) are bare frames. From the next frame on, in both directions, frames travel in
//! checksummed segments ([`hayate_cql::segment`]), compressed at the segment level when LZ4
//! was negotiated, and the frames themselves are never compressed.

use hayate_cql::compression::Compression;
use hayate_cql::frame::{FrameFlags, HEADER_BYTES, PROTOCOL_V4};
use hayate_cql::response::Response;
use hayate_cql::segment::SegmentCodec;

/// Responses smaller than this are sent uncompressed even when compression was negotiated: the
/// v4 flag is per frame, and compressing a few bytes costs more than it saves.
const COMPRESS_MIN_BYTES: usize = 512;

/// Everything needed to turn a response into bytes for one connection. Small and `Copy`, so
/// that the task forwarding events can take its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameWriter {
    /// The version response headers carry.
    pub version: u8,
    /// v4 frame body compression.
    pub compression: Option<Compression>,
    /// Set once a v5 connection switched to segments.
    pub segments: Option<SegmentCodec>,
}

impl Default for FrameWriter {
    fn default() -> FrameWriter {
        FrameWriter {
            version: PROTOCOL_V4,
            compression: None,
            segments: None,
        }
    }
}

impl FrameWriter {
    /// The bytes that carry `response` on `stream`. A response too large for a frame becomes
    /// a server error on the same stream.
    pub fn encode(&self, stream: i16, response: &Response) -> Vec<u8> {
        self.encode_traced(stream, response, None, &[])
    }

    /// Like [`FrameWriter::encode`], with the tracing session id of a traced request and the
    /// warnings the request gathered.
    pub fn encode_traced(
        &self,
        stream: i16,
        response: &Response,
        tracing_id: Option<&[u8; 16]>,
        warnings: &[String],
    ) -> Vec<u8> {
        let mut frame = Vec::new();
        if let Err(e) = response.encode_traced_frame(stream, self.version, tracing_id, warnings, &mut frame) {
            let error = Response::Error(crate::error::server_error(e.to_string()).to_wire());
            frame.clear();
            if error.encode_frame(stream, self.version, &mut frame).is_err() {
                return Vec::new();
            }
        }
        if let Some(codec) = self.segments {
            let mut out = Vec::with_capacity(frame.len() + 16);
            codec.encode(&frame, &mut out);
            return out;
        }
        match self.compression {
            Some(algorithm) if frame.len() - HEADER_BYTES >= COMPRESS_MIN_BYTES => {
                let mut compressed = Vec::with_capacity(frame.len());
                compressed.extend_from_slice(&frame[..HEADER_BYTES]);
                algorithm.compress(&frame[HEADER_BYTES..], &mut compressed);
                let length = (compressed.len() - HEADER_BYTES) as u32;
                compressed[1] |= FrameFlags::COMPRESSION;
                compressed[5..9].copy_from_slice(&length.to_be_bytes());
                compressed
            }
            _ => frame,
        }
    }
}
