//! Latency histogram with a fixed footprint, so recording in the hot loop never allocates.
//!
//! Values are nanoseconds, bucketed by microsecond: exact up to 1,024 µs, then
//! 128 buckets per power of two (under 1 % relative error) up to about 35 minutes.
//! Mean and max are kept exactly.

const LINEAR: u64 = 1024; // µs recorded exactly
const SUB_BITS: u32 = 7; // 128 sub-buckets per octave above LINEAR
const OCTAVES: usize = 21; // 2^10 .. 2^31 µs
const BUCKETS: usize = LINEAR as usize + (OCTAVES << SUB_BITS);

pub struct Histogram {
    counts: Vec<u64>,
    n: u64,
    sum_ns: u128,
    max_ns: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    pub fn new() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            n: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }

    fn index(us: u64) -> usize {
        if us < LINEAR {
            return us as usize;
        }
        let octave = 63 - us.leading_zeros(); // >= 10
        let sub = (us >> (octave - SUB_BITS)) & ((1 << SUB_BITS) - 1);
        let i = LINEAR as usize + (((octave - 10) as usize) << SUB_BITS) + sub as usize;
        i.min(BUCKETS - 1)
    }

    /// Lowest value (µs) of bucket `i`.
    fn lower_us(i: usize) -> u64 {
        if i < LINEAR as usize {
            return i as u64;
        }
        let j = i - LINEAR as usize;
        let octave = (j >> SUB_BITS) as u32 + 10;
        let sub = (j & ((1 << SUB_BITS) - 1)) as u64;
        (1u64 << octave) + (sub << (octave - SUB_BITS))
    }

    pub fn record(&mut self, ns: u64) {
        self.counts[Self::index(ns / 1000)] += 1;
        self.n += 1;
        self.sum_ns += ns as u128;
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn mean_ms(&self) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        self.sum_ns as f64 / self.n as f64 / 1e6
    }

    pub fn max_ms(&self) -> f64 {
        self.max_ns as f64 / 1e6
    }

    /// The q-quantile (0..=1) in ms: the middle of the bucket holding it, capped at the max.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let lo = Self::lower_us(i) as f64;
                let hi = if i + 1 < BUCKETS {
                    Self::lower_us(i + 1) as f64
                } else {
                    lo
                };
                let mid_ms = (lo + hi) / 2.0 / 1e3;
                return mid_ms.min(self.max_ms());
            }
        }
        self.max_ms()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_bounded() {
        let mut last = 0;
        for us in (0..5000).chain([1 << 20, 1 << 30, u64::MAX / 1000]) {
            let i = Histogram::index(us);
            assert!(i >= last && i < BUCKETS);
            assert!(Histogram::lower_us(i) <= us || i == BUCKETS - 1);
            last = i;
        }
    }

    #[test]
    fn quantiles() {
        let mut h = Histogram::new();
        for us in 1..=1000u64 {
            h.record(us * 1000 + 500);
        }
        assert_eq!(h.count(), 1000);
        assert!((h.quantile_ms(0.5) - 0.5005).abs() < 0.002);
        assert!((h.quantile_ms(0.99) - 0.9905).abs() < 0.002);
        assert!((h.max_ms() - 1.0005).abs() < 1e-9);
        assert!((h.mean_ms() - 0.501).abs() < 1e-6);
        h.record(50_000_000); // 50 ms: coarse bucket, still within 1 %
        assert!((h.quantile_ms(1.0) - 50.0).abs() < 0.5);
    }
}
