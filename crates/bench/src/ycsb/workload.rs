//! YCSB's `CoreWorkload`: which operation comes next, on which key, with which fields and values.
//!
//! [`CoreWorkload`] is read once from the properties and shared; each worker makes its own
//! [`WorkerWorkload`] with private generators and buffers, so that choosing an operation costs no
//! lock and no allocation.

use std::fmt;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::Rng;

use super::generator::{
    AcknowledgedCounter, Counter, Exponential, Hotspot, LengthGenerator, ScrambledZipfian, Sequential,
    SkewedLatest, UniformLong, Zipfian,
};
use super::keys::KeyNamer;
use super::properties::{invalid, Properties, PropertyError};

/// A record has at most this many fields: each one is a prepared statement variant and a column.
pub const FIELD_COUNT_MAX: i64 = 1024;
/// A field value is at most this long (YCSB's fields are 100 bytes; 1 MiB is already absurd).
pub const FIELD_LENGTH_MAX: i64 = 1 << 20;
/// A scan asks for at most this many records.
pub const SCAN_LENGTH_MAX: i64 = 1_000_000;

/// The transaction kinds of the run phase, in the order YCSB adds them to its chooser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transaction {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

/// `requestdistribution`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestDistribution {
    Uniform,
    Zipfian,
    Latest,
    Hotspot,
    Sequential,
    Exponential,
}

#[derive(Debug)]
pub struct WorkloadError(pub PropertyError);

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for WorkloadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl From<PropertyError> for WorkloadError {
    fn from(e: PropertyError) -> Self {
        WorkloadError(e)
    }
}

/// The workload as the properties define it, shared by all workers.
#[derive(Debug)]
pub struct CoreWorkload {
    pub table: String,
    pub field_names: Vec<String>,
    pub read_all_fields: bool,
    pub read_all_fields_by_name: bool,
    pub write_all_fields: bool,
    pub record_count: i64,
    pub insert_count: i64,
    pub ordered_inserts: bool,
    pub zero_padding: usize,
    pub insertion_retry_limit: u32,
    pub insertion_retry_interval_s: u64,
    pub insertion_keep_going_on_error: bool,
    /// Cumulative thresholds of the operation chooser, summing to 1.
    chooser: Vec<(f64, Transaction)>,
    field_length: LengthGenerator,
    scan_length: LengthGenerator,
    key_chooser: KeyChooser,
    /// The load phase's key sequence (`keysequence`), from `insertstart`.
    pub load_sequence: Counter,
    /// The run phase's insert key sequence (`transactioninsertkeysequence`), from `recordcount`.
    pub insert_sequence: Arc<AcknowledgedCounter>,
}

