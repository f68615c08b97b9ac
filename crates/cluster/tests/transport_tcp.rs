//! The TCP transport between real sockets: three nodes on 127.0.0.1, .2 and .3, all on the
//! same port (each binds only its own address), exchanging messages in order per lane, a
//! 17 MiB mutation, a peer that starts late, a peer that restarts, garbage that must be shut
//! out without disturbing anyone else, and the coalescing of many messages into few writes.
//!
//! Every wait is bounded (`WAIT`), so a lost message fails the test instead of hanging it.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hayate_cluster::message::handshake::{Hello, HelloReply, HELLO_REPLY_BYTES};
use hayate_cluster::message::{self, Lane, Message, VERSION};
use hayate_cluster::node::HostId;
use hayate_cluster::replica::{Mutation, MutationKind};
use hayate_cluster::transport::{Inbox, TcpConfig, TcpTransport, Transport};
use hayate_storage::{Cell, Row};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::mpsc;
use tokio::time::timeout;

/// The longest any single expectation may take; far beyond what it needs on a loaded machine.
const WAIT: Duration = Duration::from_secs(20);
const CLUSTER: &str = "transport test";
/// Ports are drawn from here; a draw that collides with something else is retried.
const PORTS: std::ops::Range<u16> = 20_000..60_000;
const PORT_ATTEMPTS_MAX: usize = 20;

fn host(n: u8) -> HostId {
    HostId([n; 16])
}

fn address(n: u8, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n)), port)
}

type Received = mpsc::UnboundedReceiver<(HostId, Message)>;

struct Node {
    n: u8,
    transport: TcpTransport,
    received: Received,
}

impl Node {
    fn host(&self) -> HostId {
        host(self.n)
    }

    fn address(&self) -> SocketAddr {
        self.transport.local_addr()
    }

    /// Waits for exactly the next `count` messages.
    async fn receive(&mut self, count: usize) -> Vec<(HostId, Message)> {
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            match timeout(WAIT, self.received.recv()).await {
                Ok(Some(m)) => out.push(m),
                _ => panic!(
                    "node {} received {} of {count} messages before the wait ran out; stats: {:?}",
                    self.n,
                    out.len(),
                    self.transport.stats()
                ),
            }
        }
        out
    }

    /// Checks that nothing more arrives for a moment.
    async fn receive_nothing(&mut self) {
        if let Ok(Some((from, m))) = timeout(Duration::from_millis(200), self.received.recv()).await {
            panic!(
                "node {} received an unexpected {:?} from {from}",
                self.n,
                m.kind()
            );
        }
    }
}

/// Fast reconnects and a short handshake timeout, so the tests do not wait on defaults meant
/// for production.
fn config(n: u8, port: u16) -> TcpConfig {
    let mut c = TcpConfig::new(host(n), address(n, port), CLUSTER);
    c.reconnect_backoff_min_ms = 20;
    c.reconnect_backoff_max_ms = 200;
    c.handshake_timeout_ms = 500;
    c
}

async fn start(config: TcpConfig) -> io::Result<Node> {
    let n = config.local.0[0];
    let (tx, received) = mpsc::unbounded_channel();
    let inbox: Arc<dyn Inbox> = Arc::new(move |from: HostId, m: Message| {
        let _ = tx.send((from, m));
    });
    let transport = TcpTransport::start(config, inbox).await?;
    Ok(Node {
        n,
        transport,
        received,
    })
}

/// Starts nodes 1..=count on 127.0.0.n, all on one port, each knowing every other.
async fn start_cluster(count: u8) -> Vec<Node> {
    for _ in 0..PORT_ATTEMPTS_MAX {
        let port = rand::random_range(PORTS);
        let mut nodes = Vec::new();
        for n in 1..=count {
            match start(config(n, port)).await {
                Ok(node) => nodes.push(node),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => break,
                Err(e) => panic!("cannot bind 127.0.0.{n}:{port}: {e}"),
            }
        }
        if nodes.len() == count as usize {
            for a in &nodes {
                assert_eq!(a.address().port(), port);
                for b in &nodes {
                    if a.n != b.n {
                        a.transport.set_peer(b.host(), b.address());
                    }
                }
            }
            return nodes;
        }
        for node in nodes {
            node.transport.shutdown().await;
        }
    }
    panic!("no free port in {PORTS:?} after {PORT_ATTEMPTS_MAX} attempts");
}

/// An id that says who sent it on which lane, and its place in that stream.
fn id(from: u8, lane: Lane, seq: u64) -> u64 {
    (u64::from(lane.tag()) << 48) | (u64::from(from) << 40) | seq
}

fn lane_of(id: u64) -> u8 {
    (id >> 48) as u8
}

fn seq_of(id: u64) -> u64 {
    id & ((1 << 40) - 1)
}

