//! YCSB's number generators (`site.ycsb.generator`), with the same arithmetic so that the same
//! workload file yields the same distributions of keys, field lengths and scan lengths.
//!
//! YCSB shares one generator among its threads and synchronizes it; here each worker owns a clone
//! and its own random source, and only the counters that must be global (the load sequence, the
//! acknowledged insert counter, the sequential chooser) are shared, lock-free on the read side.
//! Key numbers are Java `long`s (`i64`), as YCSB's are, so its corner cases stay its corner cases.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

use rand::Rng;

use super::keys::fnvhash64;

pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// `ScrambledZipfianGenerator.ITEM_COUNT` and its precomputed zeta for the constant 0.99.
pub const SCRAMBLED_ITEM_COUNT: i64 = 10_000_000_000;
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// `AcknowledgedCounterGenerator.WINDOW_SIZE`: at most this many inserts may be in flight
/// between the oldest unacknowledged one and the newest.
const ACK_WINDOW_SIZE: usize = 1 << 20;

/// YCSB's `ZipfianGenerator` (Gray et al., "Quickly Generating Billion-Record Synthetic
/// Databases", SIGMOD 1994), including its incremental zeta when the item count grows.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: i64,
    base: i64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: i64,
}

impl Zipfian {
    /// Values in `[min, max]` with the constant 0.99; computes zeta over all the items, which is
    /// linear in their number (YCSB does the same).
    pub fn new(min: i64, max: i64) -> Zipfian {
        Zipfian::with_zetan(
            min,
            max,
            ZIPFIAN_CONSTANT,
            zeta(0, max - min + 1, ZIPFIAN_CONSTANT, 0.0),
        )
    }

    pub fn with_zetan(min: i64, max: i64, constant: f64, zetan: f64) -> Zipfian {
        assert!(max >= min, "zipfian range [{min}, {max}] is empty");
        let items = max - min + 1;
        let theta = constant;
        let zeta2theta = zeta(0, 2, theta, 0.0);
        Zipfian {
            items,
            base: min,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: eta(items, theta, zeta2theta, zetan),
            count_for_zeta: items,
        }
    }

    pub fn next<R: Rng>(&mut self, rng: &mut R) -> i64 {
        self.next_long(rng, self.items)
    }

    /// A value among the first `item_count` items. A larger count than before extends zeta
    /// incrementally; a smaller one is ignored, as in YCSB (whose `eta` also keeps the original
    /// item count; kept, to draw the same distribution).
    pub fn next_long<R: Rng>(&mut self, rng: &mut R, item_count: i64) -> i64 {
        if item_count > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, item_count, self.theta, self.zetan);
            self.count_for_zeta = item_count;
            self.eta = eta(self.items, self.theta, self.zeta2theta, self.zetan);
        }
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        self.base + (item_count as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as i64
    }
}

fn eta(items: i64, theta: f64, zeta2theta: f64, zetan: f64) -> f64 {
    (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan)
}

/// `ZipfianGenerator.zetastatic(st, n, theta, initialsum)`.
pub fn zeta(start: i64, n: i64, theta: f64, initial_sum: f64) -> f64 {
    let mut sum = initial_sum;
    for i in start..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// `ScrambledZipfianGenerator`: zipfian popularity spread over the key space by FNV, so the
/// popular keys are not all neighbours.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    min: i64,
    item_count: i64,
    zipfian: Zipfian,
}

impl ScrambledZipfian {
    pub fn new(min: i64, max: i64) -> ScrambledZipfian {
        ScrambledZipfian {
            min,
            item_count: max - min + 1,
            zipfian: Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
        }
    }

    pub fn next<R: Rng>(&mut self, rng: &mut R) -> i64 {
        let v = self.zipfian.next(rng);
        self.min + fnvhash64(v) % self.item_count
    }
}

/// `HotspotIntegerGenerator`: `hot_opn_fraction` of the draws fall in the first
/// `hot_set_fraction` of `[lower, upper]`.
#[derive(Debug, Clone)]
pub struct Hotspot {
    lower: i64,
    hot_interval: i64,
    cold_interval: i64,
    hot_opn_fraction: f64,
}

