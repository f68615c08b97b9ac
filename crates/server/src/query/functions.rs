//! Cassandra's native functions that hayate runs: the blob conversions (`textAsBlob`,
//! `blobAsText`, ... for every native type), the time conversions (`toTimestamp`, `toDate`,
//! `toUnixTimestamp`), `toJson`, and the aggregates `min`, `max`, `sum`, `avg` and `count`.

use std::cmp::Ordering;

use hayate_cql::value::{compare, DataType};

/// A function of one value.
#[derive(Clone, Debug)]
pub enum Scalar {
    /// `<type>AsBlob` and `blobAs<type>`: the bytes stay, the type changes.
    Reinterpret,
    ToUnixTimestamp,
    ToTimestamp,
    ToDate,
    /// `toJson`: the value as JSON text, as SELECT JSON writes it.
    ToJson,
}

/// The 100 ns intervals between 1582-10-15 (the UUID epoch) and 1970-01-01.
const UUID_EPOCH_OFFSET_100NS: i64 = 0x01B2_1DD2_1381_4000;
const MS_PER_DAY: i64 = 86_400_000;
const DATE_EPOCH: i64 = 1 << 31;

/// Resolves `name(arg of type arg_ty)`: the function and its result type.
pub fn scalar(name: &str, arg_ty: &DataType) -> Option<(Scalar, DataType)> {
    let lower = name.to_ascii_lowercase();
    if let Some(ty) = lower.strip_suffix("asblob") {
        let from = DataType::parse(ty).ok()?;
        return (from.native_name().is_some() && &from == arg_ty)
            .then_some((Scalar::Reinterpret, DataType::Blob));
    }
    if let Some(ty) = lower.strip_prefix("blobas") {
        let to = DataType::parse(ty).ok()?;
        return (matches!(arg_ty, DataType::Blob) && to.native_name().is_some())
            .then_some((Scalar::Reinterpret, to));
    }
    match (lower.as_str(), arg_ty) {
        ("tojson", _) => Some((Scalar::ToJson, DataType::Text)),
        ("tounixtimestamp", DataType::Timestamp | DataType::Timeuuid | DataType::Date) => {
            Some((Scalar::ToUnixTimestamp, DataType::BigInt))
        }
        ("totimestamp", DataType::Timestamp | DataType::Timeuuid | DataType::Date) => {
            Some((Scalar::ToTimestamp, DataType::Timestamp))
        }
        ("todate", DataType::Timestamp | DataType::Timeuuid | DataType::Date) => {
            Some((Scalar::ToDate, DataType::Date))
        }
        _ => None,
    }
}

