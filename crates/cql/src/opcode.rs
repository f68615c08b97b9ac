//! The one-byte message kind in every frame header.
//!
//! Spec: native_protocol_v4.spec, section 2.4 "opcode". There is no 0x04 in v4 (it was the v1
//! CREDENTIALS message), so it decodes as unknown.

/// Every v4 opcode. The discriminant is the byte on the wire.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opcode {
    Error = 0x00,
    Startup = 0x01,
    Ready = 0x02,
    Authenticate = 0x03,
    Options = 0x05,
    Supported = 0x06,
    Query = 0x07,
    Result = 0x08,
    Prepare = 0x09,
    Execute = 0x0A,
    Register = 0x0B,
    Event = 0x0C,
    Batch = 0x0D,
    AuthChallenge = 0x0E,
    AuthResponse = 0x0F,
    AuthSuccess = 0x10,
}

impl Opcode {
    /// All opcodes, in wire order; handy for exhaustive tests.
    pub const ALL: [Opcode; 16] = [
        Opcode::Error,
        Opcode::Startup,
        Opcode::Ready,
        Opcode::Authenticate,
        Opcode::Options,
        Opcode::Supported,
        Opcode::Query,
        Opcode::Result,
        Opcode::Prepare,
        Opcode::Execute,
        Opcode::Register,
        Opcode::Event,
        Opcode::Batch,
        Opcode::AuthChallenge,
        Opcode::AuthResponse,
        Opcode::AuthSuccess,
    ];

    /// The opcode for a wire byte, or `None` if v4 defines no such message.
    pub fn from_byte(byte: u8) -> Option<Opcode> {
        Opcode::ALL.into_iter().find(|op| *op as u8 == byte)
    }

    /// True for messages a client sends; false for messages the server sends.
    pub fn is_request(self) -> bool {
        matches!(
            self,
            Opcode::Startup
                | Opcode::Options
                | Opcode::Query
                | Opcode::Prepare
                | Opcode::Execute
                | Opcode::Register
                | Opcode::Batch
                | Opcode::AuthResponse
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_opcode_round_trips_through_its_byte() {
        for op in Opcode::ALL {
            assert_eq!(Opcode::from_byte(op as u8), Some(op));
        }
    }

    #[test]
    fn the_v1_credentials_byte_and_bytes_past_auth_success_are_unknown() {
        assert_eq!(Opcode::from_byte(0x04), None);
        for byte in 0x11..=0xFF {
            assert_eq!(Opcode::from_byte(byte), None);
        }
    }
}