impl Hotspot {
    pub fn new(lower: i64, upper: i64, hot_set_fraction: f64, hot_opn_fraction: f64) -> Hotspot {
        // YCSB replaces an out-of-range fraction by 0 and swaps reversed bounds.
        let hot_set_fraction = if (0.0..=1.0).contains(&hot_set_fraction) {
            hot_set_fraction
        } else {
            0.0
        };
        let hot_opn_fraction = if (0.0..=1.0).contains(&hot_opn_fraction) {
            hot_opn_fraction
        } else {
            0.0
        };
        let (lower, upper) = if lower > upper {
            (upper, lower)
        } else {
            (lower, upper)
        };
        let interval = upper - lower + 1;
        let hot_interval = (interval as f64 * hot_set_fraction) as i64;
        Hotspot {
            lower,
            hot_interval,
            cold_interval: interval - hot_interval,
            hot_opn_fraction,
        }
    }

    pub fn next<R: Rng>(&mut self, rng: &mut R) -> i64 {
        // An empty hot or cold set (YCSB divides by zero there) sends every draw to the other.
        let hot = rng.random::<f64>() < self.hot_opn_fraction;
        if (hot && self.hot_interval > 0) || self.cold_interval == 0 {
            self.lower + rng.random_range(0..self.hot_interval.max(1))
        } else {
            self.lower + self.hot_interval + rng.random_range(0..self.cold_interval)
        }
    }
}

/// `ExponentialGenerator(percentile, range)`: `percentile` % of the draws are below `range`.
#[derive(Debug, Clone)]
pub struct Exponential {
    gamma: f64,
}

impl Exponential {
    pub fn new(percentile: f64, range: f64) -> Exponential {
        Exponential {
            gamma: -(1.0 - percentile / 100.0).ln() / range,
        }
    }

    pub fn next<R: Rng>(&mut self, rng: &mut R) -> f64 {
        -rng.random::<f64>().ln() / self.gamma
    }
}

/// Uniform over `[lb, ub]`: `UniformLongGenerator`.
#[derive(Debug, Clone, Copy)]
pub struct UniformLong {
    lb: i64,
    interval: i64,
}

impl UniformLong {
    pub fn new(lb: i64, ub: i64) -> UniformLong {
        assert!(ub >= lb, "uniform range [{lb}, {ub}] is empty");
        UniformLong {
            lb,
            interval: ub - lb + 1,
        }
    }

    pub fn next<R: Rng>(&self, rng: &mut R) -> i64 {
        self.lb + rng.random_range(0..self.interval)
    }
}

/// A shared `CounterGenerator`: the load phase's key sequence.
#[derive(Debug)]
pub struct Counter {
    next: AtomicI64,
}

impl Counter {
    pub fn new(start: i64) -> Counter {
        Counter {
            next: AtomicI64::new(start),
        }
    }

    pub fn next(&self) -> i64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

/// A shared `SequentialGenerator`: `start, start+1, …, end, start, …` across all workers.
#[derive(Debug)]
pub struct Sequential {
    counter: AtomicI64,
    start: i64,
    interval: i64,
}

impl Sequential {
    pub fn new(start: i64, end: i64) -> Sequential {
        assert!(end >= start, "sequential range [{start}, {end}] is empty");
        Sequential {
            counter: AtomicI64::new(0),
            start,
            interval: end - start + 1,
        }
    }

    pub fn next(&self) -> i64 {
        self.start + self.counter.fetch_add(1, Ordering::Relaxed) % self.interval
    }
}

/// `AcknowledgedCounterGenerator`: hands out insert key numbers, and publishes as `last_value`
/// the highest number below which every insert has completed, so that readers never ask for a
/// key whose insert is still in flight. Reading `last_value` (every operation does) is one
/// atomic load; only inserts take the lock.
#[derive(Debug)]
pub struct AcknowledgedCounter {
    next: AtomicI64,
    limit: AtomicI64,
    window: Mutex<Vec<bool>>,
}

/// More inserts are unacknowledged than the window holds: YCSB fails the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyUnacknowledged;

impl AcknowledgedCounter {
    pub fn new(start: i64) -> AcknowledgedCounter {
        AcknowledgedCounter {
            next: AtomicI64::new(start),
            limit: AtomicI64::new(start - 1),
            window: Mutex::new(vec![false; ACK_WINDOW_SIZE]),
        }
    }

    pub fn next(&self) -> i64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    pub fn last_value(&self) -> i64 {
        self.limit.load(Ordering::Acquire)
    }