impl CoreWorkload {
    /// Reads `CoreWorkload.init`'s properties with its defaults.
    pub fn from_properties(p: &Properties) -> Result<CoreWorkload, WorkloadError> {
        if let Some(class) = p.get("workload") {
            if !class.ends_with("CoreWorkload") {
                return Err(invalid(
                    "workload",
                    class,
                    "site.ycsb.workloads.CoreWorkload (the only one)",
                )
                .into());
            }
        }
        let table = p.str_or("table", "usertable").to_string();
        let field_count = p.i64_or("fieldcount", 10)?;
        if !(1..=FIELD_COUNT_MAX).contains(&field_count) {
            return Err(invalid("fieldcount", &field_count.to_string(), "1 to 1024").into());
        }
        let prefix = p.str_or("fieldnameprefix", "field");
        let field_names = (0..field_count).map(|i| format!("{prefix}{i}")).collect();

        let field_length = p.i64_or("fieldlength", 100)?;
        let min_field_length = p.i64_or("minfieldlength", 1)?;
        if !(0..=FIELD_LENGTH_MAX).contains(&field_length) || min_field_length < 0 {
            return Err(invalid("fieldlength", &field_length.to_string(), "0 to 1048576").into());
        }
        let field_length = match p.str_or("fieldlengthdistribution", "constant") {
            "constant" => LengthGenerator::Constant(field_length),
            "uniform" => {
                LengthGenerator::Uniform(checked_uniform("minfieldlength", min_field_length, field_length)?)
            }
            "zipfian" => {
                LengthGenerator::Zipfian(checked_zipfian("minfieldlength", min_field_length, field_length)?)
            }
            other => {
                return Err(invalid("fieldlengthdistribution", other, "constant, uniform or zipfian").into())
            }
        };

        let mut record_count = p.i64_or("recordcount", 0)?;
        if record_count == 0 {
            record_count = i64::from(i32::MAX);
        }
        if record_count < 0 {
            return Err(invalid("recordcount", &record_count.to_string(), "a non-negative count").into());
        }
        let insert_start = p.i64_or("insertstart", 0)?;
        let insert_count = p.i64_or("insertcount", record_count - insert_start)?;
        if insert_start < 0 || insert_count < 0 || record_count < insert_start + insert_count {
            return Err(invalid(
                "insertcount",
                &insert_count.to_string(),
                "insertstart + insertcount not above recordcount",
            )
            .into());
        }
        let zero_padding = p.i64_or("zeropadding", 1)?.clamp(1, 64) as usize;
        let ordered_inserts = p.str_or("insertorder", "hashed") != "hashed";

        let min_scan = p.i64_or("minscanlength", 1)?;
        let max_scan = p.i64_or("maxscanlength", 1000)?;
        if min_scan < 0 || max_scan > SCAN_LENGTH_MAX {
            return Err(invalid("maxscanlength", &max_scan.to_string(), "at most 1000000").into());
        }
        let scan_length = match p.str_or("scanlengthdistribution", "uniform") {
            "uniform" => LengthGenerator::Uniform(checked_uniform("minscanlength", min_scan, max_scan)?),
            "zipfian" => LengthGenerator::Zipfian(checked_zipfian("minscanlength", min_scan, max_scan)?),
            other => return Err(invalid("scanlengthdistribution", other, "uniform or zipfian").into()),
        };

        let chooser = operation_chooser(p)?;
        let insert_sequence = Arc::new(AcknowledgedCounter::new(record_count));
        let (_, key_chooser) = key_chooser(p, insert_start, insert_count, record_count, &insert_sequence)?;

        Ok(CoreWorkload {
            table,
            field_names,
            read_all_fields: p.bool_or("readallfields", true),
            read_all_fields_by_name: p.bool_or("readallfieldsbyname", false),
            write_all_fields: p.bool_or("writeallfields", false),
            record_count,
            insert_count,
            ordered_inserts,
            zero_padding,
            insertion_retry_limit: p.u64_or("core_workload_insertion_retry_limit", 0)?.min(1000) as u32,
            insertion_retry_interval_s: p.u64_or("core_workload_insertion_retry_interval", 3)?.min(3600),
            insertion_keep_going_on_error: p.bool_or("core_workload_insertion_keep_going_on_error", false),
            chooser,
            field_length,
            scan_length,
            key_chooser,
            load_sequence: Counter::new(insert_start),
            insert_sequence,
        })
    }

    pub fn field_count(&self) -> usize {
        self.field_names.len()
    }

    /// The transaction kinds with a non-zero proportion, in chooser order.
    pub fn transactions(&self) -> impl Iterator<Item = Transaction> + '_ {
        self.chooser.iter().map(|&(_, t)| t)
    }

    pub fn worker(self: &Arc<Self>, rng: SmallRng) -> WorkerWorkload {
        // Each worker draws from its own copy; the counters a copy holds by Arc stay shared.
        let key_chooser = self.key_chooser.clone();
        WorkerWorkload {
            shared: Arc::clone(self),
            rng,
            key_chooser,
            field_length: self.field_length.clone(),
            scan_length: self.scan_length.clone(),
        }
    }
}

fn checked_uniform(name: &str, min: i64, max: i64) -> Result<UniformLong, WorkloadError> {
    if min > max {
        return Err(invalid(name, &min.to_string(), "at most the maximum length").into());
    }
    Ok(UniformLong::new(min, max))
}

fn checked_zipfian(name: &str, min: i64, max: i64) -> Result<Zipfian, WorkloadError> {
    if min > max {
        return Err(invalid(name, &min.to_string(), "at most the maximum length").into());
    }
    Ok(Zipfian::new(min, max))
}

