//! An in-process network for deterministic tests: every node's [`SimTransport`] hands messages
//! to one [`SimNetwork`], which drops, delays, duplicates and partitions them as the test says,
//! with every random choice drawn from a seeded generator of the message's channel (from, to,
//! lane).
//!
//! Delivery runs on tokio's clock: each message gets a delivery instant, and one scheduler
//! task delivers them in order of (instant, channel, place on the channel) with `sleep_until`.
//! On a current-thread runtime with paused time (`#[tokio::test(start_paused = true)]`) the
//! clock jumps straight to the next delivery, so a test replays exactly, to the microsecond,
//! from the same seed: print the seed when a test fails and run it again.
//!
//! The draws are per channel, not from one generator in send order, because tasks that wake
//! at the same instant may run in either order: tokio spreads a `watch` channel's waiters over
//! shards it picks at random, so two nodes that see a new ring at once may send first in
//! either order. With a generator per channel, what each channel's n-th message meets does
//! not depend on which node sent first.
//!
//! Messages are not copied through any encoding: the simulation tests what the coordinator does
//! with messages, and `message`'s own tests cover the bytes.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{Inbox, Lane, Transport};
use crate::message::Message;
use crate::node::HostId;

/// What the simulated network did with the messages sent on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SimStats {
    pub sent: u64,
    pub delivered: u64,
    /// Cut by a partition or an isolated node, when sent or when due.
    pub dropped_partition: u64,
    /// Lost by the drop probability.
    pub dropped_random: u64,
    /// Sent to (or due at) a host that has not joined or has left.
    pub dropped_unknown: u64,
    /// Extra copies made by the duplicate probability (each also counts as delivered or
    /// dropped when it is due).
    pub duplicated: u64,
}

impl SimStats {
    pub fn dropped(&self) -> u64 {
        self.dropped_partition + self.dropped_random + self.dropped_unknown
    }
}

/// The simulated network. Cloning gives another handle to the same network.
#[derive(Clone)]
pub struct SimNetwork {
    shared: Arc<Shared>,
}

/// One node's transport on a [`SimNetwork`].
pub struct SimTransport {
    host: HostId,
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the scheduler when a message is due earlier than it planned to sleep.
    wake: Arc<Notify>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Lets the scheduler notice that nobody can send any more, and end.
        self.wake.notify_one();
    }
}

struct State {
    seed: u64,
    /// Each channel's generator and how many messages it has carried.
    channels: HashMap<Channel, (StdRng, u64)>,
    inboxes: HashMap<HostId, Arc<dyn Inbox>>,
    /// Ordered pairs (from, to) that cannot talk; a partition inserts both directions.
    cut: HashSet<(HostId, HostId)>,
    isolated: HashSet<HostId>,
    drop_probability: f64,
    duplicate_probability: f64,
    delay_ms_min: u64,
    delay_ms_max: u64,
    ordered: bool,
    /// In ordered mode, the latest delivery instant given per channel.
    last_due: HashMap<(HostId, HostId, Lane), Instant>,
    queue: BinaryHeap<Reverse<Pending>>,
    stats: SimStats,
}

/// Messages from one node to another on one lane.
type Channel = (HostId, HostId, Lane);

struct Pending {
    due: Instant,
    channel: Channel,
    /// The message's place on its channel (a duplicate shares it, one higher): with the
    /// channel, it breaks ties between messages due at the same instant.
    seq: u64,
    message: Message,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Pending) -> bool {
        (self.due, self.channel, self.seq) == (other.due, other.channel, other.seq)
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Pending) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    fn cmp(&self, other: &Pending) -> std::cmp::Ordering {
        (self.due, self.channel, self.seq).cmp(&(other.due, other.channel, other.seq))
    }
}

impl State {
    fn reachable(&self, from: HostId, to: HostId) -> bool {
        !self.cut.contains(&(from, to)) && !self.isolated.contains(&from) && !self.isolated.contains(&to)
    }