    pub fn acknowledge(&self, value: i64) -> Result<(), TooManyUnacknowledged> {
        let mask = (ACK_WINDOW_SIZE - 1) as i64;
        let mut window = self.window.lock().expect("ack window lock poisoned");
        let slot = (value & mask) as usize;
        if window[slot] {
            return Err(TooManyUnacknowledged);
        }
        window[slot] = true;
        // Move the contiguous run of acknowledged numbers over to the limit.
        let mut limit = self.limit.load(Ordering::Relaxed);
        let before_first_slot = limit & mask;
        let mut index = limit + 1;
        while (index & mask) != before_first_slot {
            let s = (index & mask) as usize;
            if !window[s] {
                break;
            }
            window[s] = false;
            index += 1;
        }
        limit = index - 1;
        self.limit.store(limit, Ordering::Release);
        Ok(())
    }
}

/// `SkewedLatestGenerator`: zipfian over the distance back from the newest acknowledged insert.
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    zipfian: Zipfian,
}

impl SkewedLatest {
    pub fn new(basis: &AcknowledgedCounter) -> SkewedLatest {
        let items = basis.last_value().max(1);
        SkewedLatest {
            zipfian: Zipfian::new(0, items - 1),
        }
    }

    pub fn next<R: Rng>(&mut self, rng: &mut R, basis: &AcknowledgedCounter) -> i64 {
        let max = basis.last_value();
        max - self.zipfian.next_long(rng, max)
    }
}

/// A number generator for lengths (field and scan): `constant`, `uniform` or `zipfian`.
#[derive(Debug, Clone)]
pub enum LengthGenerator {
    Constant(i64),
    Uniform(UniformLong),
    Zipfian(Zipfian),
}

