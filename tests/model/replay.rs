//! Settle calls as a consumer makes them: numbered, each with the consumer's call record
//! (`settle.lua`'s 'C'), so that one sent again after its reply was lost is applied once.
//! `Op::Replay` sends the last call again, any ops of other kinds later: it must answer
//! as the first try did and change nothing.

use crate::common::snapshot;
use crate::run::{HOUR_MS, World};
use weir::queue::scripts::{self, BatchAck, CallRecord, RunHistory, Settle, Settled, StartMarks};

/// The consumer's name in its call records.
const CALLS: &str = "c1.model";

/// The last settle call made, as sent, and its reply.
pub(crate) struct LastCall {
    call: u64,
    batches: Vec<BatchAck>,
    items: Vec<Settle>,
    started: Vec<(String, u64)>,
    ended: Vec<String>,
    tag: String,
    history: Option<RunHistory<'static>>,
    reply: Settled,
}

impl LastCall {
    async fn send(&self, w: &World) -> weir::Result<Settled> {
        let marks = StartMarks {
            tag: &self.tag,
            started: &self.started,
            ended: &self.ended,
        };
        let record = CallRecord {
            tag: CALLS,
            call: self.call,
            ttl_ms: HOUR_MS,
        };
        let (batches, items) = (&self.batches, &self.items);
        let keys = &w.ctx.keys;
        scripts::settle_call(
            &mut w.ctx.c(),
            keys,
            batches,
            items,
            marks,
            self.history,
            Some(record),
        )
        .await
    }
}

impl World {
    /// One settle call, numbered and recorded as a consumer's are.
    pub(crate) async fn settle(
        &mut self,
        batches: &[BatchAck],
        items: &[Settle],
        marks: StartMarks<'_>,
        history: Option<RunHistory<'static>>,
    ) -> Result<Settled, String> {
        let mut last = LastCall {
            call: self.last_call.as_ref().map_or(1, |l| l.call + 1),
            batches: batches.to_vec(),
            items: items.to_vec(),
            started: marks.started.to_vec(),
            ended: marks.ended.to_vec(),
            tag: marks.tag.to_string(),
            history,
            reply: Settled::default(),
        };
        let reply = last.send(self).await.map_err(|e| e.to_string())?;
        last.reply = reply.clone();
        self.last_call = Some(last);
        Ok(reply)
    }

    /// The last settle call sent again: the first try's reply, and the queue unchanged.
    pub(crate) async fn replay(&mut self) -> Result<(), String> {
        let Some(last) = &self.last_call else {
            return Ok(());
        };
        let before = snapshot(&mut self.ctx.c(), &self.ctx.keys).await;
        let again = last.send(self).await.map_err(|e| e.to_string())?;
        if again != last.reply {
            return Err(format!(
                "settle call {} sent again answered {again:?}, not {:?}",
                last.call, last.reply
            ));
        }
        let after = snapshot(&mut self.ctx.c(), &self.ctx.keys).await;
        if after != before {
            return Err(format!(
                "settle call {} sent again changed the queue:\nbefore {before:?}\nafter  {after:?}",
                last.call
            ));
        }
        Ok(())
    }
}
