//! Every spec in the documentation runs: each ```mma block of README.md and docs/*.md must
//! check (and each ```mma-fail block must be rejected), so the examples cannot rot.

use std::path::Path;

fn blocks(text: &str, tag: &str) -> Vec<(usize, String)> {
    let mut out = vec![];
    let mut lines = text.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        if line.trim() == format!("```{tag}") {
            let body: Vec<&str> = lines
                .by_ref()
                .map(|(_, l)| l)
                .take_while(|l| l.trim() != "```")
                .collect();
            out.push((n + 1, body.join("\n")));
        }
    }
    out
}

#[test]
fn documented_specs_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    let mut checked = 0;
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for (line, spec) in blocks(&text, "mma") {
            let name = format!("{}:{line}", f.display());
            match mmac_compiler::compile(&name, &spec) {
                Ok(v) => {
                    // and every instruction runs on zeros
                    for checked in v.instructions() {
                        let i = checked.instruction();
                        let z = vec![0u64; i.k()];
                        let sc = vec![0u64; i.scale_count()];
                        let ops = mmac_compiler::engine::Operands {
                            c: 0,
                            a: &z,
                            b: &z,
                            sa: &sc,
                            sb: &sc,
                        };
                        mmac_compiler::interp::run(checked, &ops).unwrap();
                    }
                }
                Err(d) => panic!("example at {name} does not check:\n{}", d.render_plain(100)),
            }
            checked += 1;
        }
        for (line, spec) in blocks(&text, "mma-fail") {
            let name = format!("{}:{line}", f.display());
            assert!(
                mmac_compiler::compile(&name, &spec).is_err(),
                "example at {name} should be rejected"
            );
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} documented examples found");
}
