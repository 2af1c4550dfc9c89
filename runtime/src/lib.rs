//! mmac-runtime: runs checked specs on data. Every module, by what it serves:
//! - loading and listing: [`specs`] (files and folders), [`listing`] (`mmac list`);
//! - conformance: [`vectors`] (`.mmv` files), [`conformance`] (running them);
//! - operands and results: [`values`] (typed by hand), [`inputs`] (built from exact
//!   values), [`matrix`] (`.npy`), [`output`] (atomic `-o` files), [`gemm`] (whole
//!   instructions and GEMMs);
//! - corner cases and the questions asked with them: [`corners`] (the one catalogue),
//!   [`probes`] (`mmac probe`), [`mutants`] (single-parameter neighbours),
//!   [`observability`] (proofs of agreement), [`witness`] (inputs on which two
//!   instructions differ), [`generate`] (`mmac gen`), [`diff`] (`mmac diff`), [`prove`]
//!   (equivalence proofs with Yosys and ABC, `mmac prove`);
//! - warps: [`fragments`] (fragment layouts as data, `mmac layout`, warp-level mma on
//!   register images);
//! - measurement and explanation: [`accuracy`] (`mmac report`), [`datapath`] (`mmac show`),
//!   [`cost`] (Yosys's gate count of an instruction's Verilog, `--cost`);
//! - black boxes: [`blackbox`] (the protocol, in-process and piped boxes), [`infer`]
//!   (`mmac infer`).

pub mod accuracy;
pub mod blackbox;
pub mod conformance;
pub mod corners;
pub mod cost;
pub mod datapath;
pub mod diff;
pub mod fragments;
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
pub mod prove;
pub mod sparse;
pub mod specs;
pub mod values;
pub mod vectors;
pub mod witness;
