//! Measurement input for the planner (not a test): builds one file and one
//! patch, parses and plans it once, and prints what it did. CPU time is
//! measured from outside (`scripts/patch-plan-cost.sh` runs this under
//! `/usr/bin/time`), so the same program measures any version of the crate
//! that has `parse` and `plan_update`.
//!
//! ```text
//! cargo run -p serverfs-patch --example plan_cost -- <workload> <patch bytes> [file bytes]
//! ```
//!
//! Workloads:
//! - `repeated`: a file of `x` lines and one hunk of `-x` lines ending in a
//!   `-y` the file does not have: a line-by-line scan compares the block at
//!   every start, under every pass (the case the issue measured).
//! - `spread`: a file of distinct code-like lines and hunks spread over it
//!   in file order (one context line, one line replaced, one context line),
//!   with the `+` lines padded to reach the patch size.
//! - `twice`: the planner's worst case. The file is one `a`/`b` sequence
//!   in which every run of 17 lines is unique, twice, around a `MARK`
//!   line; the hunks are consecutive runs of 17 lines after `MARK`, each
//!   occurring twice in the file, so each is searched for in the rest of
//!   the file.

use std::io::Write;

use serverfs_patch::{Operation, PatchLimits, parse, plan_update};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: plan_cost <repeated|spread|twice> <patch bytes> [file bytes]";
    let workload = args.get(1).expect(usage);
    let patch_bytes: usize = args.get(2).and_then(|a| a.parse().ok()).expect(usage);
    let file_bytes: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(256 * 1024);

    let (file, patch) = match workload.as_str() {
        "repeated" => repeated(file_bytes, patch_bytes),
        "spread" => spread(file_bytes, patch_bytes),
        "twice" => twice(file_bytes, patch_bytes),
        _ => panic!("{usage}"),
    };
    let limits = PatchLimits { max_patch_bytes: usize::MAX, ..PatchLimits::default() };
    let parsed = parse(&patch, &limits).expect("the generated patch parses");
    let Some(Operation::Update { hunks, .. }) = parsed.operations.first() else {
        panic!("one update expected")
    };
    let outcome = match plan_update(file.as_bytes(), hunks, "f.txt") {
        Ok(planned) => format!("planned, {} bytes", planned.bytes.len()),
        Err(e) => e.code().as_str().to_owned(),
    };
    let report = format!(
        "{workload}: file {} bytes, patch {} bytes, {} hunks: {outcome}\n",
        file.len(),
        patch.len(),
        hunks.len()
    );
    std::io::stdout().write_all(report.as_bytes()).expect("stdout");
}

fn repeated(file_bytes: usize, patch_bytes: usize) -> (String, String) {
    let file_lines = file_bytes / 2;
    let file = "x\n".repeat(file_lines);
    // At most half the file's lines; past that, lines get trailing spaces
    // (equal to `x` from the trailing-whitespace pass on) to reach the size.
    let lines = (patch_bytes / 3).clamp(1, file_lines / 2);
    let pad = " ".repeat((patch_bytes / lines).saturating_sub(3));
    let body: String = (0..lines).map(|_| format!("-x{pad}\n")).collect();
    let patch = format!("*** Begin Patch\n*** Update File: f.txt\n@@\n{body}-y\n*** End Patch\n");
    (file, patch)
}

fn spread(file_bytes: usize, patch_bytes: usize) -> (String, String) {
    let line = |i: usize| format!("    let value_{i:06} = compute({i:06}, \"abcdefgh\");");
    let per_line = line(0).len() + 1;
    let n = file_bytes / per_line;
    let file: String = (0..n).map(|i| line(i) + "\n").collect();
    // Three file lines per hunk at most.
    let per_hunk = 4 * per_line + 10;
    let hunks = (patch_bytes / per_hunk).clamp(1, n / 3);
    let stride = n / hunks;
    let pad = (patch_bytes / hunks).saturating_sub(per_hunk);
    let mut patch = String::from("*** Begin Patch\n*** Update File: f.txt\n");
    for h in 0..hunks {
        let a = h * stride;
        patch.push_str(&format!(
            "@@\n {}\n-{}\n+{}{}\n {}\n",
            line(a),
            line(a + 1),
            line(a + 1),
            " //".repeat(pad / 3),
            line(a + 2)
        ));
    }
    patch.push_str("*** End Patch\n");
    (file, patch)
}

fn twice(file_bytes: usize, patch_bytes: usize) -> (String, String) {
    const WINDOW: usize = 17;
    // An LFSR of period 2^17 - 1 (x^17 + x^14 + 1): runs of 17 are unique.
    let mut state: u32 = 1;
    let half: Vec<&str> = (0..(file_bytes / 4).saturating_sub(2))
        .map(|_| {
            let bit = state & 1;
            let feedback = (state ^ (state >> 3)) & 1;
            state = (state >> 1) | (feedback << (WINDOW - 1));
            if bit == 1 { "b" } else { "a" }
        })
        .collect();
    let text: String = half.iter().map(|l| format!("{l}\n")).collect();
    let file = format!("{text}MARK\n{text}");
    let per_hunk = 3 + (WINDOW - 1) * 3 + 6;
    let hunks = (patch_bytes / per_hunk).clamp(1, half.len() / WINDOW);
    let pad = "x".repeat((patch_bytes / hunks).saturating_sub(per_hunk));
    let mut patch = String::from("*** Begin Patch\n*** Update File: f.txt\n");
    for (k, window) in half.chunks_exact(WINDOW).take(hunks).enumerate() {
        patch.push_str(if k == 0 { "@@ MARK\n" } else { "@@\n" });
        for line in &window[..WINDOW - 1] {
            patch.push_str(&format!(" {line}\n"));
        }
        patch.push_str(&format!("-{}\n+{}{pad}\n", window[WINDOW - 1], window[WINDOW - 1]));
    }
    patch.push_str("*** End Patch\n");
    (file, patch)
}