fn big_mutation(id: u64, bytes: usize) -> Message {
    Message::MutationRequest {
        id,
        mutations: vec![Mutation {
            table: 1,
            token: 42,
            partition: b"big".to_vec(),
            kind: MutationKind::Row {
                clustering: Vec::new(),
                update: Row {
                    cells: vec![Cell::live(1, 1_700_000_000_000_000, vec![0x5a; bytes])],
                    ..Row::default()
                },
            },
        }]
        .into(),
    }
}

#[tokio::test]
async fn three_nodes_on_one_port_exchange_messages_in_order_per_lane() {
    let mut nodes = start_cluster(3).await;
    const PER_LANE: u64 = 2_000;
    for node in &nodes {
        for other in 1..=3u8 {
            if other == node.n {
                continue;
            }
            for seq in 0..PER_LANE {
                for lane in Lane::ALL {
                    let m = Message::Ping {
                        id: id(node.n, lane, seq),
                    };
                    node.transport.send(host(other), lane, m);
                }
            }
        }
        // A 17 MiB mutation on the bulk lane, in the middle of its stream.
        node.transport.send(
            host(node.n % 3 + 1),
            Lane::Bulk,
            big_mutation(id(node.n, Lane::Bulk, PER_LANE), 17 << 20),
        );
    }
    for node in &mut nodes {
        let expected = 2 * 2 * PER_LANE as usize + 1;
        let received = node.receive(expected).await;
        let mut next = std::collections::HashMap::new();
        let mut big = 0;
        for (from, m) in received {
            let n = from.0[0];
            assert_eq!(from, host(n));
            let mid = m.id();
            assert_eq!(
                ((mid >> 40) & 0xff) as u8,
                n,
                "the sender's host id is the one in its handshake"
            );
            let expect = next.entry((n, lane_of(mid))).or_insert(0u64);
            assert_eq!(
                seq_of(mid),
                *expect,
                "from node {n} on lane {}: out of order",
                lane_of(mid)
            );
            *expect += 1;
            if let Message::MutationRequest { .. } = m {
                assert_eq!(m, big_mutation(mid, 17 << 20), "the large mutation arrives whole");
                big += 1;
            }
        }
        assert_eq!(big, 1);
        node.receive_nothing().await;
    }
    for node in &nodes {
        let stats = node.transport.stats();
        assert_eq!(stats.messages_sent, 2 * 2 * PER_LANE + 1, "{stats:?}");
        assert_eq!(stats.messages_received, 2 * 2 * PER_LANE + 1, "{stats:?}");
        assert_eq!(stats.messages_dropped(), 0, "{stats:?}");
        assert_eq!(stats.connects, 4, "one connection per peer and lane: {stats:?}");
        assert_eq!(stats.connections_outbound, 4);
        assert_eq!(stats.connections_inbound, 4);
        assert_eq!(stats.peers.len(), 2);
        for peer in stats.peers.values() {
            assert!(peer.messages_sent >= 2 * PER_LANE && peer.messages_received >= 2 * PER_LANE);
            assert_eq!(peer.messages_queued, 0);
        }
    }
    for node in nodes {
        node.transport.shutdown().await;
    }
}

/// 10,000 small messages sent at once travel in a handful of writes, not one each.
#[tokio::test]
async fn messages_sent_together_are_coalesced_into_few_writes() {
    let mut nodes = start_cluster(2).await;
    const MESSAGES: u64 = 10_000;
    for seq in 0..MESSAGES {
        nodes[0]
            .transport
            .send(host(2), Lane::Requests, Message::Ping { id: seq });
    }
    let received = nodes[1].receive(MESSAGES as usize).await;
    assert!(received.iter().map(|(_, m)| m.id()).eq(0..MESSAGES));
    let stats = nodes[0].transport.stats();
    assert_eq!(stats.messages_sent, MESSAGES);
    assert!(
        stats.batches_written * 100 <= stats.messages_sent,
        "{} writes for {} messages",
        stats.batches_written,
        stats.messages_sent
    );
    assert_eq!(stats.bytes_sent, MESSAGES * message::FRAME_HEADER_BYTES as u64);
    for node in nodes {
        node.transport.shutdown().await;
    }
}