    fn send(&mut self, from: HostId, to: HostId, lane: Lane, message: Message) {
        self.stats.sent += 1;
        if !self.inboxes.contains_key(&to) || !self.inboxes.contains_key(&from) {
            self.stats.dropped_unknown += 1;
            return;
        }
        if !self.reachable(from, to) {
            self.stats.dropped_partition += 1;
            return;
        }
        let channel = (from, to, lane);
        let seed = self.seed;
        let (rng, count) = self
            .channels
            .entry(channel)
            .or_insert_with(|| (StdRng::seed_from_u64(channel_seed(seed, channel)), 0));
        let seq = *count * 2;
        *count += 1;
        if self.drop_probability > 0.0 && rng.random_bool(self.drop_probability) {
            self.stats.dropped_random += 1;
            return;
        }
        let duplicate = self.duplicate_probability > 0.0 && rng.random_bool(self.duplicate_probability);
        let delays = [
            rng.random_range(self.delay_ms_min..=self.delay_ms_max),
            rng.random_range(self.delay_ms_min..=self.delay_ms_max),
        ];
        if duplicate {
            self.stats.duplicated += 1;
            let copy = message.clone();
            self.schedule(channel, seq + 1, delays[1], copy);
        }
        self.schedule(channel, seq, delays[0], message);
    }

    fn schedule(&mut self, channel: Channel, seq: u64, delay_ms: u64, message: Message) {
        let mut due = Instant::now() + Duration::from_millis(delay_ms);
        if self.ordered {
            let last = self.last_due.entry(channel).or_insert(due);
            due = due.max(*last);
            *last = due;
        }
        self.queue.push(Reverse(Pending {
            due,
            channel,
            seq,
            message,
        }));
    }
}

/// The seed of a channel's generator: the network's seed mixed with the channel (FNV-1a over
/// its bytes, then SplitMix64's finaliser, so near channels get unrelated seeds).
fn channel_seed(seed: u64, (from, to, lane): Channel) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in from.0.iter().chain(&to.0).chain(&[lane.tag()]) {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

impl SimNetwork {
    /// A network with no faults and no delay. Call within a tokio runtime: its scheduler task
    /// runs there.
    pub fn new(seed: u64) -> SimNetwork {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                seed,
                channels: HashMap::new(),
                inboxes: HashMap::new(),
                cut: HashSet::new(),
                isolated: HashSet::new(),
                drop_probability: 0.0,
                duplicate_probability: 0.0,
                delay_ms_min: 0,
                delay_ms_max: 0,
                ordered: false,
                last_due: HashMap::new(),
                queue: BinaryHeap::new(),
                stats: SimStats::default(),
            }),
            wake: Arc::new(Notify::new()),
        });
        tokio::spawn(run_scheduler(Arc::downgrade(&shared), shared.wake.clone()));
        SimNetwork { shared }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().expect("sim network lock poisoned")
    }

    pub fn seed(&self) -> u64 {
        self.state().seed
    }

    /// Connects `host` to the network (or gives a restarted node its new inbox) and returns
    /// its transport.
    pub fn join(&self, host: HostId, inbox: Arc<dyn Inbox>) -> Arc<SimTransport> {
        self.state().inboxes.insert(host, inbox);
        Arc::new(SimTransport {
            host,
            shared: self.shared.clone(),
        })
    }

    /// Takes `host` off the network, as a node that stopped: messages to it are dropped.
    pub fn leave(&self, host: HostId) {
        self.state().inboxes.remove(&host);
    }

    /// Cuts both directions between `a` and `b`, including messages already in flight.
    pub fn partition(&self, a: HostId, b: HostId) {
        let mut s = self.state();
        s.cut.insert((a, b));
        s.cut.insert((b, a));
    }

    pub fn heal(&self, a: HostId, b: HostId) {
        let mut s = self.state();
        s.cut.remove(&(a, b));
        s.cut.remove(&(b, a));
    }

    /// Ends every partition and isolation.
    pub fn heal_all(&self) {
        let mut s = self.state();
        s.cut.clear();
        s.isolated.clear();
    }

    /// Cuts `host` from every other node (and itself).
    pub fn isolate(&self, host: HostId) {
        self.state().isolated.insert(host);
    }

    pub fn rejoin(&self, host: HostId) {
        self.state().isolated.remove(&host);
    }

    /// Each message is lost with probability `p`. Panics unless `0 <= p <= 1`.
    pub fn set_drop_probability(&self, p: f64) {
        assert!((0.0..=1.0).contains(&p), "drop probability {p} is not in [0, 1]");
        self.state().drop_probability = p;
    }

    /// Each message is delivered twice with probability `p` (each copy with its own delay).
    /// Panics unless `0 <= p <= 1`.
    pub fn set_duplicate_probability(&self, p: f64) {
        assert!(
            (0.0..=1.0).contains(&p),
            "duplicate probability {p} is not in [0, 1]"
        );
        self.state().duplicate_probability = p;
    }

    /// Each message is delivered after a delay drawn uniformly from `min_ms..=max_ms`. Unless
    /// [`SimNetwork::set_ordered`], different delays reorder messages.
    pub fn set_delay_ms(&self, min_ms: u64, max_ms: u64) {
        assert!(min_ms <= max_ms, "delay range {min_ms}..={max_ms} ms is empty");
        let mut s = self.state();
        s.delay_ms_min = min_ms;
        s.delay_ms_max = max_ms;
    }

    /// Keeps order per (from, to, lane) as the TCP transport does: a message is never due
    /// before one sent earlier on its channel.
    pub fn set_ordered(&self, ordered: bool) {
        self.state().ordered = ordered;
    }

    pub fn stats(&self) -> SimStats {
        self.state().stats
    }

    /// Messages sent but not yet delivered or dropped.
    pub fn in_flight(&self) -> usize {
        self.state().queue.len()
    }
}

