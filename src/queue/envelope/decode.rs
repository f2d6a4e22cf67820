//! Decoding an envelope as the consumer fetched it: [`decode`], with its checks (the size
//! limit, the id it is stored under, the payload's nesting) and [`DecodeError`], the
//! reason stored in the dead-letter queue when one fails.

use super::{Job, MAX_PAYLOAD_DEPTH, header, time_of_id};

/// Why an envelope was refused by the consumer (the reason stored in the dead-letter queue).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Over the size limit.
    #[error("envelope of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Envelope size.
        size: usize,
        /// Configured limit.
        limit: usize,
    },
    /// Not a valid envelope.
    #[error("undecodable envelope: {0}")]
    Invalid(String),
    /// The envelope's id does not match the id it is stored under.
    #[error("envelope id {found:?} does not match its key {expected:?}")]
    IdMismatch {
        /// Id the job is stored under.
        expected: String,
        /// Id inside the envelope.
        found: String,
    },
}

/// Decodes an envelope stored under `id`, refusing it over `limit` bytes. An inline job
/// (stored as its envelope, without an id apart: its `id` here is the envelope itself,
/// which opens with `{`, as no id does) has nothing to check its id against.
pub fn decode(id: &str, bytes: &[u8], limit: usize) -> Result<Job, DecodeError> {
    within(bytes.len(), limit)?;
    let job = read(
        bytes,
        || header::canonical(bytes),
        || serde_json::from_slice(bytes),
    )?;
    check_id(id, job)
}

/// [`decode`] of an inline job's envelope, which is its name (text already).
pub(crate) fn decode_inline(text: &str, limit: usize) -> Result<Job, DecodeError> {
    within(text.len(), limit)?;
    let job = read(
        text.as_bytes(),
        || header::canonical_text(text),
        || serde_json::from_str(text),
    )?;
    check_depth(job.payload.get())?;
    Ok(job)
}

fn within(size: usize, limit: usize) -> Result<(), DecodeError> {
    if size > limit {
        return Err(DecodeError::TooLarge { size, limit });
    }
    Ok(())
}

/// The job in `bytes` by the hand-written header read, or else as serde_json reads it
/// (a compact envelope that names a field its form implies is refused first); without an
/// enqueue time of its own (a compact envelope), the one its id holds, if any.
fn read(
    bytes: &[u8],
    canonical: impl FnOnce() -> Option<Job>,
    serde: impl FnOnce() -> serde_json::Result<Job>,
) -> Result<Job, DecodeError> {
    let mut job = match canonical() {
        Some(job) => job,
        None => {
            implied_fields_unnamed(bytes)?;
            serde().map_err(|e| DecodeError::Invalid(e.to_string()))?
        }
    };
    if job.enqueued_at_ms == 0 {
        job.enqueued_at_ms = time_of_id(&job.id).unwrap_or(0);
    }
    Ok(job)
}

/// The fields a compact envelope (one that opens with its id) implies, as its header would
/// name them.
const IMPLIED: [&[u8]; 4] = [
    br#","attempt":"#,
    br#","max_attempts":"#,
    br#","priority":"#,
    br#","enqueued_at":"#,
];

/// Refuses a compact envelope whose header names a field its form implies: the scripts
/// read the implied values (attempt 0, 5 attempts, normal priority), serde_json would
/// read the named ones, and the two would disagree on the job's attempts and list. The
/// enqueue script refuses such an envelope by the same test (`compact_ok` in
/// `enqueue.lua`): the header is what comes before the first `,"payload":`, whose quotes
/// cannot stand unescaped inside a string. Only a writer that pushes envelopes itself
/// can store one.
fn implied_fields_unnamed(bytes: &[u8]) -> Result<(), DecodeError> {
    if !bytes.starts_with(br#"{"id":"#) {
        return Ok(());
    }
    let head = memchr::memmem::find(bytes, br#","payload":"#).map_or(bytes, |at| &bytes[..at + 1]);
    match IMPLIED.iter().find(|f| memchr::memmem::find(head, f).is_some()) {
        None => Ok(()),
        Some(f) => Err(DecodeError::Invalid(format!(
            "a compact envelope (it opens with its id) names {}, a field its form implies: write the full form",
            String::from_utf8_lossy(&f[2..f.len() - 2])
        ))),
    }
}

/// The raw payload skips serde's recursion limit; a payload nested deeper than
/// [`MAX_PAYLOAD_DEPTH`] would fail in the handler's own parse, or overflow the stack of a
/// parser without a limit, which aborts the whole process. At most one pass over the bytes,
/// most of it vectorized: a large payload is mostly strings, which this skips to their
/// closing quotes (a byte-at-a-time walk took half a consumer's CPU on 900 KiB payloads).
fn check_depth(payload: &str) -> Result<(), DecodeError> {
    let bytes = payload.as_bytes();
    // Valid JSON (serde_json has checked it) closes what it opens: nesting deeper than
    // the limit takes more than twice as many bytes, and more openers than the limit
    // wherever they stand.
    if bytes.len() <= 2 * MAX_PAYLOAD_DEPTH
        || memchr::memchr2_iter(b'[', b'{', bytes)
            .take(MAX_PAYLOAD_DEPTH + 1)
            .count()
            <= MAX_PAYLOAD_DEPTH
    {
        return Ok(());
    }
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => {
                // to the closing quote, over escaped characters
                i += 1;
                loop {
                    let Some(j) = bytes.get(i..).and_then(|rest| memchr::memchr2(b'"', b'\\', rest)) else {
                        return Ok(());
                    };
                    if bytes[i + j] == b'"' {
                        i += j;
                        break;
                    }
                    i += j + 2;
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_PAYLOAD_DEPTH {
                    return Err(DecodeError::Invalid(format!(
                        "payload nests deeper than {MAX_PAYLOAD_DEPTH} levels"
                    )));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

fn check_id(id: &str, job: Job) -> Result<Job, DecodeError> {
    check_depth(job.payload.get())?;
    if job.id != id && !id.starts_with('{') {
        return Err(DecodeError::IdMismatch {
            expected: id.to_owned(),
            found: job.id,
        });
    }
    Ok(job)
}