impl LengthGenerator {
    pub fn next<R: Rng>(&mut self, rng: &mut R) -> i64 {
        match self {
            LengthGenerator::Constant(v) => *v,
            LengthGenerator::Uniform(u) => u.next(rng),
            LengthGenerator::Zipfian(z) => z.next(rng),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn rng() -> SmallRng {
        SmallRng::seed_from_u64(0x5eed)
    }

    #[test]
    fn zipfian_favours_the_first_items_and_stays_in_range() {
        let mut r = rng();
        let mut z = Zipfian::new(0, 999);
        let mut counts = vec![0u32; 1001];
        let n = 200_000;
        for _ in 0..n {
            let v = z.next(&mut r);
            assert!((0..=1000).contains(&v), "{v}");
            counts[v as usize] += 1;
        }
        // With theta 0.99 over 1000 items, item 0 has probability 1/zeta(1000) ≈ 0.134, item 1
        // about half of that; the top 10 items take about 40% of the draws.
        let p0 = f64::from(counts[0]) / n as f64;
        assert!((0.11..0.16).contains(&p0), "p0 = {p0}");
        let p1 = f64::from(counts[1]) / n as f64;
        assert!((0.05..0.09).contains(&p1), "p1 = {p1}");
        let top10: u32 = counts[..10].iter().sum();
        let share = f64::from(top10) / n as f64;
        assert!((0.33..0.47).contains(&share), "top-10 share {share}");
    }

    #[test]
    fn zeta_grows_incrementally_like_a_full_recomputation() {
        let full = zeta(0, 5000, ZIPFIAN_CONSTANT, 0.0);
        let part = zeta(0, 3000, ZIPFIAN_CONSTANT, 0.0);
        let incremental = zeta(3000, 5000, ZIPFIAN_CONSTANT, part);
        assert!((full - incremental).abs() < 1e-9);
        // The precomputed constant is YCSB's zeta over ten billion items.
        assert!((zeta(0, 10, ZIPFIAN_CONSTANT, 0.0) - 2.9).abs() < 0.1);
    }

    #[test]
    fn scrambled_zipfian_covers_the_range_with_a_few_hot_keys() {
        let mut r = rng();
        let mut z = ScrambledZipfian::new(100, 1099);
        let mut counts = vec![0u32; 1000];
        let n = 200_000;
        for _ in 0..n {
            let v = z.next(&mut r);
            assert!((100..1100).contains(&v), "{v}");
            counts[(v - 100) as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let hottest = f64::from(counts[0]) / n as f64;
        // Item 0 of the underlying zipfian has probability 1/zeta(10^10) ≈ 0.038.
        assert!(hottest > 0.03, "the hottest key takes {hottest}");
        let touched = counts.iter().filter(|&&c| c > 0).count();
        assert!(touched > 500, "only {touched} of 1000 keys drawn");
        // Scrambling: the hottest key is not simply the first one.
        let mut z2 = ScrambledZipfian::new(0, 999);
        let mut first = 0;
        for _ in 0..10_000 {
            if z2.next(&mut r) == 0 {
                first += 1;
            }
        }
        assert!(first < 1000, "key 0 drawn {first} times out of 10000");
    }

    #[test]
    fn hotspot_sends_the_hot_fraction_of_draws_to_the_hot_set() {
        let mut r = rng();
        let mut h = Hotspot::new(0, 999, 0.2, 0.8);
        let n = 100_000;
        let mut hot = 0;
        for _ in 0..n {
            let v = h.next(&mut r);
            assert!((0..1000).contains(&v));
            if v < 200 {
                hot += 1;
            }
        }
        let share = f64::from(hot) / n as f64;
        assert!((0.77..0.83).contains(&share), "hot share {share}");
        // Degenerate sets do not divide by zero.
        let mut all_cold = Hotspot::new(0, 9, 0.0, 0.9);
        let mut all_hot = Hotspot::new(0, 9, 1.0, 0.1);
        for _ in 0..1000 {
            assert!((0..10).contains(&all_cold.next(&mut r)));
            assert!((0..10).contains(&all_hot.next(&mut r)));
        }
    }

    #[test]
    fn exponential_puts_the_percentile_below_the_range() {
        let mut r = rng();
        let mut e = Exponential::new(95.0, 1000.0);
        let n = 100_000;
        let below = (0..n).filter(|_| e.next(&mut r) < 1000.0).count();
        let share = below as f64 / n as f64;
        assert!((0.94..0.96).contains(&share), "{share}");
    }

    #[test]
    fn uniform_is_flat_and_inclusive() {
        let mut r = rng();
        let u = UniformLong::new(5, 9);
        let mut counts = [0u32; 5];
        for _ in 0..50_000 {
            counts[(u.next(&mut r) - 5) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn sequential_wraps_and_counter_counts() {
        let s = Sequential::new(10, 12);
        let drawn: Vec<i64> = (0..7).map(|_| s.next()).collect();
        assert_eq!(drawn, [10, 11, 12, 10, 11, 12, 10]);
        let c = Counter::new(5);
        assert_eq!((c.next(), c.next()), (5, 6));
    }

    #[test]
    fn acknowledged_counter_publishes_only_contiguous_completions() {
        let a = AcknowledgedCounter::new(100);
        assert_eq!(a.last_value(), 99);
        let (k0, k1, k2) = (a.next(), a.next(), a.next());
        assert_eq!((k0, k1, k2), (100, 101, 102));
        a.acknowledge(k1).expect("ack");
        assert_eq!(a.last_value(), 99, "100 is still in flight");
        a.acknowledge(k0).expect("ack");
        assert_eq!(a.last_value(), 101);
        a.acknowledge(k2).expect("ack");
        assert_eq!(a.last_value(), 102);
        // The same slot acknowledged twice before the limit passes it: too many in flight.
        let k = a.next();
        let wrapped = k + ACK_WINDOW_SIZE as i64 + 1;
        a.acknowledge(k + 1).expect("ack");
        assert_eq!(a.acknowledge(wrapped), Err(TooManyUnacknowledged));
    }

    #[test]
    fn skewed_latest_prefers_the_newest_keys() {
        let mut r = rng();
        let basis = AcknowledgedCounter::new(1000);
        let mut latest = SkewedLatest::new(&basis);
        let n = 50_000;
        let mut newest = 0;
        for _ in 0..n {
            let v = latest.next(&mut r, &basis);
            assert!(v <= 999, "{v}");
            if v >= 990 {
                newest += 1;
            }
        }
        let share = f64::from(newest) / n as f64;
        assert!(share > 0.3, "the 10 newest keys take {share}");
        // New inserts move the hot spot.
        for _ in 0..100 {
            let k = basis.next();
            basis.acknowledge(k).expect("ack");
        }
        let hits = (0..1000).filter(|_| latest.next(&mut r, &basis) >= 1090).count();
        assert!(hits > 300, "{hits}");
    }

    #[test]
    fn length_generators() {
        let mut r = rng();
        assert_eq!(LengthGenerator::Constant(100).next(&mut r), 100);
        let mut u = LengthGenerator::Uniform(UniformLong::new(1, 100));
        let mut z = LengthGenerator::Zipfian(Zipfian::new(1, 100));
        for _ in 0..1000 {
            assert!((1..=100).contains(&u.next(&mut r)));
            assert!((1..=101).contains(&z.next(&mut r)));
        }
    }
}
