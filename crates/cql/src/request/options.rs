//! OPTIONS (0x05): asks which STARTUP options the server supports. Spec section 4.1.3.
//!
//! The body is empty. Extra bytes are ignored, as the spec asks of readers (section 1).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options;

impl Options {
    pub fn decode(_buf: &mut &[u8]) -> Options {
        Options
    }

    pub fn encode(&self, _out: &mut Vec<u8>) {}
}
