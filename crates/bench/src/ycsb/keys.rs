//! Record keys exactly as YCSB names them: `user` followed by the key number, FNV-hashed unless
//! `insertorder=ordered`, zero-padded to `zeropadding` digits. Two clients that agree on these
//! names can load with one tool and run with the other.

use std::fmt::Write;

const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 little-end octets of a Java `long`, with Java's
/// arithmetic `>>` (so a negative number keeps shifting in ones) and `Math.abs` at the end
/// (which leaves `Long.MIN_VALUE` negative).
pub fn fnvhash64(value: i64) -> i64 {
    let mut val = value;
    let mut hash = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        let octet = (val & 0xff) as u64;
        val >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(FNV_PRIME_64);
    }
    (hash as i64).wrapping_abs()
}

/// Builds key names into one reused buffer, so that naming a key costs no allocation.
#[derive(Debug, Clone)]
pub struct KeyNamer {
    ordered: bool,
    zero_padding: usize,
    buf: String,
}

impl KeyNamer {
    pub fn new(ordered: bool, zero_padding: usize) -> KeyNamer {
        KeyNamer {
            ordered,
            zero_padding,
            buf: String::with_capacity(32),
        }
    }

    /// YCSB's `CoreWorkload.buildKeyName`.
    pub fn name(&mut self, keynum: i64) -> &str {
        let number = if self.ordered { keynum } else { fnvhash64(keynum) };
        self.buf.clear();
        self.buf.push_str("user");
        let digits = decimal_len(number);
        for _ in digits..self.zero_padding {
            self.buf.push('0');
        }
        write!(self.buf, "{number}").expect("writing to a String cannot fail");
        &self.buf
    }
}

/// The length of Java's `Long.toString(n)`, sign included.
fn decimal_len(n: i64) -> usize {
    let sign = usize::from(n < 0);
    let mut m = n.unsigned_abs();
    let mut digits = 1;
    while m >= 10 {
        m /= 10;
        digits += 1;
    }
    digits + sign
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vectors from YCSB 0.17.0 itself (site.ycsb.Utils.fnvhash64 and
    // CoreWorkload.buildKeyName, run in jshell against site.ycsb:core:0.17.0).
    #[test]
    fn fnvhash64_matches_ycsb() {
        for (input, expected) in FNV_VECTORS {
            assert_eq!(fnvhash64(*input), *expected, "fnvhash64({input})");
        }
    }

    #[test]
    fn key_names_match_ycsb() {
        let mut hashed = KeyNamer::new(false, 1);
        for (keynum, expected) in HASHED_KEY_VECTORS {
            assert_eq!(hashed.name(*keynum), *expected);
        }
        let mut ordered = KeyNamer::new(true, 1);
        assert_eq!(ordered.name(0), "user0");
        assert_eq!(ordered.name(12345), "user12345");
        let mut padded = KeyNamer::new(true, 12);
        assert_eq!(
            padded.name(42),
            "user000000000042",
            "YCSB: zeropadding=12, insertorder=ordered"
        );
        let mut padded = KeyNamer::new(true, 10);
        assert_eq!(padded.name(-5), "user00000000-5", "Java pads before the sign");
        let mut padded_hash = KeyNamer::new(false, 25);
        let name = padded_hash.name(1).to_string();
        assert_eq!(name.len(), 4 + 25);
        assert!(name.ends_with(&fnvhash64(1).to_string()));
    }

    #[test]
    fn decimal_len_counts_like_long_to_string() {
        for n in [0i64, 9, 10, 99, 100, -1, -10, i64::MAX, i64::MIN] {
            assert_eq!(decimal_len(n), n.to_string().len(), "{n}");
        }
    }

    const FNV_VECTORS: &[(i64, i64)] = &[
        (0, 6284781860667377211),
        (1, 8517097267634966620),
        (2, 1820151046732198393),
        (255, 8064062821143829734),
        (256, 2056600594528442646),
        (1000, 5952875239596136740),
        (12345, 1792800413050876852),
        (999999, 2744965632448235251),
        (1 << 40, 6908947124047430886),
        (-1, 8289690350564177859),
        (i64::MAX, 8289549613075766851),
    ];
    const HASHED_KEY_VECTORS: &[(i64, &str)] = &[
        (0, "user6284781860667377211"),
        (1, "user8517097267634966620"),
        (2, "user1820151046732198393"),
        (3, "user4052466453699787802"),
        (999, "user2071219101098386137"),
        (1000, "user5952875239596136740"),
    ];
}