/// `CoreWorkload.createOperationGenerator`: proportions are weights, normalized by their sum.
fn operation_chooser(p: &Properties) -> Result<Vec<(f64, Transaction)>, WorkloadError> {
    let weights = [
        (p.f64_or("readproportion", 0.95)?, Transaction::Read),
        (p.f64_or("updateproportion", 0.05)?, Transaction::Update),
        (p.f64_or("insertproportion", 0.0)?, Transaction::Insert),
        (p.f64_or("scanproportion", 0.0)?, Transaction::Scan),
        (
            p.f64_or("readmodifywriteproportion", 0.0)?,
            Transaction::ReadModifyWrite,
        ),
    ];
    let sum: f64 = weights.iter().map(|(w, _)| w.max(0.0)).sum();
    if sum <= 0.0 {
        return Err(invalid(
            "readproportion",
            p.str_or("readproportion", "0.95"),
            "some proportion above 0",
        )
        .into());
    }
    let mut cumulative = 0.0;
    let mut chooser = Vec::new();
    for (w, t) in weights {
        if w > 0.0 {
            cumulative += w / sum;
            chooser.push((cumulative, t));
        }
    }
    Ok(chooser)
}

fn key_chooser(
    p: &Properties,
    insert_start: i64,
    insert_count: i64,
    record_count: i64,
    insert_sequence: &AcknowledgedCounter,
) -> Result<(RequestDistribution, KeyChooser), WorkloadError> {
    let last = insert_start + insert_count - 1;
    let name = p.str_or("requestdistribution", "uniform");
    let needs_keys = |what: &str| -> Result<(), WorkloadError> {
        if insert_count < 1 {
            return Err(invalid(
                "insertcount",
                "0",
                "at least one key for this request distribution",
            )
            .with_context(what));
        }
        Ok(())
    };
    Ok(match name {
        "uniform" => {
            needs_keys(name)?;
            (
                RequestDistribution::Uniform,
                KeyChooser::Uniform(UniformLong::new(insert_start, last)),
            )
        }
        "zipfian" => {
            // The key space includes the inserts the run is expected to make (twice as many, for
            // slack), so that the popular keys do not move as records are added.
            let insert_proportion = p.f64_or("insertproportion", 0.0)?;
            let op_count = p.i64_or("operationcount", 0)?;
            let expected_new_keys = (op_count as f64 * insert_proportion * 2.0) as i64;
            (
                RequestDistribution::Zipfian,
                KeyChooser::Zipfian(ScrambledZipfian::new(
                    insert_start,
                    insert_start + insert_count + expected_new_keys,
                )),
            )
        }
        "latest" => {
            if record_count < 2 {
                return Err(
                    invalid("recordcount", &record_count.to_string(), "at least 2 for latest").into(),
                );
            }
            (
                RequestDistribution::Latest,
                KeyChooser::Latest(SkewedLatest::new(insert_sequence)),
            )
        }
        "hotspot" => {
            needs_keys(name)?;
            let data = p.f64_or("hotspotdatafraction", 0.2)?;
            let opn = p.f64_or("hotspotopnfraction", 0.8)?;
            (
                RequestDistribution::Hotspot,
                KeyChooser::Hotspot(Hotspot::new(insert_start, last, data, opn)),
            )
        }
        "sequential" => {
            needs_keys(name)?;
            (
                RequestDistribution::Sequential,
                KeyChooser::Sequential(Arc::new(Sequential::new(insert_start, last))),
            )
        }
        "exponential" => {
            let percentile = p.f64_or("exponential.percentile", 95.0)?;
            let frac = p.f64_or("exponential.frac", 0.857_142_857_1)?;
            (
                RequestDistribution::Exponential,
                KeyChooser::Exponential(Exponential::new(percentile, record_count as f64 * frac)),
            )
        }
        other => {
            return Err(invalid(
                "requestdistribution",
                other,
                "uniform, zipfian, latest, hotspot, sequential or exponential",
            )
            .into())
        }
    })
}

trait WithContext {
    fn with_context(self, what: &str) -> WorkloadError;
}

impl WithContext for PropertyError {
    fn with_context(self, what: &str) -> WorkloadError {
        match self {
            PropertyError::Invalid {
                name,
                value,
                expected,
            } => WorkloadError(PropertyError::Invalid {
                name,
                value: format!("{value} (requestdistribution={what})"),
                expected,
            }),
            other => WorkloadError(other),
        }
    }
}

