//! mmac-runtime: runs checked specs on data: conformance vector files ([`vectors`],
//! [`conformance`]), spec loading from files and folders ([`specs`]), listings
//! ([`listing`]), feature probes ([`probes`]), `.npy` matrices and GEMMs ([`matrix`],
//! [`gemm`]) and operand values typed by hand ([`values`]).

pub mod accuracy;
pub mod blackbox;
pub mod conformance;
pub mod corners;
pub mod datapath;
pub mod diff;
pub mod gemm;
pub mod generate;
pub mod infer;
pub mod inputs;
pub mod listing;
pub mod matrix;
pub mod mutants;
pub mod observability;
pub mod output;
pub mod probes;
pub mod specs;
pub mod values;
pub mod vectors;
pub mod witness;