#[tokio::test]
async fn messages_for_a_peer_that_starts_late_wait_and_then_arrive() {
    let mut nodes = start_cluster(1).await;
    let a = nodes.remove(0);
    let port = a.address().port();
    // Node 2 is not running yet: its connection is refused and retried with backoff.
    a.transport.set_peer(host(2), address(2, port));
    for seq in 0..100 {
        a.transport
            .send(host(2), Lane::Requests, Message::Ping { id: seq });
    }
    a.transport.send(host(2), Lane::Bulk, Message::Pong { id: 100 });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stats = a.transport.stats();
    assert!(stats.connect_failures >= 1, "{stats:?}");
    assert_eq!(stats.peers[&host(2)].messages_queued, 101);

    let mut b = match start(config(2, port)).await {
        Ok(b) => b,
        // Someone else took 127.0.0.2 on this port meanwhile; nothing to test then.
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => return,
        Err(e) => panic!("cannot bind: {e}"),
    };
    let received = b.receive(101).await;
    let mut ids: Vec<u64> = received.iter().map(|(_, m)| m.id()).collect();
    // The two lanes are independent; within the requests lane, order holds.
    let bulk = ids.iter().position(|&i| i == 100).expect("the bulk message");
    ids.remove(bulk);
    assert!(ids.into_iter().eq(0..100));
    assert!(received.iter().all(|(from, _)| *from == host(1)));
    a.transport.shutdown().await;
    b.transport.shutdown().await;
}

#[tokio::test]
async fn a_restarted_peer_is_reconnected_and_gets_what_was_queued_meanwhile() {
    let mut nodes = start_cluster(2).await;
    let mut b = nodes.pop().expect("node 2");
    let a = nodes.pop().expect("node 1");
    a.transport.send(host(2), Lane::Requests, Message::Ping { id: 1 });
    assert_eq!(b.receive(1).await[0].1, Message::Ping { id: 1 });

    // Node 2 goes away. Node 1's writer sees the connection close while idle.
    b.transport.shutdown().await;
    timeout(WAIT, async {
        while a.transport.stats().connections_outbound > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("node 1 notices that node 2 closed its connection");
    for id in 2..=50 {
        a.transport.send(host(2), Lane::Requests, Message::Ping { id });
    }
    tokio::time::sleep(Duration::from_millis(100)).await;

    let port = b.address().port();
    let mut b = start(config(2, port))
        .await
        .expect("node 2 rebinds its address at once");
    let received = b.receive(49).await;
    assert!(received.iter().map(|(_, m)| m.id()).eq(2..=50));
    a.transport
        .send(host(2), Lane::Requests, Message::Ping { id: 51 });
    assert_eq!(b.receive(1).await[0].1, Message::Ping { id: 51 });
    let stats = a.transport.stats();
    assert!(stats.reconnects >= 1, "{stats:?}");
    assert_eq!(stats.messages_dropped(), 0, "{stats:?}");
    a.transport.shutdown().await;
    b.transport.shutdown().await;
}

/// Opens a raw connection to `to` from another loopback address and sends `bytes`; returns
/// whatever the node answers before it closes the connection.
async fn raw_exchange(to: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 9)), 0))
        .expect("bind 127.0.0.9");
    let mut stream: TcpStream = socket.connect(to).await.expect("connect");
    stream.write_all(bytes).await.expect("write");
    let mut answer = Vec::new();
    match timeout(WAIT, stream.read_to_end(&mut answer)).await {
        Ok(Ok(_)) => {}
        // A reset (the node closed with our bytes unread) is a close too.
        Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionReset => {}
        Ok(Err(e)) => panic!("raw connection failed: {e}"),
        Err(_) => panic!("the node kept a garbage connection open"),
    }
    answer
}

fn hello(cluster: &str) -> Vec<u8> {
    let mut out = Vec::new();
    Hello {
        max_version: VERSION,
        lane: Lane::Requests,
        sender: host(9),
        cluster_name: cluster.to_owned(),
    }
    .encode(&mut out);
    out
}

fn accepted() -> [u8; HELLO_REPLY_BYTES] {
    HelloReply { version: VERSION }.encode()
}