/// The request distribution's key generator. The workload keeps one, and each worker clones it.
#[derive(Debug, Clone)]
enum KeyChooser {
    Uniform(UniformLong),
    Zipfian(ScrambledZipfian),
    Latest(SkewedLatest),
    Hotspot(Hotspot),
    Sequential(Arc<Sequential>),
    Exponential(Exponential),
}

/// Which fields a read or scan returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldSet {
    /// `SELECT *`.
    All,
    /// Every field named in the SELECT (`readallfieldsbyname`).
    AllByName,
    One(usize),
}

/// The values of a write: one field or all of them, as `&str`s in field order.
#[derive(Debug, Clone, Copy)]
pub enum Values<'a> {
    One { field: usize, value: &'a str },
    All(&'a WrittenValues),
}

/// All field values of one record, in one buffer.
#[derive(Debug, Default)]
pub struct WrittenValues {
    buf: String,
    ends: Vec<usize>,
}

impl WrittenValues {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn get(&self, field: usize) -> &str {
        let start = if field == 0 { 0 } else { self.ends[field - 1] };
        &self.buf[start..self.ends[field]]
    }
}

/// One worker's view of the workload: its random source, generators and reusable buffers.
#[derive(Debug)]
pub struct WorkerWorkload {
    pub shared: Arc<CoreWorkload>,
    rng: SmallRng,
    key_chooser: KeyChooser,
    field_length: LengthGenerator,
    scan_length: LengthGenerator,
}

impl WorkerWorkload {
    /// `DiscreteGenerator.nextValue` over the proportions.
    pub fn next_transaction(&mut self) -> Transaction {
        let u: f64 = self.rng.random();
        let chooser = &self.shared.chooser;
        for &(threshold, t) in chooser {
            if u < threshold {
                return t;
            }
        }
        // Rounding can leave the last threshold a hair below 1.
        chooser
            .last()
            .expect("the chooser has at least one transaction")
            .1
    }

    /// `CoreWorkload.nextKeynum`: a key that has been inserted (or, for `exponential`, one at a
    /// distance back from the newest).
    pub fn next_keynum(&mut self) -> i64 {
        let basis = &self.shared.insert_sequence;
        loop {
            let last = basis.last_value();
            let keynum = match &mut self.key_chooser {
                KeyChooser::Exponential(e) => {
                    let k = last - e.next(&mut self.rng) as i64;
                    if k < 0 {
                        continue;
                    }
                    return k;
                }
                KeyChooser::Uniform(u) => u.next(&mut self.rng),
                KeyChooser::Zipfian(z) => z.next(&mut self.rng),
                KeyChooser::Latest(l) => l.next(&mut self.rng, basis),
                KeyChooser::Hotspot(h) => h.next(&mut self.rng),
                KeyChooser::Sequential(s) => s.next(),
            };
            if keynum <= last {
                return keynum;
            }
        }
    }

    /// A key namer for this workload's `insertorder` and `zeropadding`.
    pub fn key_namer(&self) -> KeyNamer {
        KeyNamer::new(self.shared.ordered_inserts, self.shared.zero_padding)
    }

    /// The fields a read, scan or read-modify-write reads.
    pub fn read_fields(&mut self) -> FieldSet {
        let w = &self.shared;
        if !w.read_all_fields {
            FieldSet::One(self.rng.random_range(0..w.field_count()))
        } else if w.read_all_fields_by_name {
            FieldSet::AllByName
        } else {
            FieldSet::All
        }
    }

    pub fn scan_length(&mut self) -> i32 {
        self.scan_length.next(&mut self.rng).clamp(0, SCAN_LENGTH_MAX) as i32
    }

    /// New random values for every field (an insert, or an update with `writeallfields`).
    pub fn all_values(&mut self, out: &mut WrittenValues) {
        out.buf.clear();
        out.ends.clear();
        for _ in 0..self.shared.field_count() {
            let len = self.field_length.next(&mut self.rng).clamp(0, FIELD_LENGTH_MAX) as usize;
            push_random_printable(&mut self.rng, &mut out.buf, len);
            out.ends.push(out.buf.len());
        }
    }

    /// The values of an update: all fields with `writeallfields`, else one random field.
    pub fn update_values<'a>(&mut self, out: &'a mut WrittenValues) -> Values<'a> {
        if self.shared.write_all_fields {
            self.all_values(out);
            return Values::All(out);
        }
        let field = self.rng.random_range(0..self.shared.field_count());
        let len = self.field_length.next(&mut self.rng).clamp(0, FIELD_LENGTH_MAX) as usize;
        out.buf.clear();
        out.ends.clear();
        push_random_printable(&mut self.rng, &mut out.buf, len);
        Values::One {
            field,
            value: &out.buf,
        }
    }

    pub fn rng(&mut self) -> &mut SmallRng {
        &mut self.rng
    }
}