impl SimTransport {
    pub fn host(&self) -> HostId {
        self.host
    }
}

impl Transport for SimTransport {
    fn send(&self, to: HostId, lane: Lane, message: Message) {
        let mut s = self.shared.state.lock().expect("sim network lock poisoned");
        s.send(self.host, to, lane, message);
        drop(s);
        self.shared.wake.notify_one();
    }
}

/// Delivers messages as they fall due, until every handle to the network is gone.
async fn run_scheduler(network: Weak<Shared>, wake: Arc<Notify>) {
    let mut due = Vec::new();
    loop {
        let next = {
            let Some(shared) = network.upgrade() else {
                return;
            };
            let mut s = shared.state.lock().expect("sim network lock poisoned");
            let now = Instant::now();
            while s.queue.peek().is_some_and(|p| p.0.due <= now) {
                let Some(Reverse(p)) = s.queue.pop() else {
                    break;
                };
                // A partition that began while the message was on its way still cuts it.
                let (from, to, _) = p.channel;
                match s.inboxes.get(&to).cloned() {
                    None => s.stats.dropped_unknown += 1,
                    Some(_) if !s.reachable(from, to) => s.stats.dropped_partition += 1,
                    Some(inbox) => {
                        s.stats.delivered += 1;
                        due.push((inbox, from, p.message));
                    }
                }
            }
            s.queue.peek().map(|p| p.0.due)
        };
        if !due.is_empty() {
            // Outside the lock: an inbox may send at once.
            for (inbox, from, message) in due.drain(..) {
                inbox.deliver(from, message);
            }
            continue;
        }
        match next {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(n: u8) -> HostId {
        HostId([n; 16])
    }

    /// What an inbox saw: (milliseconds since the start, from, to, request id).
    type Trace = Arc<Mutex<Vec<(u64, HostId, HostId, u64)>>>;

    fn recorder(trace: &Trace, me: HostId, start: Instant) -> Arc<dyn Inbox> {
        let trace = trace.clone();
        Arc::new(move |from: HostId, message: Message| {
            let at_ms = Instant::now().duration_since(start).as_millis() as u64;
            trace
                .lock()
                .expect("trace lock")
                .push((at_ms, from, me, message.id()));
        })
    }

    /// Three nodes send to each other under random delays, drops and duplicates; returns
    /// everything delivered, in delivery order, with its time.
    fn run(seed: u64, ordered: bool) -> (Vec<(u64, HostId, HostId, u64)>, SimStats) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let net = SimNetwork::new(seed);
            net.set_delay_ms(1, 50);
            net.set_drop_probability(0.1);
            net.set_duplicate_probability(0.05);
            net.set_ordered(ordered);
            let trace: Trace = Arc::default();
            let start = Instant::now();
            let nodes: Vec<Arc<SimTransport>> = (1..=3)
                .map(|n| net.join(host(n), recorder(&trace, host(n), start)))
                .collect();
            for round in 0..100u64 {
                for (i, node) in nodes.iter().enumerate() {
                    let to = host((i as u8 + 1) % 3 + 1);
                    node.send(to, Lane::Requests, Message::Ping { id: round });
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            while net.in_flight() > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let trace = trace.lock().expect("trace lock").clone();
            (trace, net.stats())
        })
    }

    #[test]
    fn the_same_seed_delivers_the_same_messages_at_the_same_times() {
        let (a, stats_a) = run(7, false);
        let (b, stats_b) = run(7, false);
        assert_eq!(a, b);
        assert_eq!(stats_a, stats_b);
        assert_eq!(stats_a.sent, 300);
        assert_eq!(
            stats_a.delivered + stats_a.dropped(),
            stats_a.sent + stats_a.duplicated,
            "every message and copy is accounted for: {stats_a:?}"
        );
        assert!(
            stats_a.dropped_random > 0 && stats_a.duplicated > 0,
            "{stats_a:?}"
        );
        let (c, _) = run(8, false);
        assert_ne!(a, c, "another seed, another run");
    }

    /// Random delays reorder a channel's messages unless the network is told to keep order.
    #[test]
    fn delays_reorder_unless_ordered() {
        let reordered = |trace: &[(u64, HostId, HostId, u64)]| {
            let mut last: HashMap<(HostId, HostId), u64> = HashMap::new();
            let mut out_of_order = 0;
            for &(_, from, to, id) in trace {
                if let Some(prev) = last.insert((from, to), id) {
                    // Duplicates may repeat an id; only a smaller one is out of order.
                    if id < prev {
                        out_of_order += 1;
                    }
                }
            }
            out_of_order
        };
        let (free, _) = run(11, false);
        assert!(reordered(&free) > 0);
        let (ordered, _) = run(11, true);
        assert_eq!(reordered(&ordered), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn partitions_cut_both_ways_until_healed() {
        let net = SimNetwork::new(1);
        let trace: Trace = Arc::default();
        let start = Instant::now();
        let [a, b, c] = [1, 2, 3].map(|n| net.join(host(n), recorder(&trace, host(n), start)));
        let settle = || async {
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let take = |trace: &Trace| -> Vec<(HostId, HostId, u64)> {
            let mut t = trace.lock().expect("trace lock");
            t.drain(..).map(|(_, from, to, id)| (from, to, id)).collect()
        };

        net.partition(host(1), host(2));
        a.send(host(2), Lane::Requests, Message::Ping { id: 1 });
        b.send(host(1), Lane::Bulk, Message::Ping { id: 2 });
        a.send(host(3), Lane::Requests, Message::Ping { id: 3 });
        settle().await;
        assert_eq!(take(&trace), vec![(host(1), host(3), 3)]);
        assert_eq!(net.stats().dropped_partition, 2);

        net.heal(host(1), host(2));
        a.send(host(2), Lane::Requests, Message::Ping { id: 4 });
        settle().await;
        assert_eq!(take(&trace), vec![(host(1), host(2), 4)]);

        net.isolate(host(3));
        c.send(host(1), Lane::Requests, Message::Ping { id: 5 });
        a.send(host(3), Lane::Requests, Message::Ping { id: 6 });
        b.send(host(1), Lane::Requests, Message::Ping { id: 7 });
        settle().await;
        assert_eq!(take(&trace), vec![(host(2), host(1), 7)]);
        net.rejoin(host(3));

        // A partition that begins while a message is on its way cuts it too.
        net.set_delay_ms(10, 10);
        a.send(host(2), Lane::Requests, Message::Ping { id: 8 });
        net.partition(host(2), host(1));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(take(&trace).is_empty());
        net.heal_all();
        a.send(host(2), Lane::Requests, Message::Ping { id: 9 });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(take(&trace), vec![(host(1), host(2), 9)]);

        // A node that left gets nothing; unknown hosts neither.
        net.leave(host(2));
        a.send(host(2), Lane::Requests, Message::Ping { id: 10 });
        a.send(host(9), Lane::Requests, Message::Ping { id: 11 });
        settle().await;
        assert!(take(&trace).is_empty());
        let stats = net.stats();
        assert_eq!(stats.dropped_unknown, 2);
        assert_eq!(stats.delivered, 4);
        assert_eq!(stats.sent, 11);
    }

    #[tokio::test(start_paused = true)]
    async fn a_delay_is_exactly_the_time_that_passes() {
        let net = SimNetwork::new(3);
        net.set_delay_ms(250, 250);
        let trace: Trace = Arc::default();
        let start = Instant::now();
        let a = net.join(host(1), recorder(&trace, host(1), start));
        let _b = net.join(host(2), recorder(&trace, host(2), start));
        a.send(host(2), Lane::Requests, Message::Ping { id: 1 });
        tokio::time::sleep(Duration::from_millis(249)).await;
        assert!(trace.lock().expect("trace lock").is_empty());
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(
            trace.lock().expect("trace lock").as_slice(),
            &[(250, host(1), host(2), 1)]
        );
    }
}
