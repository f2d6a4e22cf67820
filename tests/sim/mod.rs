//! Deterministic simulations of the adaptive limiter: the real `Limit`, window and AIMD
//! rule against a simulated downstream, under paused tokio time.
#![allow(dead_code)]

pub(crate) mod downstream;
pub(crate) mod netflix;
pub(crate) mod run;
pub(crate) mod scenarios;
pub(crate) mod stats;
