//! The properties the fuzz targets check, one module per target of
//! `fuzz/` (cargo-fuzz, nightly): each target is one call to its module's
//! `check`, so that long fuzz runs (by hand) and `cargo test` (every CI run,
//! stable) check the same thing. The tests below replay every committed
//! seed, `fuzz/seeds/<target>/`, and the local corpus a fuzz run left in
//! `fuzz/corpus/<target>/`, if any.
//!
//! A crash a fuzz run finds is fixed with its input added to the seeds: from
//! then on every `cargo test` runs it.

use arbitrary::{Arbitrary, Unstructured};

pub mod patch_parse;
pub mod patch_plan;
pub mod policy;
pub mod rel_path;
pub mod uri;

/// The input libFuzzer's `fuzz_target!(|x: T| …)` makes of `data` (it skips
/// inputs shorter than `T`'s size hint); `None` where it runs nothing.
fn input<'a, T: Arbitrary<'a>>(data: &'a [u8]) -> Option<T> {
    if data.len() < T::size_hint(0).0 {
        return None;
    }
    T::arbitrary_take_rest(Unstructured::new(data)).ok()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Runs `check` on every file of the target's seeds and corpus; returns
    /// how many seeds there were.
    fn replay(target: &str, check: fn(&[u8])) -> usize {
        let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
        let mut seeds = 0;
        for dir in ["seeds", "corpus"] {
            let Ok(entries) = std::fs::read_dir(fuzz.join(dir).join(target)) else { continue };
            for entry in entries {
                let path = entry.unwrap().path();
                let data = std::fs::read(&path).unwrap();
                if let Err(panic) = std::panic::catch_unwind(|| check(&data)) {
                    std::panic::resume_unwind(Box::new(format!(
                        "{target}: {} fails: {:?}",
                        path.display(),
                        panic
                            .downcast_ref::<String>()
                            .map(String::as_str)
                            .or(panic.downcast_ref::<&str>().copied())
                    )));
                }
                seeds += usize::from(dir == "seeds");
            }
        }
        seeds
    }

    #[test]
    fn every_seed_of_every_target_passes() {
        for (target, check, at_least) in [
            ("rel_path", super::rel_path::check as fn(&[u8]), 3),
            ("policy", super::policy::check, 1),
            ("uri", super::uri::check, 3),
            ("patch_parse", super::patch_parse::check, 40),
            ("patch_plan", super::patch_plan::check, 40),
        ] {
            let seeds = replay(target, check);
            assert!(seeds >= at_least, "{target}: {seeds} seeds found, {at_least} expected");
        }
    }

    /// The replay runs the check on the files and reports a failing one.
    #[test]
    #[should_panic(expected = "rel_path: ")]
    fn a_seed_that_fails_its_check_fails_the_test() {
        replay("rel_path", |_| panic!("a property broke"));
    }
}
