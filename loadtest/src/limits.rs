//! The consumers' limits as options: a fixed concurrency, or weir's adaptive (AIMD)
//! limiter, and an optional jobs/s cap. The types, parsers, defaults, range checks and
//! the building of the limiter are the library's (`weir::limiter::LimiterOptions`, which
//! `weir work` flattens), so every value means what it means for `weir work --adaptive`.
//! The flags are `weir work`'s (`--rate` is the jobs/s cap, as there; `--rate-limit`, its
//! old name here, stays as a hidden alias), without clap's `requires = "adaptive"`, as
//! `downstream` turns the adaptive limiter on by itself.

use clap::Args;
use weir::limiter::{KeyLimiterConfig, LimiterConfig, LimiterOptions, Rate, Target};

/// Limit options of every scenario (and of the consumer processes, which get them from
/// [`args`]).
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct LimitOpts {
    /// Run the consumers with weir's adaptive (AIMD) concurrency limiter; --concurrency is
    /// where it starts [downstream: on unless --fixed].
    #[arg(long)]
    pub adaptive: bool,
    /// Adaptive: also adapt one limit per job key, from that key's own p95 and errors (as
    /// weir work's --adaptive-per-key).
    #[arg(long)]
    pub adaptive_per_key: bool,
    /// Adaptive: lowest limit of each consumer [default: 1].
    #[arg(long, value_name = "N")]
    pub min_concurrency: Option<usize>,
    /// Adaptive: highest limit of each consumer [default: 1000].
    #[arg(long, value_name = "N")]
    pub max_concurrency: Option<usize>,
    /// Adaptive: p95 handler latency to hold, a duration (30ms) or a multiple of the
    /// no-load p95 (1.5x) [default: 1.5x; downstream: 1.5 × --base-latency].
    #[arg(long, value_name = "DURATION|FACTORx")]
    pub target_p95: Option<Target>,
    /// Adaptive: error rate (failed calls, 503s) above which the limit backs off, 0 to 1
    /// [default: 0.05].
    #[arg(long, value_name = "RATE")]
    pub error_threshold: Option<f64>,
    /// Cap on jobs started per second by each consumer: 500/s, 30/m (as weir work's
    /// --rate; steady's enqueue rate is --enqueue-rate).
    #[arg(long = "rate", alias = "rate-limit", value_name = "N/s")]
    pub rate_limit: Option<Rate>,
    /// Jobs that may start back to back under --rate [default: the rate's count].
    #[arg(long, requires = "rate_limit")]
    pub burst: Option<u32>,
}

impl LimitOpts {
    /// The same options as the library takes them (it builds and checks the limiter).
    pub(crate) fn options(&self) -> LimiterOptions {
        let mut o = LimiterOptions::default();
        o.adaptive = self.adaptive;
        o.adaptive_per_key = self.adaptive_per_key;
        o.min_concurrency = self.min_concurrency;
        o.max_concurrency = self.max_concurrency;
        o.target_p95 = self.target_p95;
        o.error_threshold = self.error_threshold;
        o.rate = self.rate_limit;
        o.burst = self.burst;
        o
    }

    /// The adaptive limiter's settings (`None`: a fixed limit), checked by the library.
    /// Adaptive-only options without `--adaptive` are an error, not silently ignored.
    pub(crate) fn limiter(&self) -> Result<Option<LimiterConfig>, String> {
        if !self.adaptive {
            let given = [
                (self.min_concurrency.is_some(), "--min-concurrency"),
                (self.max_concurrency.is_some(), "--max-concurrency"),
                (self.target_p95.is_some(), "--target-p95"),
                (self.error_threshold.is_some(), "--error-threshold"),
                (self.adaptive_per_key, "--adaptive-per-key"),
            ];
            if let Some((_, flag)) = given.iter().find(|g| g.0) {
                return Err(format!(
                    "{flag} applies to the adaptive limiter: add --adaptive (downstream: drop --fixed)"
                ));
            }
        }
        self.options().limiter().map_err(|e| e.to_string())
    }

