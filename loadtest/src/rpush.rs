//! `weir-loadtest rpush FILE`: the lines of a file pushed as they are, with raw RPUSH in
//! weir's bulk chunks ([`CHUNK`] items, [`IN_FLIGHT`] commands in flight), as the bare
//! queue's enqueue pushes its items. Nothing is parsed, checked or wrapped, and empty lines
//! are skipped: it is the raw client `weir enqueue` of the same file is measured against
//! (`scripts/enqueue-vs-rpush.sh`). It reads the file as it pushes, so memory stays
//! bounded by the commands in flight.

use crate::bare::{CHUNK, IN_FLIGHT};
use futures_util::{StreamExt, TryStreamExt, stream};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct RpushArgs {
    /// The file whose lines are pushed.
    pub file: PathBuf,
    /// The Redis to push to.
    #[arg(long)]
    pub redis_url: String,
    /// The list the lines are pushed onto.
    #[arg(long, default_value = "raw:ready")]
    pub key: String,
}

pub(crate) async fn run(a: &RpushArgs) -> anyhow::Result<()> {
    let file =
        std::fs::File::open(&a.file).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", a.file.display()))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let conn = weir::Redis::open(&a.redis_url)?.connect().await?;
    let started = Instant::now();
    let mut pushed = 0u64;
    let mut error = None;
    let commands = std::iter::from_fn(|| match next_push(&mut reader, &a.key) {
        Ok(Some((cmd, n))) => {
            pushed += n;
            Some(cmd)
        }
        Ok(None) => None,
        Err(e) => {
            error = Some(e);
            None
        }
    });
    stream::iter(commands)
        .map(|cmd| {
            let mut conn = conn.clone();
            async move { cmd.query_async::<u64>(&mut conn).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    if let Some(e) = error {
        anyhow::bail!("cannot read {}: {e}", a.file.display());
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "pushed {pushed} lines onto {} in {secs:.2}s ({:.0} lines/s)",
        a.key,
        pushed as f64 / secs.max(1e-9)
    );
    Ok(())
}

/// The next RPUSH of up to [`CHUNK`] non-empty lines from `reader`, and how many it
/// pushes; `None` at the end of the input.
fn next_push(reader: &mut impl BufRead, key: &str) -> std::io::Result<Option<(redis::Cmd, u64)>> {
    let mut cmd = redis::Cmd::with_capacity(CHUNK + 2, 256 * 1024);
    cmd.arg("RPUSH").arg(key);
    let mut n = 0;
    let mut line = Vec::new();
    while n < CHUNK as u64 {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        if !line.is_empty() {
            cmd.arg(&line[..]);
            n += 1;
        }
    }
    Ok((n > 0).then_some((cmd, n)))
}
