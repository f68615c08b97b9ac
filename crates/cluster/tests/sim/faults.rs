//! Faults, and the hint replays that follow them: partitions, a node that stops and comes
//! back, failure detectors that are late or wrong, a network that changes its losses and
//! delays, clocks that jump.

use std::rc::Rc;
use std::time::Duration;

use hayate_cluster::coordinator::Liveness;
use rand::Rng;
use tokio::time::sleep;

use super::cluster::host;
use super::{pick, Sim};

#[derive(Clone, Copy, Debug)]
enum Fault {
    Partition,
    Heal,
    Stop,
    Restart,
    Suspect,
    Network,
    Skew,
}

/// Has `observer`'s failure detector catch up with the truth about `target` after `delay`.
fn refresh_later(sim: &Rc<Sim>, observer: usize, target: usize, delay: Duration) {
    let sim = sim.clone();
    tokio::task::spawn_local(async move {
        sleep(delay).await;
        if sim.done.get() {
            return;
        }
        let alive = sim.reachable(observer, target);
        let liveness = &sim.cluster.nodes[observer].liveness;
        if liveness.is_alive(host(target)) != alive {
            liveness.set(host(target), alive);
            sim.log(format!(
                "n{observer} now sees n{target} {}",
                if alive { "up" } else { "down" }
            ));
            if alive {
                start_replay(&sim, observer, target);
            } else {
                // What a node does when gossip convicts a peer: its requests there fail now.
                sim.cluster.nodes[observer]
                    .messaging
                    .fail_requests_to(host(target));
            }
        }
    });
}

fn random_delay(sim: &Sim, min_ms: u64, max_ms: u64) -> Duration {
    Duration::from_millis(sim.rng().random_range(min_ms..=max_ms))
}

