//! Deterministic simulations of the adaptive limiter: the real `Limit`, window and AIMD
//! rule against a simulated downstream, under paused tokio time.
#![allow(dead_code)]

pub mod downstream;
pub mod netflix;
pub mod run;
pub mod scenarios;
pub mod stats;
