//! The IR printer round-trips: every distinct arithmetic of the spec library, printed as a
//! standalone spec (`mmac show`), checks again to the same IR.

use mmac_compiler::ir::{Instruction, Pipeline};
use std::path::Path;

/// The IR with the names of intermediate sums erased (the printer renames them).
fn normalized(p: &Pipeline) -> String {
    let mut p = p.clone();
    if let Pipeline::Fused(f) = &mut p {
        for n in &mut f.nodes {
            n.name = None;
        }
    }
    format!("{p:?}")
}

fn key(i: &Instruction) -> String {
    format!(
        "{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
        normalized(&i.pipeline),
        i.a,
        i.b,
        i.c,
        i.d,
        i.shape,
        i.scale
    )
}

#[test]
fn printed_instructions_check_to_the_same_ir() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seen = std::collections::HashSet::new();
    let mut printed = 0;
    for dir in ["specs", "specs/examples", "compiler/tests/data"] {
        let Ok(rd) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in rd {
            let path = e.unwrap().path();
            if path.extension().is_none_or(|x| x != "mma") {
                continue;
            }
            let spec = mmac_runtime::specs::load_file(&path)
                .unwrap_or_else(|e| panic!("{}", e.render(false)))
                .spec;
            for inst in &spec.instructions {
                if !seen.insert(format!(
                    "{:?}|{:?}|{:?}|{:?}|{:?}|{}",
                    inst.pipeline,
                    inst.a,
                    inst.b,
                    inst.c,
                    inst.d,
                    inst.scale.is_some()
                )) {
                    continue;
                }
                let text = mmac_compiler::printer::print_instruction(&spec.arch, inst);
                let again = mmac_compiler::compile("printed.mma", &text).unwrap_or_else(|d| {
                    panic!(
                        "printed spec does not check:\n{text}\n{}",
                        d.render_plain(100)
                    )
                });
                assert_eq!(again.instructions.len(), 1);
                assert_eq!(
                    key(&again.instructions[0]),
                    key(inst),
                    "round trip changed the IR of {}:\n{text}",
                    inst.name
                );
                printed += 1;
            }
        }
    }
    assert!(printed > 100, "only {printed} instructions printed");
}
