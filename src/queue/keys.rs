//! Every Redis key weir touches, built in this one place.
//!
//! All keys of queue `Q` carry the hash tag `{Q}` (`weir:{Q}:ready:high`, …), so every
//! script touches a single cluster slot. Scripts receive [`QueueKeys::all`] in a fixed
//! order that `scripts/lib.lua` names; nothing builds a key inside Lua.

use crate::error::Error;

/// Longest queue name accepted.
pub const MAX_QUEUE_NAME: usize = 128;

/// Checks a queue name: 1 to 128 characters from `[A-Za-z0-9_.:-]`.
///
/// Braces are refused because they would break the hash tag.
pub fn validate_queue_name(name: &str) -> Result<(), Error> {
    validate_token("queue name", name, MAX_QUEUE_NAME)
}

/// Checks the name of a queue's lane: a queue name, or one of its partitions' tags,
/// `<queue>~<i>` or `<queue>~<i>~<s>` (see `queue/partitions.rs`). `~` is not in the
/// queue-name alphabet, so a partition can never be taken for a queue.
pub fn validate_lane_name(name: &str) -> Result<(), Error> {
    let Some((queue, rest)) = name.split_once('~') else {
        return validate_queue_name(name);
    };
    validate_queue_name(queue)?;
    let numbers = rest.split('~').collect::<Vec<_>>();
    let number = |s: &&str| !s.is_empty() && s.len() <= 6 && s.bytes().all(|b| b.is_ascii_digit());
    if numbers.len() > 2 || !numbers.iter().all(number) || name.len() > MAX_QUEUE_NAME + 16 {
        return Err(Error::InvalidName {
            what: "queue partition",
            value: name.chars().take(200).collect(),
            max: MAX_QUEUE_NAME + 16,
        });
    }
    Ok(())
}

/// The bytes [`validate_token`] accepts: `[A-Za-z0-9_.:-]`.
const TOKEN_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b':' | b'-');
        b += 1;
    }
    t
};

/// Checks a job id or kind: 1 to `max` characters from `[A-Za-z0-9_.:-]`.
///
/// Keeping these to a plain alphabet means they never need escaping in an envelope, which
/// is what lets scripts read the envelope header with a pattern (see `scripts/lib.lua`).
pub(crate) fn validate_token(what: &'static str, value: &str, max: usize) -> Result<(), Error> {
    // Bytes, not chars: every allowed character is ASCII, and no byte of a multi-byte
    // character is. A table look-up per byte: a bulk load checks two tokens per job.
    if value.is_empty() || value.len() > max || !value.bytes().all(|b| TOKEN_BYTE[b as usize]) {
        return Err(Error::InvalidName {
            what,
            value: value.chars().take(200).collect(),
            max,
        });
    }
    Ok(())
}

/// SET of every queue name enqueued to (the queue registry `weir queues` reads). One key
/// for the whole Redis, outside every queue's hash tag: `enqueue` adds the queue's name to
/// it in the same call, so on Redis Cluster it would need a slot of its own (weir runs on
/// a single Redis today).
pub const QUEUES: &str = "weir:queues";

/// STRING: when the one-off SCAN for queues created before the registry ran (epoch ms).
pub const QUEUES_SCANNED: &str = "weir:queues:scanned";

/// The queue name in one of its keys (`weir:{Q}:...` gives `Q`): for the one-off SCAN
/// that finds queues created before the registry.
pub fn queue_of_key(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("weir:{")?;
    let end = rest.find("}:")?;
    let name = &rest[..end];
    validate_queue_name(name).ok().map(|_| name)
}

/// How many keys `<prefix>throttled` ([`QueueKeys::key_throttled`]) keeps: the most
/// throttled ones (`fetch.lua` has the same number).
pub const THROTTLED_KEPT: usize = 1000;

/// How many keys a queue has (the length of [`QueueKeys::all`]).
pub const KEY_COUNT: usize = 19;

/// The keys of one queue, in the order scripts expect them.
#[derive(Debug, Clone)]
pub struct QueueKeys {
    name: String,
    all: [String; KEY_COUNT],
}

