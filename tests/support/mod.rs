pub mod spec_gen;