pub(super) async fn nemesis(sim: Rc<Sim>) {
    let n = sim.n();
    while !sim.done.get() && !sim.failed() {
        let pause = random_delay(&sim, 200, 2000);
        sleep(pause).await;
        if sim.done.get() {
            return;
        }
        let fault = pick(
            &mut sim.rng(),
            &[
                (Fault::Partition, 3),
                (Fault::Heal, 4),
                (Fault::Stop, 2),
                (Fault::Restart, 3),
                (Fault::Suspect, 2),
                (Fault::Network, 2),
                (Fault::Skew, 1),
            ],
        );
        // Faults hit the nodes in the ring or joining it, but not one a topology driver killed
        // and will restart.
        let active: Vec<usize> = sim
            .active()
            .into_iter()
            .filter(|i| !sim.held_down.borrow().contains(i))
            .collect();
        if active.len() < 2 {
            continue;
        }
        let (a, b) = {
            let mut rng = sim.rng();
            let a = rng.random_range(0..active.len());
            let b = (a + rng.random_range(1..active.len())) % active.len();
            (active[a], active[b])
        };
        let network = &sim.cluster.network;
        match fault {
            Fault::Partition => {
                if sim.partitions.borrow().len() >= 2 {
                    continue;
                }
                network.partition(host(a), host(b));
                sim.partitions.borrow_mut().insert((a.min(b), a.max(b)));
                sim.log(format!("fault: partition n{a} | n{b}"));
                // Sometimes the failure detectors notice, sometimes not.
                if sim.rng().random_bool(0.5) {
                    let (d1, d2) = (random_delay(&sim, 300, 3000), random_delay(&sim, 300, 3000));
                    refresh_later(&sim, a, b, d1);
                    refresh_later(&sim, b, a, d2);
                }
            }
            Fault::Heal => {
                let Some(&(x, y)) = sim.partitions.borrow().iter().next() else {
                    continue;
                };
                network.heal(host(x), host(y));
                sim.partitions.borrow_mut().remove(&(x, y));
                sim.log(format!("fault: heal n{x} | n{y}"));
                let (d1, d2) = (random_delay(&sim, 100, 2000), random_delay(&sim, 100, 2000));
                refresh_later(&sim, x, y, d1);
                refresh_later(&sim, y, x, d2);
            }
            Fault::Stop => {
                if active.iter().any(|&i| sim.stopped.borrow()[i]) {
                    continue;
                }
                network.isolate(host(a));
                sim.cluster.log.set_cut(a, true);
                sim.stopped.borrow_mut()[a] = true;
                sim.log(format!("fault: stop n{a}"));
                for o in (0..n).filter(|&o| o != a) {
                    let (d1, d2) = (random_delay(&sim, 300, 4000), random_delay(&sim, 300, 4000));
                    refresh_later(&sim, o, a, d1);
                    refresh_later(&sim, a, o, d2);
                }
            }
            Fault::Restart => {
                let Some(x) = active.iter().copied().find(|&i| sim.stopped.borrow()[i]) else {
                    continue;
                };
                network.rejoin(host(x));
                sim.cluster.log.set_cut(x, false);
                sim.stopped.borrow_mut()[x] = false;
                sim.log(format!("fault: restart n{x}"));
                for o in (0..n).filter(|&o| o != x) {
                    let (d1, d2) = (random_delay(&sim, 100, 3000), random_delay(&sim, 100, 3000));
                    refresh_later(&sim, o, x, d1);
                    refresh_later(&sim, x, o, d2);
                }
            }
            Fault::Suspect => {
                // A failure detector that is wrong for a while.
                sim.cluster.nodes[a].convict(host(b));
                sim.log(format!("fault: n{a} wrongly suspects n{b}"));
                let d = random_delay(&sim, 500, 5000);
                refresh_later(&sim, a, b, d);
            }
            Fault::Network => {
                let (drop, delay_ms, dup, ordered) = {
                    let mut rng = sim.rng();
                    (
                        pick(&mut rng, &[(0.0, 2), (0.01, 2), (0.05, 1), (0.1, 1), (0.3, 1)]),
                        pick(&mut rng, &[(0, 1), (5, 2), (20, 2), (50, 2), (200, 1)]),
                        pick(&mut rng, &[(0.0, 2), (0.02, 1), (0.05, 1)]),
                        rng.random_bool(0.3),
                    )
                };
                network.set_drop_probability(drop);
                network.set_delay_ms(0, delay_ms);
                network.set_duplicate_probability(dup);
                network.set_ordered(ordered);
                sim.log(format!(
                    "fault: network drop {drop}, delay 0..={delay_ms} ms, duplicates {dup}, ordered {ordered}"
                ));
            }
            Fault::Skew => {
                if sim.skew_max_us == 0 {
                    continue;
                }
                let skew = sim.rng().random_range(-sim.skew_max_us..=sim.skew_max_us);
                sim.skew_us.borrow_mut()[a] = skew;
                sim.sync_clocks();
                sim.log(format!("fault: n{a}'s clock skew is now {skew} us"));
            }
        }
        sim.counts.borrow_mut().faults += 1;
    }
}

/// Replays `node`'s hints for `target` unless a replay of them is under way.
fn start_replay(sim: &Rc<Sim>, node: usize, target: usize) {
    if sim.done.get() || sim.stopped.borrow()[node] || !sim.replaying.borrow_mut().insert((node, target)) {
        return;
    }
    let sim = sim.clone();
    tokio::task::spawn_local(async move {
        let delivered = sim.cluster.nodes[node]
            .coordinator
            .replay_hints(host(target))
            .await;
        if delivered > 0 {
            sim.log(format!("n{node} replayed {delivered} hints to n{target}"));
        }
        sim.replaying.borrow_mut().remove(&(node, target));
    });
}

/// Cassandra's hint dispatch: now and then, each node replays its hints for nodes it sees up.
pub(super) async fn dispatch_hints(sim: Rc<Sim>, node: usize) {
    while !sim.done.get() && !sim.failed() {
        let pause = random_delay(&sim, 1000, 3000);
        sleep(pause).await;
        let n = &sim.cluster.nodes[node];
        for target in n.coordinator.hinted_targets() {
            let gone = sim.roles.borrow()[sim.cluster.index_of(target)] == super::Role::Gone;
            if n.liveness.is_alive(target) && !gone {
                start_replay(&sim, node, sim.cluster.index_of(target));
            }
        }
    }
}
