//! The internode message format on arbitrary bytes: nothing a peer (or a damaged connection)
//! sends may panic a node. Input: `mode u8 | bytes`; the mode picks a sealed frame, a stream
//! of frames or the handshake (see `src/internode.rs`), and every message that decodes must
//! survive a round trip.

#![no_main]

use hayate_fuzz::internode::check_internode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check_internode(data);
});
