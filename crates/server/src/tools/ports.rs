//! Whether a node's ports are free on its address, and when one is not, which process holds it:
//! `hayate local` refuses to start a node on a taken port rather than let it die there (or, worse,
//! report as up whatever else answers on the address).
//!
//! The holder is found as `ss -p` finds it: the socket's inode in `/proc/net/{tcp,udp}{,6}`, then
//! the process with that inode among its file descriptors in `/proc/*/fd`. Processes of other
//! users are not readable: their port is still refused, without a name.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, UdpSocket};

/// The transport a port is bound for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Udp,
}

/// One port a node binds, and what it is for (for the message).
#[derive(Clone, Copy, Debug)]
pub struct Port {
    pub number: u16,
    pub proto: Proto,
    pub purpose: &'static str,
}

/// A process that holds a socket.
#[derive(Debug, PartialEq, Eq)]
pub struct Holder {
    pub pid: i32,
    pub command: String,
}

/// `/proc/PID/cmdline` (or `comm`) is cut to this in messages.
const COMMAND_SHOWN_BYTES_MAX: usize = 120;

/// The ports in `ports` that cannot be bound on `ip` right now, each with a sentence naming it
/// and, where it can be found, the process that holds it.
pub fn taken(ip: IpAddr, ports: &[Port]) -> Vec<String> {
    let mut out = Vec::new();
    for port in ports {
        let addr = SocketAddr::new(ip, port.number);
        let bound = match port.proto {
            Proto::Tcp => TcpListener::bind(addr).map(drop),
            Proto::Udp => UdpSocket::bind(addr).map(drop),
        };
        let Err(e) = bound else { continue };
        let proto = match port.proto {
            Proto::Tcp => "TCP",
            Proto::Udp => "UDP",
        };
        let by = match holder(addr, port.proto) {
            Some(h) => format!("held by pid {} ({})", h.pid, h.command),
            None => {
                "held by a process this user cannot see, or the address is not on this machine".to_owned()
            }
        };
        out.push(format!(
            "{} {proto} {addr} cannot be bound ({e}): {by}",
            port.purpose
        ));
    }
    out
}

/// The process holding a socket bound to `addr` (or to the wildcard address on its port).
pub fn holder(addr: SocketAddr, proto: Proto) -> Option<Holder> {
    let tables: &[&str] = match proto {
        Proto::Tcp => &["/proc/net/tcp", "/proc/net/tcp6"],
        Proto::Udp => &["/proc/net/udp", "/proc/net/udp6"],
    };
    let inodes: Vec<u64> = tables
        .iter()
        .filter_map(|t| fs::read_to_string(t).ok())
        .flat_map(|text| socket_inodes(&text, addr, proto))
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let pid = pid_with_socket(&inodes)?;
    Some(Holder {
        pid,
        command: command_of(pid),
    })
}

/// The inodes of the sockets in one `/proc/net/*` table bound where `addr` would bind: the
/// same port on the same address or on the wildcard (TCP: listening only, a connection from
/// that port does not stop a bind).
fn socket_inodes(table: &str, addr: SocketAddr, proto: Proto) -> Vec<u64> {
    // TCP_LISTEN in include/net/tcp_states.h.
    const TCP_LISTEN: &str = "0A";
    let mut out = Vec::new();
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
        let (Some(local), Some(state), Some(inode)) = (fields.get(1), fields.get(3), fields.get(9)) else {
            continue;
        };
        if proto == Proto::Tcp && *state != TCP_LISTEN {
            continue;
        }
        let Some((ip, port)) = parse_local(local) else {
            continue;
        };
        if port != addr.port() || !(ip == addr.ip() || ip.is_unspecified() || same_v4(ip, addr.ip())) {
            continue;
        }
        if let Ok(inode) = inode.parse::<u64>() {
            if inode != 0 {
                out.push(inode);
            }
        }
    }
    out
}

/// An IPv4-mapped IPv6 address (`::ffff:127.0.0.2`) and the IPv4 address it maps.
fn same_v4(a: IpAddr, b: IpAddr) -> bool {
    match (a, b) {
        (IpAddr::V6(v6), IpAddr::V4(v4)) | (IpAddr::V4(v4), IpAddr::V6(v6)) => {
            v6.to_ipv4_mapped() == Some(v4)
        }
        _ => false,
    }
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6), as the kernel prints a socket's
/// address: each 32-bit word of the address in the machine's byte order, the port in hex.
#[expect(
    clippy::host_endian_bytes,
    reason = "the kernel prints each word of the address as a number in the machine's byte order"
)]
fn parse_local(field: &str) -> Option<(IpAddr, u16)> {
    let (ip_hex, port_hex) = field.split_once(':')?;
    let port = u16::from_str_radix(port_hex, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = u32::from_str_radix(ip_hex.get(i * 8..i * 8 + 8)?, 16).ok()?;
        Some(w.to_ne_bytes())
    };
    let ip = match ip_hex.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some((ip, port))
}

/// The first process (by pid) with one of `inodes` among its open files.
fn pid_with_socket(inodes: &[u64]) -> Option<i32> {
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let mut pids: Vec<i32> = fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids.into_iter().find(|pid| {
        let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        fds.flatten().any(|fd| {
            fs::read_link(fd.path())
                .is_ok_and(|target| wanted.iter().any(|w| target.as_os_str() == w.as_str()))
        })
    })
}

/// A process's command line, arguments separated by spaces, cut for a message.
fn command_of(pid: i32) -> String {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut text = String::from_utf8_lossy(&raw)
        .split('\0')
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .replace(char::is_control, " ");
    if text.is_empty() {
        text = fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap_or_default()
            .trim()
            .to_owned();
    }
    if text.len() > COMMAND_SHOWN_BYTES_MAX {
        let mut cut = COMMAND_SHOWN_BYTES_MAX;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[expect(
        clippy::host_endian_bytes,
        reason = "the kernel's own byte order, as parse_local reads it"
    )]
    fn the_kernels_socket_addresses_read_back() {
        let v4 = u32::from_ne_bytes([127, 0, 0, 2]);
        let field = format!("{v4:08X}:2352");
        assert_eq!(
            parse_local(&field),
            Some((IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), 0x2352))
        );
        assert_eq!(
            parse_local("00000000000000000000000000000000:1B58"),
            Some((IpAddr::V6(Ipv6Addr::UNSPECIFIED), 7000))
        );
        assert_eq!(parse_local("zz:1"), None);
    }

    #[test]
    fn a_port_held_here_is_refused_and_its_holder_named() {
        // Regression: `hayate local start` reported nodes up when whatever held their ports
        // answered; the port must be refused before a node starts, naming who holds it.
        let held = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let addr = held.local_addr().expect("bound");
        let ports = [Port {
            number: addr.port(),
            proto: Proto::Tcp,
            purpose: "CQL",
        }];
        let taken = taken(addr.ip(), &ports);
        assert_eq!(taken.len(), 1, "{taken:?}");
        let me = std::process::id();
        assert!(
            taken[0].starts_with(&format!("CQL TCP {addr} cannot be bound")),
            "{taken:?}"
        );
        assert!(taken[0].contains(&format!("held by pid {me} (")), "{taken:?}");
        drop(held);
        assert!(super::taken(addr.ip(), &ports).is_empty());
    }

    #[test]
    fn a_udp_port_held_here_is_found() {
        let held = UdpSocket::bind("127.0.0.1:0").expect("a free port");
        let addr = held.local_addr().expect("bound");
        let h = holder(addr, Proto::Udp).expect("found in /proc/net/udp");
        assert_eq!(h.pid, std::process::id() as i32);
    }
}
