//! The IR printer round-trips: every distinct arithmetic of the spec library, printed as a
//! standalone spec (`mmac show`), checks again to the same arithmetic and shape (the
//! printer renames intermediate sums, which are provenance, not arithmetic).

use std::path::Path;

#[test]
fn printed_instructions_check_to_the_same_ir() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
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
                .unwrap_or_else(|e| panic!("{}", e.render(false)));
            for (checked, _) in spec.distinct() {
                let inst = checked.instruction();
                let text = mmac_compiler::printer::print_instruction(&spec.spec().arch, checked);
                let again = mmac_compiler::compile("printed.mma", &text).unwrap_or_else(|d| {
                    panic!(
                        "printed spec does not check:\n{text}\n{}",
                        d.render_plain(100)
                    )
                });
                // a composed instruction is printed with the instructions it runs
                let index = again
                    .position(&inst.name)
                    .unwrap_or_else(|| panic!("{} is not printed:\n{text}", inst.name));
                let back = again.get(index).instruction();
                assert_eq!(
                    (&back.arithmetic, back.shape()),
                    (&inst.arithmetic, inst.shape()),
                    "round trip changed the IR of {}:\n{text}",
                    inst.name
                );
                // and the validator sizes the printed spec's sums alike
                assert_eq!(again.get(index).info(), checked.info(), "{}", inst.name);
                printed += 1;
            }
        }
    }
    assert!(printed > 100, "only {printed} instructions printed");
}