impl QueueKeys {
    /// Builds the keys of queue `name` (or of a partition of a queue: `<queue>~<i>`),
    /// checking the name.
    pub fn new(name: &str) -> Result<Self, Error> {
        validate_lane_name(name)?;
        let k = |suffix: &str| format!("weir:{{{name}}}:{suffix}");
        Ok(Self {
            name: name.to_owned(),
            all: [
                k("ready:high"),     // LIST: ids, priority high
                k("ready:normal"),   // LIST: ids, priority normal
                k("ready:low"),      // LIST: ids, priority low
                k("delayed:high"),   // ZSET: id -> due time ms
                k("delayed:normal"), // ZSET: id -> due time ms
                k("delayed:low"),    // ZSET: id -> due time ms
                k("jobs"),           // HASH: id -> envelope JSON
                k("lease"),          // ZSET: id -> lease deadline ms
                k("dead"),           // ZSET: id -> dead-lettered-at ms
                k("errors"),         // HASH: id -> last error / reason
                k("paused"),         // STRING: present while paused
                k("counters"),       // HASH: counter name -> count
                k("wake"),           // pub/sub channel (not a key)
                k("started"),        // HASH: id -> consumer tag ('tag:s' for a suspect)
                k("suspects"),       // LIST: ids reclaimed after their run had started
                k("deferrals"),      // HASH: id -> 'count first_ms cause=n:first ...' (deferral record)
                k("lease_tokens"),   // HASH: id -> fetch token, for extended leases only
                k("settings"),       // HASH: queue settings (dead_cap, runtime limits)
                k("unique:"),        // prefix (not a key): STRING per unique key -> job id, PX
            ],
        })
    }

    /// The queue's name (a partition's: its tag, `<queue>~<i>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name of the queue these keys belong to: the name, or a partition's queue.
    pub fn base_name(&self) -> &str {
        self.name.split('~').next().unwrap_or(&self.name)
    }

    /// True for the keys of a partition (not of a queue's own layout).
    pub fn is_partition(&self) -> bool {
        self.name.contains('~')
    }

    /// HASH: the queue's partition map (`count`, `tags`, `created_at`), present for a
    /// partitioned queue (`queue/partitions.rs`). Not in [`QueueKeys::all`].
    pub fn partitions(&self) -> String {
        format!("weir:{{{}}}:partitions", self.name)
    }

    /// HASH: id -> the job's last runs (start, end, worker, outcome, message), a JSON
    /// array, newest last (`scripts/lib.lua`'s run_history). Not in [`QueueKeys::all`]:
    /// the scripts that write, read or delete jobs take it with [`QueueKeys::done`] and
    /// [`QueueKeys::results`] as their last three keys (lib.lua's records).
    pub fn history(&self) -> String {
        format!("weir:{{{}}}:history", self.name)
    }

    /// ZSET: id -> completed-at ms, the completed jobs kept on request (`weir limits set
    /// --keep-completed`); their envelopes stay in [`QueueKeys::jobs`]. Not in
    /// [`QueueKeys::all`] (see [`QueueKeys::history`]).
    pub fn done(&self) -> String {
        format!("weir:{{{}}}:done", self.name)
    }

    /// HASH: id -> the result of a completed job kept on request (its handler's return
    /// value as text, at most 4096 bytes), dropped with the job. Not in
    /// [`QueueKeys::all`] (see [`QueueKeys::history`]).
    pub fn results(&self) -> String {
        format!("weir:{{{}}}:results", self.name)
    }

    /// Every key, in script order (see `scripts/lib.lua`).
    pub fn all(&self) -> &[String; KEY_COUNT] {
        &self.all
    }

    /// LIST of ready ids for `priority`.
    pub fn ready(&self, priority: crate::Priority) -> &str {
        &self.all[priority as usize]
    }

    /// HASH id -> envelope.
    pub fn jobs(&self) -> &str {
        &self.all[6]
    }

    /// ZSET id -> lease deadline ms.
    pub fn lease(&self) -> &str {
        &self.all[7]
    }