/// Appends `len` random printable ASCII characters (`' '..='~'`), eight from each 64-bit draw:
/// what YCSB's `RandomByteIterator` makes, at a fraction of the cost.
pub fn push_random_printable<R: Rng>(rng: &mut R, out: &mut String, len: usize) {
    let mut bytes = [0u8; 8];
    let mut left = len;
    while left > 0 {
        let mut word: u64 = rng.random();
        let n = left.min(8);
        for b in bytes.iter_mut().take(n) {
            // Multiply-shift maps a byte onto the 95 printable characters without a division.
            *b = b' ' + (((word & 0xff) * 95) >> 8) as u8;
            word >>= 8;
        }
        out.push_str(std::str::from_utf8(&bytes[..n]).expect("printable ASCII is UTF-8"));
        left -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn workload(text: &str) -> Arc<CoreWorkload> {
        let mut p = Properties::new();
        p.load_str(text);
        Arc::new(CoreWorkload::from_properties(&p).expect("valid workload"))
    }

    fn worker(w: &Arc<CoreWorkload>) -> WorkerWorkload {
        w.worker(SmallRng::seed_from_u64(7))
    }

    #[test]
    fn operation_chooser_follows_the_proportions() {
        let w = workload("recordcount=100\nreadproportion=0.5\nupdateproportion=0.3\nscanproportion=0.15\nreadmodifywriteproportion=0.05\n");
        let mut ww = worker(&w);
        let n = 100_000;
        let mut counts = [0u32; 5];
        for _ in 0..n {
            counts[ww.next_transaction() as usize] += 1;
        }
        let share = |i: usize| f64::from(counts[i]) / f64::from(n);
        assert!((0.48..0.52).contains(&share(0)), "{counts:?}");
        assert!((0.28..0.32).contains(&share(1)), "{counts:?}");
        assert_eq!(counts[2], 0, "no inserts were asked for");
        assert!((0.135..0.165).contains(&share(3)), "{counts:?}");
        assert!((0.04..0.06).contains(&share(4)), "{counts:?}");
    }

    #[test]
    fn proportions_are_weights_not_fractions() {
        // YCSB normalizes by the sum, so 2:2 is 50/50.
        let w = workload("readproportion=2\nupdateproportion=2\n");
        assert_eq!(
            w.transactions().collect::<Vec<_>>(),
            [Transaction::Read, Transaction::Update]
        );
        let mut ww = worker(&w);
        let reads = (0..10_000)
            .filter(|_| ww.next_transaction() == Transaction::Read)
            .count();
        assert!((4_700..5_300).contains(&reads), "{reads}");
    }

    #[test]
    fn defaults_are_ycsb_defaults() {
        let w = workload("");
        assert_eq!(w.table, "usertable");
        assert_eq!(w.field_names.len(), 10);
        assert_eq!(w.field_names[9], "field9");
        assert!(w.read_all_fields && !w.write_all_fields);
        assert_eq!(w.record_count, i64::from(i32::MAX));
        assert!(!w.ordered_inserts);
        assert_eq!(
            w.transactions().collect::<Vec<_>>(),
            [Transaction::Read, Transaction::Update]
        );
    }

    #[test]
    fn keys_stay_within_the_loaded_range() {
        for dist in [
            "uniform",
            "zipfian",
            "latest",
            "hotspot",
            "sequential",
            "exponential",
        ] {
            let w = workload(&format!(
                "recordcount=500\nrequestdistribution={dist}\noperationcount=1000\n"
            ));
            let mut ww = worker(&w);
            for _ in 0..5_000 {
                let k = ww.next_keynum();
                // `latest` may step one below zero at the very tail, as YCSB's does.
                assert!((-1..500).contains(&k), "{dist}: {k}");
            }
        }
    }

    #[test]
    fn insertstart_and_insertcount_bound_the_keys() {
        let w = workload("recordcount=1000\ninsertstart=200\ninsertcount=100\n");
        assert_eq!(w.load_sequence.next(), 200);
        let mut ww = worker(&w);
        for _ in 0..2_000 {
            assert!((200..300).contains(&ww.next_keynum()));
        }
        let mut p = Properties::new();
        p.load_str("recordcount=100\ninsertstart=50\ninsertcount=60\n");
        assert!(CoreWorkload::from_properties(&p).is_err(), "past recordcount");
    }

    #[test]
    fn values_have_the_field_length_and_are_printable() {
        let w = workload("fieldcount=3\nfieldlength=37\nwriteallfields=false\n");
        let mut ww = worker(&w);
        let mut all = WrittenValues::default();
        ww.all_values(&mut all);
        assert_eq!(all.len(), 3);
        for f in 0..3 {
            assert_eq!(all.get(f).len(), 37);
            assert!(all.get(f).bytes().all(|b| (b' '..=b'~').contains(&b)));
        }
        assert_ne!(all.get(0), all.get(1), "random, not repeated");
        match ww.update_values(&mut all) {
            Values::One { field, value } => {
                assert!(field < 3);
                assert_eq!(value.len(), 37);
            }
            Values::All(_) => panic!("writeallfields is false"),
        }
        let uniform = workload("fieldlengthdistribution=uniform\nfieldlength=20\nminfieldlength=5\n");
        let mut wu = worker(&uniform);
        wu.all_values(&mut all);
        for f in 0..10 {
            assert!((5..=20).contains(&all.get(f).len()));
        }
    }

    #[test]
    fn random_printable_uses_the_whole_range() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut s = String::new();
        push_random_printable(&mut rng, &mut s, 100_000);
        assert_eq!(s.len(), 100_000);
        assert!(s.bytes().any(|b| b == b' ') && s.bytes().any(|b| b == b'~'));
        assert!(s.bytes().all(|b| (b' '..=b'~').contains(&b)));
    }

    #[test]
    fn read_field_choice() {
        let one = workload("readallfields=false\nfieldcount=4\n");
        let mut w1 = worker(&one);
        for _ in 0..100 {
            assert!(matches!(w1.read_fields(), FieldSet::One(f) if f < 4));
        }
        let by_name = workload("readallfieldsbyname=true\n");
        assert_eq!(worker(&by_name).read_fields(), FieldSet::AllByName);
        assert_eq!(worker(&workload("")).read_fields(), FieldSet::All);
    }

    #[test]
    fn the_shipped_workload_files_parse_with_ycsbs_values() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads");
        let mixes: [(&str, &[Transaction]); 6] = [
            ("workloada", &[Transaction::Read, Transaction::Update]),
            ("workloadb", &[Transaction::Read, Transaction::Update]),
            ("workloadc", &[Transaction::Read]),
            ("workloadd", &[Transaction::Read, Transaction::Insert]),
            ("workloade", &[Transaction::Insert, Transaction::Scan]),
            ("workloadf", &[Transaction::Read, Transaction::ReadModifyWrite]),
        ];
        for (name, mix) in mixes {
            let mut p = Properties::new();
            p.load_file(&dir.join(name)).expect(name);
            assert_eq!(p.get("recordcount"), Some("1000"), "{name}");
            let w = CoreWorkload::from_properties(&p).expect(name);
            assert_eq!(w.transactions().collect::<Vec<_>>(), mix, "{name}");
        }
        let mut p = Properties::new();
        p.load_file(&dir.join("workload_template")).expect("template");
        CoreWorkload::from_properties(&p).expect("template");
    }

    #[test]
    fn bad_properties_are_named() {
        for (text, name) in [
            ("requestdistribution=gaussian\n", "requestdistribution"),
            ("fieldlengthdistribution=histogram\n", "fieldlengthdistribution"),
            ("workload=site.ycsb.workloads.TimeSeriesWorkload\n", "workload"),
            ("readproportion=0\nupdateproportion=0\n", "readproportion"),
            ("fieldcount=0\n", "fieldcount"),
        ] {
            let mut p = Properties::new();
            p.load_str(text);
            let err = CoreWorkload::from_properties(&p).expect_err(text);
            assert!(err.to_string().contains(name), "{text}: {err}");
        }
    }
}
