//! mmac-runtime: runs checked specs on data: conformance vector files ([`vectors`],
//! [`conformance`]) and spec loading from files and folders ([`specs`]).

pub mod conformance;
pub mod specs;
pub mod vectors;
