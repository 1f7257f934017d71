#!/usr/bin/env bash
# CPU seconds of patch planning, before and after, in one sitting.
#
#   scripts/patch-plan-cost.sh [OLD_COMMIT] [TIMEOUT_SECONDS]
#
# Builds crates/patch/examples/plan_cost.rs (release: the crate has no
# dependencies, so this is quick) against
# this tree and against OLD_COMMIT (default 48d4303, checked out with
# `git worktree add` under target/patch-plan-cost-old), then runs every
# workload × patch size (3 KiB, 24 KiB, 1 MiB against a 256 KiB file) on
# both, printing user+system CPU seconds from /usr/bin/time. A run that
# passes TIMEOUT_SECONDS (default 120) of wall time is killed and shown as
# ">T (killed)". Not a test: the numbers depend on the machine.
set -euo pipefail

old_commit=${1:-48d4303}
limit=${2:-120}
root=$(git rev-parse --show-toplevel)
old_tree=$root/target/patch-plan-cost-old

if [ ! -d "$old_tree" ]; then
    git -C "$root" worktree add --detach "$old_tree" "$old_commit" >/dev/null
fi
mkdir -p "$old_tree/crates/patch/examples"
cp "$root/crates/patch/examples/plan_cost.rs" "$old_tree/crates/patch/examples/"

build() { (cd "$1" && cargo build --quiet --release --locked -p serverfs-patch --example plan_cost); }
build "$root"
CARGO_TARGET_DIR=$root/target/patch-plan-cost-old-target build "$old_tree"
new_bin=$root/target/release/examples/plan_cost
old_bin=$root/target/patch-plan-cost-old-target/release/examples/plan_cost

measure() {
    local out
    if out=$( { timeout "$limit" /usr/bin/time -f 'cpu %U %S' "$@" >/dev/null; } 2>&1 ); then
        awk '/^cpu/ { printf "%.2f", $2 + $3 }' <<<"$out"
    else
        printf '>%s (killed)' "$limit"
    fi
}

printf '%-9s %9s %14s %14s\n' workload patch "old $old_commit" new
for workload in repeated spread twice; do
    for size in 3072 24576 1048576; do
        "$new_bin" "$workload" "$size" >&2
        printf '%-9s %9s %14s %14s\n' "$workload" "$size" \
            "$(measure "$old_bin" "$workload" "$size")" "$(measure "$new_bin" "$workload" "$size")"
    done
done