    /// ZSET batch name -> lease deadline ms: the live batch leases (`lib.lua`'s batch
    /// leases; docs/batch-leases.md).
    pub fn batches(&self) -> String {
        format!("{}:batches", self.lease())
    }

    /// LIST: the items (ids or inline envelopes) of the batch lease `name`.
    pub fn batch(&self, name: &str) -> String {
        format!("{}:batch:{name}", self.lease())
    }

    /// STRING: the last settle call of the consumer tagged `tag` and its reply, expiring
    /// (`settle.lua`'s call record: a retried call is applied once).
    pub fn settle_record(&self, tag: &str) -> String {
        format!("{}:settled:{tag}", self.lease())
    }

    /// ZSET id -> dead-lettered-at ms.
    pub fn dead(&self) -> &str {
        &self.all[8]
    }

    /// HASH counter name -> count.
    pub fn counters(&self) -> &str {
        &self.all[11]
    }

    /// Pub/sub channel that wakes idle consumers.
    pub fn wake_channel(&self) -> &str {
        &self.all[12]
    }

    /// Pub/sub channel (not a key) of change notices: `weir limits set`, `weir retry set`
    /// and `weir cron` publish on it (`notice.lua`) what they changed, and running consumers
    /// read that again at once instead of polling for it. Not in [`QueueKeys::all`]: only
    /// `notice` takes it, after the queue's keys.
    pub fn notices_channel(&self) -> String {
        format!("weir:{{{}}}:notices", self.name)
    }

    /// HASH id -> consumer tag: jobs whose run started while leased.
    pub fn started(&self) -> &str {
        &self.all[13]
    }

    /// LIST of suspects: ids reclaimed after their run had started.
    pub fn suspects(&self) -> &str {
        &self.all[14]
    }

    /// HASH id -> `count first_ms cause=count:first_ms ...`: deferral records (in all, then per cause).
    pub fn deferrals(&self) -> &str {
        &self.all[15]
    }

    /// HASH id -> fetch token, for leases that were extended.
    pub fn lease_tokens(&self) -> &str {
        &self.all[16]
    }

    /// ZSET worker id -> the time its entry expires, ms: the consumers registered on the
    /// queue (`weir workers`). Not in [`QueueKeys::all`]: only the worker scripts use it.
    pub fn workers(&self) -> String {
        format!("weir:{{{}}}:workers", self.name)
    }

    /// HASH of one consumer's record (host, pid, version, ...), expiring unless its
    /// heartbeat refreshes it.
    pub fn worker(&self, id: &str) -> String {
        format!("weir:{{{}}}:worker:{id}", self.name)
    }

    /// The key holding the queue's settings (HASH): the dead-letter cap and the runtime
    /// limits running consumers apply.
    pub fn settings(&self) -> String {
        self.all[17].clone()
    }

    /// STRING: the global rate's state (`weir limits set --global-rate`): the theoretical
    /// arrival time of its GCRA (ms) and the rate it was kept under, expiring once it is
    /// past. Not in [`QueueKeys::all`]: only `fetch` takes it, after the queue's keys.
    pub fn global_rate(&self) -> String {
        format!("weir:{{{}}}:global_rate", self.name)
    }

    /// The prefix (not a key) of the per-key limits' state: `<prefix>rate:<key>`,
    /// `<prefix>leased:<key>`, `<prefix>parked:<key>`, `<prefix>parked`,
    /// `<prefix>reserved`, `<prefix>throttled` (`fetch.lua`'s `key_limits` says what each
    /// holds). Only `fetch` takes it, after [`QueueKeys::global_rate`].
    pub fn key_limits_prefix(&self) -> String {
        format!("weir:{{{}}}:keylimit:", self.name)
    }

    /// ZSET key -> jobs its limits held back so far (the top [`THROTTLED_KEPT`] keys).
    pub fn key_throttled(&self) -> String {
        format!("{}throttled", self.key_limits_prefix())
    }

    /// HASH schedule name -> schedule JSON (`queue/cron.rs`). Not in [`QueueKeys::all`]:
    /// only the cron scripts take it, after the queue's keys.
    pub fn cron(&self) -> String {
        format!("weir:{{{}}}:cron", self.name)
    }

