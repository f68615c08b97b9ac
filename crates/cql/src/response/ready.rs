//! READY (0x02): the connection is ready for queries. Spec section 4.2.2. The body is empty.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready;

impl Ready {
    pub fn encode(&self, _out: &mut Vec<u8>) {}
}
