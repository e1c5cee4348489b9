//! Internal steps that the test crates drive directly (the e2e tests, the server's unit tests):
//! one probe step, one admission, one recorded failure, in the caller's transaction, so a test
//! can step the circuit instead of waiting on the worker.
//!
//! Only with the `testing` feature, which the test crates enable and production builds do not.
//! For tests only: not part of the crate's API, and may change without notice.

pub use crate::circuit::gate::{admit_and_begin, lock_gate, GateRow};
pub use crate::circuit::probe::{probe_key, probe_step};
pub use crate::circuit::probe_result::{probe_failed, probe_succeeded, ProbeSuccess};
pub use crate::circuit::transitions::{open_from_closed, record_failure};
pub use crate::hosts::config::DEFAULT_HOST_MAX_IN_FLIGHT;
pub use crate::hosts::results::record_result;
