#!/usr/bin/env bash
# Benchmarks serverfs-search (find_files, search_text) against ripgrep and
# find on the Linux kernel source, in one session, on a warm page cache.
# Not a test: it prints figures and ratios; nothing fails on a slow machine.
#
#   scripts/bench-search.sh            # RUNS=10 by default
#   RUNS=20 scripts/bench-search.sh
#
# Needs apt (Debian/Ubuntu) the first time: linux-source, ripgrep,
# hyperfine and GNU time are installed if missing. The corpus is extracted
# to ./bench-data/ (gitignored); results go to ./results/bench-search/.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-10}
DATA=bench-data
OUT=results/bench-search
RARE=${RARE:-PM_RESUME_BOGUS_zz}   # in no file: a full scan
PRESENT=${PRESENT:-Torvalds}       # a few hundred lines: equivalence check
FREQUENT=${FREQUENT:-static}       # on almost every page: early stop
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

apt_updated=0
apt_install() {
    if [ "$apt_updated" = 0 ]; then
        $SUDO apt-get update -qq
        apt_updated=1
    fi
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- tools and corpus -------------------------------------------------------
command -v rg >/dev/null || apt_install ripgrep
[ -x /usr/bin/time ] || apt_install time
command -v hyperfine >/dev/null || apt_install hyperfine || true
tarball() { find /usr/src -maxdepth 1 -name 'linux-source-*.tar.xz' | sort -V | tail -1; }
[ -n "$(tarball)" ] || apt_install linux-source
TARBALL=$(tarball)
CORPUS="$DATA/$(basename "$TARBALL" .tar.xz)"
if [ ! -d "$CORPUS" ]; then
    echo "extracting $TARBALL to $DATA/ ..."
    mkdir -p "$DATA"
    tar -xJf "$TARBALL" -C "$DATA"
fi

cargo build --release --quiet -p serverfs-search --example bench
BENCH=target/release/examples/bench
mkdir -p "$OUT"

# rg restricted to the files we search: hidden entries are skipped by both
# (rg's default), no ignore files (--no-ignore), and our built-in deny names
# excluded (the kernel tree holds e.g. a *.pem). --sort path makes rg walk in
# the same order and single-threaded, as we do; -n counts lines, as we do.
RG="rg -n --no-ignore --sort path -F --no-messages"
for g in .env '.env.*' '*.env' '*.pem' '*.key' '*.p12' '*.pfx' id_rsa id_dsa id_ecdsa id_ed25519; do
    RG="$RG --iglob '!$g'"
done
# find equivalent: prune hidden entries, as our policy skips them.
FIND_PRUNE="find $CORPUS -name '.*' -prune -o"

echo "corpus: $CORPUS ($(find "$CORPUS" | wc -l) entries, $(du -sh "$CORPUS" | cut -f1))"
echo "warming the page cache ..."
find "$CORPUS" -type f -print0 | xargs -0 cat >/dev/null
eval "$RG $RARE $CORPUS" >/dev/null || true

# --- equivalence: same lines, same order --------------------------------------
"$BENCH" "$CORPUS" search "$PRESENT" 100000 --print 2>/dev/null | cut -d: -f1,2 >"$OUT/ours.txt"
(cd "$CORPUS" && eval "$RG $PRESENT .") | sed 's|^\./||' | cut -d: -f1,2 >"$OUT/rg.txt" || true
if cmp -s "$OUT/ours.txt" "$OUT/rg.txt"; then
    echo "equivalence: '$PRESENT' gives the same $(wc -l <"$OUT/ours.txt") path:line results in the same order as rg"
else
    echo "equivalence: DIFFERENT results from rg for '$PRESENT' (see $OUT/ours.txt, $OUT/rg.txt)"
fi

"$BENCH" "$CORPUS" find '*.c' 1000000 --print 2>/dev/null | sort >"$OUT/ours-find.txt"
eval "$FIND_PRUNE -name '*.c' -print" | sed "s|^$CORPUS/||" | sort >"$OUT/find.txt"
if cmp -s "$OUT/ours-find.txt" "$OUT/find.txt"; then
    echo "equivalence: find '*.c' gives the same $(wc -l <"$OUT/find.txt") paths as find -name"
else
    echo "equivalence: DIFFERENT paths from find -name '*.c' (see $OUT/ours-find.txt, $OUT/find.txt)"
fi

# --- timings ------------------------------------------------------------------
# name|shell command line
CASES=(
    "search_full|$BENCH $CORPUS search $RARE 100"
    "rg_full|$RG $RARE $CORPUS"
    "search_early50|$BENCH $CORPUS search $FREQUENT 50"
    "rg_first50|$RG $FREQUENT $CORPUS | head -n 50"
    "find_full|$BENCH $CORPUS find '*.rs' 100"
    "gnufind_full|$FIND_PRUNE -name '*.rs' -print"
    "find_early_rst50|$BENCH $CORPUS find '*.rst' 50"
    "find_early_c50|$BENCH $CORPUS find '*.c' 50"
    "find_all_c|$BENCH $CORPUS find '*.c' 1000000"
    "gnufind_all_c|$FIND_PRUNE -name '*.c' -print"
)

declare -A MEAN CPU
for case in "${CASES[@]}"; do
    name=${case%%|*}
    cmd=${case#*|}
    if command -v hyperfine >/dev/null; then
        hyperfine -w 2 -r "$RUNS" -i --export-json "$OUT/$name.json" "$cmd" >/dev/null 2>&1
        read -r m c < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print(r["mean"], r["user"]+r["system"])' "$OUT/$name.json")
    else
        start=$(date +%s.%N)
        for _ in $(seq "$RUNS"); do bash -c "$cmd" >/dev/null 2>&1 || true; done
        m=$(echo "($(date +%s.%N) - $start) / $RUNS" | bc -l)
        c=$m
    fi
    MEAN[$name]=$m
    CPU[$name]=$c
    printf '%-18s wall %8.1f ms   cpu %8.1f ms   %s\n' "$name" "$(echo "$m*1000" | bc -l)" "$(echo "$c*1000" | bc -l)" "$cmd"
done

# Wall-clock ratios, and CPU (user+sys) ratios, which are steadier when
# other work shares the machine.
ratio() { printf '%.2fx' "$(echo "$1 / $2" | bc -l)"; }
pct() { printf '%.1f%%' "$(echo "100 * $1 / $2" | bc -l)"; }
both() { echo "wall $($1 "${MEAN[$2]}" "${MEAN[$3]}"), cpu $($1 "${CPU[$2]}" "${CPU[$3]}")"; }
echo
echo "full scan   search / rg:             $(both ratio search_full rg_full)   (target <= 1.5x)"
echo "find walk   find / find -name:       $(both ratio find_full gnufind_full)   (target <= 1.5x)"
echo "find all    *.c, 32k matches:        $(both ratio find_all_c gnufind_all_c)   (each match is confirmed by an lstat beneath the root)"
echo "early stop  search '$FREQUENT' limit 50: $(both pct search_early50 search_full) of the full scan (target < 5%)"
echo "early stop  find *.rst limit 50:     $(both pct find_early_rst50 find_full) of the full walk (target < 5%)"
echo "early stop  find *.c limit 50:       $(both pct find_early_c50 find_full) of the full walk (the 51st .c comes after Documentation/)"
rss() { /usr/bin/time -v "$@" 2>&1 >/dev/null | awk -F': ' '/Maximum resident/ {printf "%.1f MiB", $2/1024}'; }
echo "peak RSS full scan: ours $(rss "$BENCH" "$CORPUS" search "$RARE" 100), rg $(rss bash -c "exec $RG $RARE $CORPUS") (target < 64 MiB)"