#[tokio::test]
async fn garbage_connections_are_closed_while_the_others_keep_working() {
    let mut nodes = start_cluster(2).await;
    let to = nodes[1].address();
    nodes[0]
        .transport
        .send(host(2), Lane::Requests, Message::Ping { id: 1 });
    nodes[1].receive(1).await;

    // Random bytes: no magic, no answer, closed.
    let junk: Vec<u8> = (0..200).map(|_| rand::random()).collect();
    assert_eq!(raw_exchange(to, &junk).await, b"");
    // The magic, then a lane that does not exist.
    let mut bad_lane = hello(CLUSTER);
    bad_lane[5] = 7;
    assert_eq!(raw_exchange(to, &bad_lane).await, b"");
    // Another cluster: refused with a reply that says so.
    assert_eq!(
        raw_exchange(to, &hello("another cluster")).await,
        HelloReply::REFUSED.encode()
    );
    // Silence after connecting: closed when the handshake timeout runs out.
    assert_eq!(raw_exchange(to, b"").await, b"");
    // A good handshake and frame, then a frame whose checksum is wrong: the first is
    // delivered, the connection closed at the second.
    let mut stream = hello(CLUSTER);
    message::encode(&Message::Ping { id: 777 }, VERSION, &mut stream).expect("encodes");
    let corrupt_at = stream.len();
    message::encode(
        &Message::MetadataRequest {
            id: 778,
            payload: vec![1; 100],
        },
        VERSION,
        &mut stream,
    )
    .expect("encodes");
    stream[corrupt_at + 50] ^= 0x01;
    message::encode(&Message::Ping { id: 779 }, VERSION, &mut stream).expect("encodes");
    assert_eq!(raw_exchange(to, &stream).await, accepted());
    let got = nodes[1].receive(1).await;
    assert_eq!(got, vec![(host(9), Message::Ping { id: 777 })]);
    // A length beyond any frame: refused from its first four bytes.
    let mut huge = hello(CLUSTER);
    huge.extend_from_slice(&u32::MAX.to_be_bytes());
    huge.extend_from_slice(&[0; 64]);
    assert_eq!(raw_exchange(to, &huge).await, accepted());
    nodes[1].receive_nothing().await;

    let stats = nodes[1].transport.stats();
    assert_eq!(stats.handshakes_refused, 4, "{stats:?}");
    assert_eq!(stats.frames_rejected, 2, "{stats:?}");

    // Both ways still work.
    nodes[0]
        .transport
        .send(host(2), Lane::Requests, Message::Ping { id: 2 });
    nodes[1]
        .transport
        .send(host(1), Lane::Requests, Message::Pong { id: 2 });
    assert_eq!(
        nodes[1].receive(1).await,
        vec![(host(1), Message::Ping { id: 2 })]
    );
    assert_eq!(
        nodes[0].receive(1).await,
        vec![(host(2), Message::Pong { id: 2 })]
    );
    for node in nodes {
        node.transport.shutdown().await;
    }
}

#[tokio::test]
async fn two_clusters_on_one_machine_do_not_talk() {
    let mut nodes = start_cluster(1).await;
    let a = nodes.remove(0);
    let port = a.address().port();
    let mut other = config(2, port);
    other.cluster_name = "another cluster".to_owned();
    let Ok(mut b) = start(other).await else {
        return; // 127.0.0.2 on this port is taken; nothing to test.
    };
    a.transport.set_peer(host(2), b.address());
    b.transport.set_peer(host(1), a.address());
    a.transport.send(host(2), Lane::Requests, Message::Ping { id: 1 });
    b.transport.send(host(1), Lane::Requests, Message::Ping { id: 2 });
    timeout(WAIT, async {
        while a.transport.stats().handshakes_refused == 0 || b.transport.stats().handshakes_refused == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("both refuse the other");
    b.receive_nothing().await;
    let stats = a.transport.stats();
    assert!(stats.connect_failures >= 1 && stats.connects == 0, "{stats:?}");
    a.transport.shutdown().await;
    b.transport.shutdown().await;
}

#[tokio::test]
async fn messages_for_unknown_or_removed_peers_are_dropped_and_counted() {
    let mut nodes = start_cluster(1).await;
    let a = nodes.remove(0);
    a.transport.send(host(5), Lane::Requests, Message::Ping { id: 1 });
    assert_eq!(a.transport.stats().dropped_unknown_peer, 1);

    // A peer nobody listens for: its messages wait, then go when it is removed.
    a.transport.set_peer(host(6), address(6, a.address().port()));
    for id in 0..10 {
        a.transport.send(host(6), Lane::Bulk, Message::Ping { id });
    }
    a.transport.remove_peer(host(6));
    a.transport.send(host(6), Lane::Bulk, Message::Ping { id: 11 });
    let stats = a.transport.stats();
    assert_eq!(stats.dropped_peer_removed, 10, "{stats:?}");
    assert_eq!(stats.dropped_unknown_peer, 2, "{stats:?}");
    assert!(stats.peers.is_empty());
    a.transport.shutdown().await;
}

#[tokio::test]
async fn a_full_queue_drops_what_does_not_fit() {
    let port = rand::random_range(PORTS);
    let mut c = config(1, port);
    c.queue_messages_max = 10;
    let Ok(a) = start(c).await else {
        return;
    };
    // Nobody listens at node 7's address, so nothing leaves the queue.
    a.transport.set_peer(host(7), address(7, port));
    for id in 0..15 {
        a.transport.send(host(7), Lane::Requests, Message::Ping { id });
    }
    let stats = a.transport.stats();
    assert_eq!(stats.dropped_queue_full, 5, "{stats:?}");
    assert_eq!(stats.peers[&host(7)].messages_queued, 10);
    assert_eq!(stats.peers[&host(7)].messages_dropped, 5);
    a.transport.shutdown().await;
}