fn millis(ty: &DataType, v: &[u8]) -> Option<i64> {
    match ty {
        DataType::Timestamp => Some(i64::from_be_bytes(v.try_into().ok()?)),
        DataType::Date => {
            let days = i64::from(u32::from_be_bytes(v.try_into().ok()?)) - DATE_EPOCH;
            Some(days * MS_PER_DAY)
        }
        DataType::Timeuuid if v.len() == 16 => {
            let low = u64::from(u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
            let mid = u64::from(u16::from_be_bytes([v[4], v[5]]));
            let high = u64::from(u16::from_be_bytes([v[6], v[7]]) & 0x0FFF);
            let t = (high << 48 | mid << 32 | low) as i64;
            Some((t - UUID_EPOCH_OFFSET_100NS) / 10_000)
        }
        _ => None,
    }
}

pub fn apply(f: &Scalar, arg_ty: &DataType, v: &[u8]) -> Option<Vec<u8>> {
    match f {
        Scalar::Reinterpret => Some(v.to_vec()),
        Scalar::ToJson => Some(hayate_cql::value::json::to_json(arg_ty, v).into_bytes()),
        Scalar::ToUnixTimestamp | Scalar::ToTimestamp => Some(millis(arg_ty, v)?.to_be_bytes().to_vec()),
        Scalar::ToDate => {
            let days = millis(arg_ty, v)?.div_euclid(MS_PER_DAY) + DATE_EPOCH;
            Some(u32::try_from(days).ok()?.to_be_bytes().to_vec())
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregateKind {
    Min,
    Max,
    Sum,
    Avg,
    Count,
}

pub fn aggregate(name: &str, arg_ty: &DataType) -> Option<(AggregateKind, DataType)> {
    // Cassandra's aggregates of a counter are bigints.
    if arg_ty.is_counter() {
        return aggregate(name, &DataType::BigInt);
    }
    let numeric = matches!(
        arg_ty,
        DataType::TinyInt
            | DataType::SmallInt
            | DataType::Int
            | DataType::BigInt
            | DataType::Float
            | DataType::Double
    );
    match name.to_ascii_lowercase().as_str() {
        "min" => Some((AggregateKind::Min, arg_ty.clone())),
        "max" => Some((AggregateKind::Max, arg_ty.clone())),
        "sum" if numeric => Some((AggregateKind::Sum, arg_ty.clone())),
        "avg" if numeric => Some((AggregateKind::Avg, arg_ty.clone())),
        "count" => Some((AggregateKind::Count, DataType::BigInt)),
        _ => None,
    }
}

/// The running state of one aggregate.
#[derive(Clone, Debug, Default)]
pub struct Accumulator {
    best: Option<Vec<u8>>,
    int_sum: i128,
    float_sum: f64,
    count: i64,
}

fn number(ty: &DataType, v: &[u8]) -> Option<(i128, f64)> {
    let i: i128 = match ty {
        DataType::TinyInt => i8::from_be_bytes(v.try_into().ok()?).into(),
        DataType::SmallInt => i16::from_be_bytes(v.try_into().ok()?).into(),
        DataType::Int => i32::from_be_bytes(v.try_into().ok()?).into(),
        DataType::BigInt | DataType::Counter => i64::from_be_bytes(v.try_into().ok()?).into(),
        DataType::Float => return Some((0, f32::from_be_bytes(v.try_into().ok()?).into())),
        DataType::Double => return Some((0, f64::from_be_bytes(v.try_into().ok()?))),
        _ => return None,
    };
    Some((i, i as f64))
}

impl Accumulator {
    pub fn add(&mut self, kind: AggregateKind, ty: &DataType, v: Option<&[u8]>) {
        let Some(v) = v.filter(|v| !v.is_empty()) else {
            return;
        };
        self.count += 1;
        match kind {
            AggregateKind::Min | AggregateKind::Max => {
                let keep = match &self.best {
                    None => true,
                    Some(b) => {
                        let o = compare(ty, v, b);
                        (kind == AggregateKind::Min && o == Ordering::Less)
                            || (kind == AggregateKind::Max && o == Ordering::Greater)
                    }
                };
                if keep {
                    self.best = Some(v.to_vec());
                }
            }
            AggregateKind::Sum | AggregateKind::Avg => {
                if let Some((i, f)) = number(ty, v) {
                    self.int_sum += i;
                    self.float_sum += f;
                }
            }
            AggregateKind::Count => {}
        }
    }

    /// The result, serialized as `ty` (the aggregate's result type); Cassandra's sum and avg
    /// keep the argument's type, wrapping on overflow as Java's arithmetic does.
    pub fn finish(&self, kind: AggregateKind, ty: &DataType) -> Option<Vec<u8>> {
        match kind {
            AggregateKind::Count => Some(self.count.to_be_bytes().to_vec()),
            AggregateKind::Min | AggregateKind::Max => self.best.clone(),
            AggregateKind::Sum | AggregateKind::Avg => {
                let n = if kind == AggregateKind::Avg {
                    self.count.max(1)
                } else {
                    1
                };
                let i = if kind == AggregateKind::Avg {
                    self.int_sum / i128::from(n)
                } else {
                    self.int_sum
                };
                let f = self.float_sum / if kind == AggregateKind::Avg { n as f64 } else { 1.0 };
                Some(match ty {
                    DataType::TinyInt => (i as i8).to_be_bytes().to_vec(),
                    DataType::SmallInt => (i as i16).to_be_bytes().to_vec(),
                    DataType::Int => (i as i32).to_be_bytes().to_vec(),
                    DataType::BigInt => (i as i64).to_be_bytes().to_vec(),
                    DataType::Float => (f as f32).to_be_bytes().to_vec(),
                    _ => f.to_be_bytes().to_vec(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeuuid_time_reads_back_as_milliseconds() {
        let u = crate::query::bind::timeuuid_now();
        let ms = millis(&DataType::Timeuuid, &u).expect("a timeuuid");
        let now_ms = crate::query::bind::now_us() / 1000;
        assert!((now_ms - ms).abs() < 5_000, "{ms} vs {now_ms}");
    }

    #[test]
    fn int_aggregates_keep_the_argument_type() {
        let mut a = Accumulator::default();
        for n in [20i32, 21, 22, 23, 24] {
            a.add(AggregateKind::Avg, &DataType::Int, Some(&n.to_be_bytes()));
        }
        assert_eq!(
            a.finish(AggregateKind::Avg, &DataType::Int),
            Some(22i32.to_be_bytes().to_vec())
        );
        assert_eq!(
            a.finish(AggregateKind::Sum, &DataType::Int),
            Some(110i32.to_be_bytes().to_vec())
        );
        assert_eq!(
            a.finish(AggregateKind::Count, &DataType::BigInt),
            Some(5i64.to_be_bytes().to_vec())
        );
    }
}
