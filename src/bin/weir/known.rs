//! The typo guard of commands that act on one queue: a queue never seen in this Redis
//! (`weir::queue::admin::Queues::seen`) gets a warning from commands that read it, and is refused
//! by commands that change it unless `--create` is given; both name the nearest known
//! queue.

use crate::Common;
use weir::{Conn, Queues};

/// What a command does to its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Reads it: an unseen queue gets a warning on standard error.
    Read,
    /// Changes it: an unseen queue is refused without `--create` (exit 2); with it, the
    /// queue is registered so `weir queues` lists it.
    Write,
}

/// Checks `common.queue` for `access`; a write with `--create` registers it.
pub(crate) async fn check(common: &Common, conn: &Conn, access: Access) -> crate::error::Result<()> {
    let queues = Queues::new(conn.clone());
    let name = &common.queue;
    if queues.seen(name).await? {
        return Ok(());
    }
    let hint = match queues.nearest(name).await? {
        Some(n) => format!("; did you mean {n}?"),
        None => ".".to_owned(),
    };
    let what = format!(
        "queue {name} has never been seen in this Redis (no jobs, consumers or schedules, not in `weir queues`){hint}"
    );
    match access {
        Access::Read => eprintln!("warning: {what}"),
        Access::Write if common.create => {
            queues.register(name).await?;
        }
        Access::Write => {
            return Err(crate::usage(format!("{what} Pass --create to act on it anyway.")));
        }
    }
    Ok(())
}

impl Common {
    /// A connection to Redis, with the queue checked for `access` (see [`check`]).
    pub(crate) async fn checked_conn(&self, access: Access) -> crate::error::Result<Conn> {
        let conn = self.redis()?.connect().await?;
        check(self, &conn, access).await?;
        Ok(conn)
    }

    /// An admin handle on the queue, checked for `access` (see [`check`]).
    pub(crate) async fn checked_queue(&self, access: Access) -> crate::error::Result<weir::Queue> {
        Ok(weir::Queue::new(self.checked_conn(access).await?, &self.queue)?)
    }
}