    /// The per-key limiters' settings (`None` without `--adaptive-per-key`), each key's
    /// share starting at `initial`.
    pub(crate) fn key_limiter(&self, initial: usize) -> Result<Option<KeyLimiterConfig>, String> {
        self.limiter()?;
        self.options().key_limiter(initial).map_err(|e| e.to_string())
    }

    /// The jobs/s cap, if any, with its burst.
    pub(crate) fn rate(&self) -> Option<Rate> {
        self.options().rate()
    }
}

/// The options that give a consumer process the same limiter and cap.
pub(crate) fn args(limiter: Option<&LimiterConfig>, per_key: bool, rate: Option<Rate>) -> Vec<String> {
    let mut v = Vec::new();
    if per_key && limiter.is_some() {
        v.push("--adaptive-per-key".to_owned());
    }
    if let Some(l) = limiter {
        let a = &l.aimd;
        v.push("--adaptive".to_owned());
        for (flag, value) in [
            ("--min-concurrency", a.min.to_string()),
            ("--max-concurrency", a.max.to_string()),
            ("--target-p95", a.target.to_string()),
            ("--error-threshold", a.error_threshold.to_string()),
        ] {
            v.push(flag.to_owned());
            v.push(value);
        }
    }
    if let Some(r) = rate {
        v.extend([
            "--rate".to_owned(),
            r.spec(),
            "--burst".to_owned(),
            r.burst.to_string(),
        ]);
    }
    v
}

/// The limits of a run as the report shows them.
pub(crate) fn describe(
    limiter: Option<&LimiterConfig>,
    per_key: bool,
    rate: Option<Rate>,
) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert("adaptive".into(), limiter.is_some().into());
    m.insert("adaptive_per_key".into(), (per_key && limiter.is_some()).into());
    if let Some(l) = limiter {
        let a = &l.aimd;
        m.insert("min".into(), a.min.into());
        m.insert("max".into(), a.max.into());
        m.insert("target_p95".into(), a.target.to_string().into());
        m.insert("error_threshold".into(), a.error_threshold.into());
    }
    if let Some(r) = rate {
        m.insert("rate_limit".into(), r.to_string().into());
    }
    m.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn process_args_round_trip() {
        let opts = LimitOpts {
            adaptive: true,
            min_concurrency: Some(2),
            max_concurrency: Some(300),
            target_p95: Some(Target::Absolute(Duration::from_millis(30))),
            error_threshold: Some(0.1),
            rate_limit: Some("500/s".parse().unwrap()),
            burst: Some(50),
            adaptive_per_key: true,
        };
        let limiter = opts.limiter().unwrap();
        let passed = args(limiter.as_ref(), true, opts.rate());
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            l: LimitOpts,
        }
        let back = <P as clap::Parser>::try_parse_from(std::iter::once("x".to_owned()).chain(passed))
            .unwrap()
            .l;
        assert_eq!(back.limiter().unwrap(), limiter);
        assert!(back.adaptive_per_key);
        assert_eq!(back.rate(), opts.rate());
        let relative = LimitOpts {
            adaptive: true,
            target_p95: Some("1.5x".parse().unwrap()),
            ..LimitOpts::default()
        };
        assert!(args(relative.limiter().unwrap().as_ref(), false, None).contains(&"1.5x".to_owned()));
    }

    #[test]
    fn adaptive_options_need_adaptive_and_the_library_checks_ranges() {
        let no = LimitOpts {
            max_concurrency: Some(10),
            ..LimitOpts::default()
        };
        assert!(no.limiter().unwrap_err().contains("--max-concurrency"));
        let bad = LimitOpts {
            adaptive: true,
            min_concurrency: Some(20),
            max_concurrency: Some(10),
            ..LimitOpts::default()
        };
        assert!(bad.limiter().unwrap_err().contains("max concurrency"));
        assert_eq!(LimitOpts::default().limiter(), Ok(None));
    }
}
