//! The frames a consumer process writes on its stdout for the parent: little-endian,
//! one tag byte each. A job is reported before it is acked (see `child`), and a pipe
//! keeps what was written even if the writer is killed right after, so the parent sees
//! every job a killed process acked.

use std::io::{self, Read};

/// A job index that is not the harness's (the id did not parse).
pub(crate) const FOREIGN: u64 = u64::MAX;

/// One frame.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Frame {
    /// Jobs processed: (index, end-to-end latency µs).
    Jobs(Vec<(u64, u64)>),
    /// Failed handler calls since the last frame.
    Errors(u64),
    /// Gauges: limit, jobs running (mean and peak since the last status; see `running`).
    Status {
        limit: u64,
        in_flight: f64,
        in_flight_max: u64,
    },
    /// The consumer's final report: acked, retried, dead, lost leases, released.
    Report([u64; 5]),
    /// The consumer is up (`weir::Handle::ready`).
    Ready,
}

const JOBS: u8 = b'J';
const ERRORS: u8 = b'E';
const STATUS: u8 = b'S';
const REPORT: u8 = b'R';
const READY: u8 = b'U';

impl Frame {
    /// Appends the encoded frame to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Frame::Jobs(jobs) => {
                out.push(JOBS);
                out.extend_from_slice(&(jobs.len() as u32).to_le_bytes());
                for &(i, lat) in jobs {
                    out.extend_from_slice(&i.to_le_bytes());
                    out.extend_from_slice(&lat.to_le_bytes());
                }
            }
            Frame::Errors(n) => {
                out.push(ERRORS);
                out.extend_from_slice(&n.to_le_bytes());
            }
            Frame::Status {
                limit,
                in_flight,
                in_flight_max,
            } => {
                out.push(STATUS);
                out.extend_from_slice(&limit.to_le_bytes());
                out.extend_from_slice(&in_flight.to_bits().to_le_bytes());
                out.extend_from_slice(&in_flight_max.to_le_bytes());
            }
            Frame::Report(r) => {
                out.push(REPORT);
                for v in r {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            Frame::Ready => out.push(READY),
        }
    }

    /// Reads one frame; `Ok(None)` at a clean end of stream.
    pub(crate) fn read(r: &mut impl Read) -> io::Result<Option<Frame>> {
        let mut tag = [0u8; 1];
        match r.read_exact(&mut tag) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let frame = match tag[0] {
            JOBS => {
                let mut head = [0u8; 4];
                r.read_exact(&mut head)?;
                let n = u32::from_le_bytes(head) as usize;
                let mut body = vec![0u8; n * 16];
                r.read_exact(&mut body)?;
                let jobs = body
                    .chunks_exact(16)
                    .map(|c| (le(&c[..8]), le(&c[8..])))
                    .collect();
                Frame::Jobs(jobs)
            }
            ERRORS => Frame::Errors(read_u64(r)?),
            STATUS => Frame::Status {
                limit: read_u64(r)?,
                in_flight: f64::from_bits(read_u64(r)?),
                in_flight_max: read_u64(r)?,
            },
            REPORT => {
                let mut v = [0u64; 5];
                for x in &mut v {
                    *x = read_u64(r)?;
                }
                Frame::Report(v)
            }
            READY => Frame::Ready,
            t => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("unknown frame tag {t:#04x} from a consumer process"),
                ));
            }
        };
        Ok(Some(frame))
    }
}

fn le(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    u64::from_le_bytes(a)
}

fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let frames = vec![
            Frame::Jobs(vec![(0, 5), (123_456, 9_999), (FOREIGN, 1)]),
            Frame::Jobs(vec![]),
            Frame::Errors(3),
            Frame::Status {
                limit: 64,
                in_flight: 17.25,
                in_flight_max: 60,
            },
            Frame::Ready,
            Frame::Report([1, 2, 3, 4, 5]),
        ];
        let mut buf = Vec::new();
        for f in &frames {
            f.encode(&mut buf);
        }
        let mut r = &buf[..];
        let mut back = Vec::new();
        while let Some(f) = Frame::read(&mut r).unwrap() {
            back.push(f);
        }
        assert_eq!(back, frames);
    }
}
