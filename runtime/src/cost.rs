//! What a design costs (`mmac show --cost`, `mmac report --cost`): an instruction's
//! Verilog module (`mmac_compiler::rtl`) synthesized by Yosys to generic gates
//! (`synth -flatten`), its cells by kind and Yosys's CMOS transistor estimate, and a
//! gate-equivalent total (transistors / 4, a two-input NAND being four). Generic-gate
//! estimates for comparing designs with each other ("F = 25 against F = 20"), not silicon
//! area.

use mmac_compiler::Checked;
use mmac_compiler::rtl;
use serde::Serialize;
use std::process::Command;

/// Yosys's count of a synthesized module.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Cost {
    /// Cells by Yosys's generic kind (`$_AND_`, `$_MUX_`, ...), sorted by kind.
    pub cells_by_kind: Vec<(String, u64)>,
    pub cells: u64,
    /// Yosys's `stat -tech cmos` estimate.
    pub transistors: u64,
    /// Two-input NAND equivalents: transistors / 4.
    pub gate_equivalents: u64,
}

impl Cost {
    /// One line: `6186 cells, 47456 transistors, 11864 GE`.
    pub fn summary(&self) -> String {
        format!(
            "{} cells, {} transistors, {} gate equivalents",
            self.cells, self.transistors, self.gate_equivalents
        )
    }
}

/// Synthesize an instruction's module with Yosys (`yosys` on PATH, or $MMAC_YOSYS), for
/// an instruction the Verilog back end lowers ([`rtl::lowerable`]).
pub fn synthesize(inst: Checked) -> Result<Cost, String> {
    rtl::lowerable(inst)?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let module = "mmac_cost";
    std::fs::write(dir.path().join("design.v"), rtl::verilog(inst, module))
        .map_err(|e| e.to_string())?;
    let yosys = std::env::var("MMAC_YOSYS").unwrap_or_else(|_| "yosys".into());
    let run = Command::new(&yosys)
        .current_dir(dir.path())
        .args([
            "-q",
            "-p",
            &format!(
                "read_verilog design.v; synth -flatten -top {module}; tee -q -o stat.json stat -json -tech cmos"
            ),
        ])
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "{yosys} is not installed (Debian, Ubuntu: apt-get install yosys; or set MMAC_YOSYS)"
            ),
            _ => format!("cannot run {yosys}: {e}"),
        })?;
    if !run.status.success() {
        return Err(format!(
            "yosys failed: {}",
            String::from_utf8_lossy(&run.stderr).trim()
        ));
    }
    let text = std::fs::read_to_string(dir.path().join("stat.json")).map_err(|e| e.to_string())?;
    parse(&text, module)
}

/// Yosys's `stat -json -tech cmos` output for `module`.
fn parse(text: &str, module: &str) -> Result<Cost, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("yosys's statistics: {e}"))?;
    let m = &v["modules"][format!("\\{module}")];
    let number = |x: &serde_json::Value| -> Option<u64> {
        x.as_u64()
            .or_else(|| x.as_str().and_then(|s| s.parse().ok()))
    };
    let cells = number(&m["num_cells"]).ok_or("no cell count in yosys's statistics")?;
    let transistors = number(&m["estimated_num_transistors"])
        .ok_or("no transistor estimate in yosys's statistics")?;
    let mut cells_by_kind: Vec<(String, u64)> = m["num_cells_by_type"]
        .as_object()
        .map(|o| {
            o.iter()
                .filter_map(|(k, x)| number(x).map(|n| (k.clone(), n)))
                .collect()
        })
        .unwrap_or_default();
    cells_by_kind.sort();
    Ok(Cost {
        cells_by_kind,
        cells,
        transistors,
        gate_equivalents: transistors / 4,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yosys_statistics_are_read_with_counts_as_numbers_or_strings() {
        let text = r#"{"modules": {"\\m": {"num_cells": 7, "num_cells_by_type": {"$_XOR_": 3, "$_AND_": "4"},
            "estimated_num_transistors": "40"}}}"#;
        let c = parse(text, "m").unwrap();
        assert_eq!(c.cells, 7);
        assert_eq!(c.transistors, 40);
        assert_eq!(c.gate_equivalents, 10);
        assert_eq!(
            c.cells_by_kind,
            vec![("$_AND_".to_string(), 4), ("$_XOR_".to_string(), 3)]
        );
        assert!(parse(r#"{"modules": {}}"#, "m").is_err());
    }
}
