//! Sizes in bytes as the file writes them ("4GiB", "512MiB", or a number of bytes).

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// A size in bytes, written in the file as "4GiB", "512MiB", "128KiB" or a plain number of
/// bytes. Binary units only: "4GB" is ambiguous (10^9 or 2^30) and is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn parse(text: &str) -> Result<ByteSize, String> {
        let text = text.trim();
        let digits_end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
        let (digits, unit) = text.split_at(digits_end);
        let shift = match unit.trim() {
            "" | "B" => 0,
            "KiB" => 10,
            "MiB" => 20,
            "GiB" => 30,
            "TiB" => 40,
            _ => return Err(size_form_message(text)),
        };
        let number: u64 = digits.parse().map_err(|_| size_form_message(text))?;
        number
            .checked_mul(1 << shift)
            .map(ByteSize)
            .ok_or_else(|| format!("size \"{text}\" is too large"))
    }
}

fn size_form_message(text: &str) -> String {
    format!(
        "\"{text}\" is not a size: write a number of bytes or a whole number with KiB, MiB, GiB or TiB, such as \"4GiB\" or \"512MiB\""
    )
}

impl fmt::Display for ByteSize {
    /// The largest binary unit that divides the size exactly, so messages echo what the
    /// operator wrote.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
            if self.0 != 0 && self.0.trailing_zeros() >= shift {
                return write!(f, "{}{unit}", self.0 >> shift);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ByteSize, D::Error> {
        struct SizeVisitor;

        impl Visitor<'_> for SizeVisitor {
            type Value = ByteSize;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"4GiB\", \"512MiB\", \"128KiB\" or a number of bytes")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("size {v} is negative")))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                ByteSize::parse(v).map_err(E::custom)
            }
        }

        deserializer.deserialize_any(SizeVisitor)
    }
}