    /// HASH schedule name -> last fired tick, ms since the epoch. Not in
    /// [`QueueKeys::all`]: only the cron scripts take it, after [`QueueKeys::cron`].
    pub fn cron_fired(&self) -> String {
        format!("weir:{{{}}}:cron_fired", self.name)
    }

    /// LIST of samples of the queue's counters and sizes, newest first, one per period
    /// at most (`queue/samples.rs`; written by `scripts/samples.lua`, which says the
    /// sample's shape). Not in [`QueueKeys::all`]: only the samples script takes it.
    pub fn samples(&self) -> String {
        format!("weir:{{{}}}:samples", self.name)
    }

    /// STRING `1`, expiring (PX) a while after a producer's bulk chunk `token` landed: the
    /// chunk's transaction writes it with its jobs, and a retry of the chunk whose reply
    /// was lost finds it and does not send the jobs again (`producer/chunk.rs`). Not in
    /// [`QueueKeys::all`]: only the producer's plain transactions take it.
    pub fn chunk(&self, token: &str) -> String {
        format!("weir:{{{}}}:chunk:{token}", self.name)
    }

    /// The prefix of the unique-window keys (not a key itself): `<prefix><unique key>` is
    /// a STRING holding the id of the job that took the key, with an expiry (PX) at the end
    /// of its window. Scripts append the unique key, so these keys share the hash tag.
    pub fn unique_prefix(&self) -> &str {
        &self.all[18]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_hash_tag() {
        let k = QueueKeys::new("emails").unwrap();
        assert_eq!(k.all()[0], "weir:{emails}:ready:high");
        assert!(k.all().iter().all(|key| key.starts_with("weir:{emails}:")));
        assert_eq!(k.lease(), "weir:{emails}:lease");
        assert_eq!(k.chunk("t1"), "weir:{emails}:chunk:t1");
    }

    #[test]
    fn bad_names_are_refused() {
        for bad in ["", "a{b}", "sp ace", "quote\"", &"x".repeat(129)] {
            let err = QueueKeys::new(bad).unwrap_err().to_string();
            assert!(err.contains("queue name"), "{err}");
        }
        assert!(QueueKeys::new("a-b_c.d:e").is_ok());
        // Partitions: a queue name, then one or two numbers after `~`.
        assert_eq!(QueueKeys::new("q~3").unwrap().base_name(), "q");
        assert!(QueueKeys::new("q~3~17").unwrap().is_partition());
        for bad in ["q~", "q~x", "~3", "q~1~2~3", "q~-1", "a b~1"] {
            assert!(QueueKeys::new(bad).is_err(), "{bad}");
            assert!(validate_queue_name(bad).is_err(), "{bad}");
        }
        assert!(validate_queue_name("q~3").is_err(), "a queue name has no ~");
    }

    #[test]
    fn tokens_take_exactly_their_alphabet() {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-";
        for b in 0..=255u8 {
            let one = [b, b'x'];
            let text = String::from_utf8_lossy(&one);
            let ok = validate_token("job id", &text, 8).is_ok();
            assert_eq!(ok, alphabet.contains(&b), "byte {b:#04x}");
        }
        assert!(validate_token("job id", "é", 8).is_err(), "multi-byte characters");
        assert!(validate_token("job id", "", 8).is_err());
        assert!(validate_token("job id", "abcdefghi", 8).is_err(), "over max");
        assert!(validate_token("job id", "abcdefgh", 8).is_ok());
    }

    #[test]
    fn queue_names_come_back_from_keys() {
        assert_eq!(queue_of_key("weir:{emails}:ready:high"), Some("emails"));
        assert_eq!(queue_of_key("weir:{a:b}:jobs"), Some("a:b"));
        assert_eq!(queue_of_key(&QueueKeys::new("w").unwrap().worker("x")), Some("w"));
        for other in ["weir:queues", "weir:{}:jobs", "other:{q}:jobs", "weir:{q"] {
            assert_eq!(queue_of_key(other), None, "{other}");
        }
    }
}
