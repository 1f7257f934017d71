//! Measurement input for `scripts/bench.py --syntax` (not a test): per
//! language, a valid file of 10,000 lines (a small unit of code repeated
//! with fresh names), parsed `RUNS` times with [`serverfs_syntax::parse`];
//! and the cost of the check after a broken edit, which parses the file
//! twice (after, then before). Prints one JSON object per language.
//!
//! ```text
//! cargo run --release -p serverfs-syntax --example parse_time [-- lines [runs]]
//! ```

use std::time::Instant;

use serverfs_syntax::{Language, Limits, Parsed, Verdict, check_edit, check_edit_reusing, parse};

/// Per language: a file name, the text before the repeated unit, the unit
/// (`{n}` is replaced by its index), the separator between units, the
/// text after them.
const FILES: &[(&str, &str, &str, &str, &str)] = &[
    (
        "a.py",
        "import os\n\n",
        "class Item{n}:\n    \"\"\"One item.\"\"\"\n\n    def __init__(self, price, count=1):\n        self.price = price\n        self.count = count\n\n    def total(self, rate: float = 0.2) -> float:\n        s = 0\n        for i in range(self.count):\n            if i % 2 == 0:\n                s += self.price * (1 + rate)\n            else:\n                s += self.price\n        return round(s, 2)\n\n\n",
        "",
        "",
    ),
    (
        "a.rs",
        "use std::fmt;\n\n",
        "pub struct Item{n} {\n    price: u64,\n    count: u32,\n}\n\nimpl Item{n} {\n    pub fn total(&self, rate: u64) -> u64 {\n        let mut s = 0;\n        for i in 0..self.count {\n            if i % 2 == 0 {\n                s += self.price * (100 + rate) / 100;\n            } else {\n                s += self.price;\n            }\n        }\n        s\n    }\n}\n\n",
        "",
        "",
    ),
    (
        "a.go",
        "package shop\n\n",
        "type Item{n} struct {\n\tPrice int\n\tCount int\n}\n\nfunc (it *Item{n}) Total(rate int) int {\n\ts := 0\n\tfor i := 0; i < it.Count; i++ {\n\t\tif i%2 == 0 {\n\t\t\ts += it.Price * (100 + rate) / 100\n\t\t} else {\n\t\t\ts += it.Price\n\t\t}\n\t}\n\treturn s\n}\n\n",
        "",
        "",
    ),
    (
        "a.js",
        "'use strict';\n\n",
        "class Item{n} {\n  constructor(price, count = 1) {\n    this.price = price;\n    this.count = count;\n  }\n\n  total(rate = 0.2) {\n    let s = 0;\n    for (let i = 0; i < this.count; i++) {\n      s += i % 2 === 0 ? this.price * (1 + rate) : this.price;\n    }\n    return Math.round(s * 100) / 100;\n  }\n}\n\n",
        "",
        "",
    ),
    (
        "a.ts",
        "",
        "export class Item{n} {\n  constructor(private price: number, private count: number = 1) {}\n\n  total(rate: number = 0.2): number {\n    let s: number = 0;\n    for (let i = 0; i < this.count; i++) {\n      s += i % 2 === 0 ? this.price * (1 + rate) : this.price;\n    }\n    return Math.round(s * 100) / 100;\n  }\n}\n\n",
        "",
        "",
    ),
    (
        "a.tsx",
        "",
        "export const Item{n} = ({ price }: { price: number }) => (\n  <div className=\"item\">\n    <span>{price}</span>\n  </div>\n);\n\n",
        "",
        "",
    ),
    (
        "a.json",
        "[\n",
        "  {\n    \"id\": {n},\n    \"name\": \"item {n}\",\n    \"price\": 12.5,\n    \"tags\": [\"a\", \"b\"],\n    \"stock\": {\"count\": 3, \"where\": null}\n  }",
        ",\n",
        "\n]\n",
    ),
    (
        "a.yaml",
        "items:\n",
        "  - id: {n}\n    name: item {n}\n    price: 12.5\n    tags: [a, b]\n    stock:\n      count: 3\n      where: null\n",
        "",
        "",
    ),
    (
        "a.toml",
        "",
        "[item{n}]\nname = \"item {n}\"\nprice = 12.5\ntags = [\"a\", \"b\"]\nstock = { count = 3, where = \"x\" }\n\n",
        "",
        "",
    ),
    (
        "a.c",
        "#include <stdio.h>\n\n",
        "struct item{n} {\n  int price;\n  int count;\n};\n\nint total{n}(const struct item{n} *it, int rate) {\n  int s = 0;\n  for (int i = 0; i < it->count; i++) {\n    if (i % 2 == 0)\n      s += it->price * (100 + rate) / 100;\n    else\n      s += it->price;\n  }\n  return s;\n}\n\n",
        "",
        "",
    ),
    (
        "a.cpp",
        "#include <vector>\n\n",
        "class Item{n} {\n public:\n  explicit Item{n}(int price) : price_(price) {}\n  int total(const std::vector<int>& rates) const {\n    int s = 0;\n    for (auto r : rates) {\n      s += price_ * (100 + r) / 100;\n    }\n    return s;\n  }\n\n private:\n  int price_;\n};\n\n",
        "",
        "",
    ),
    (
        "A.java",
        "package shop;\n\n",
        "class Item{n} {\n  private final int price;\n\n  Item{n}(int price) {\n    this.price = price;\n  }\n\n  int total(int count, int rate) {\n    int s = 0;\n    for (int i = 0; i < count; i++) {\n      s += i % 2 == 0 ? price * (100 + rate) / 100 : price;\n    }\n    return s;\n  }\n}\n\n",
        "",
        "",
    ),
    (
        "a.sh",
        "#!/bin/sh\nset -eu\n\n",
        "total{n}() {\n  s=0\n  for i in $(seq \"$1\"); do\n    if [ $((i % 2)) -eq 0 ]; then\n      s=$((s + $2))\n    else\n      s=$((s + $2 * 2))\n    fi\n  done\n  echo \"$s\"\n}\n\n",
        "",
        "",
    ),
];

/// A valid file of at least `lines` lines.
fn build(head: &str, unit: &str, sep: &str, tail: &str, lines: usize) -> String {
    let mut text = head.to_owned();
    let mut n = 0;
    while text.lines().count() + tail.lines().count() < lines {
        if n > 0 {
            text.push_str(sep);
        }
        text.push_str(&unit.replace("{n}", &n.to_string()));
        n += 1;
    }
    text.push_str(tail);
    text
}

/// Median wall and thread-CPU milliseconds of `runs` calls of `f`, and
/// the last call's result.
fn measure<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, f64, T) {
    fn cpu_ms() -> f64 {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6
    }
    let (mut wall, mut cpu) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    let mut last = None;
    for _ in 0..runs {
        let (started, started_cpu) = (Instant::now(), cpu_ms());
        last = Some(f());
        cpu.push(cpu_ms() - started_cpu);
        wall.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let median = |mut xs: Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    };
    (median(wall), median(cpu), last.expect("at least one run"))
}

/// tree-sitter alone (no size cap, no time budget, no error walk): the
/// anchor for the languages the issue names.
fn bare_grammar(path: &str) -> Option<tree_sitter::Language> {
    match path {
        "a.py" => Some(tree_sitter_python::LANGUAGE.into()),
        "a.rs" => Some(tree_sitter_rust::LANGUAGE.into()),
        _ => None,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let lines: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let runs: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(21);
    let limits = Limits::default();
    for &(path, head, unit, sep, tail) in FILES {
        let text = build(head, unit, sep, tail, lines);
        let language = Language::for_path(path, text.as_bytes()).expect("a known language");
        let (wall, cpu, parsed) = measure(runs, || parse(language, text.as_bytes(), &limits));
        let errors = match parsed {
            Parsed::Errors(e) => e.len() as i64,
            Parsed::Skipped(_) => -1,
        };
        // A broken edit at the end: the check parses after, then before.
        let broken = format!("{text}(\n");
        let (check_wall, check_cpu, verdict) =
            measure(runs, || check_edit(path, Some(text.as_bytes()), broken.as_bytes(), &limits));
        // The next edit of a file whose parse was kept (what the writer
        // does): one line changed in the middle, parsed incrementally.
        let mid = text.len() / 2;
        let at = mid + text[mid..].find('\n').map_or(0, |i| i + 1);
        let edited = format!("{}{}", &text[..at], text[at..].replacen("1", "2", 1));
        let kept = check_edit_reusing(path, None, text.as_bytes(), &limits, None).1;
        let (reedit_wall, reedit_cpu, reedit) = measure(runs, || {
            let (b, a) = (Some(text.as_bytes()), edited.as_bytes());
            check_edit_reusing(path, b, a, &limits, kept.clone()).0
        });
        assert_eq!(reedit, Verdict::Clean(language), "{path}: the re-edit is clean");
        let bare = bare_grammar(path).map(|grammar| {
            let mut parser = tree_sitter::Parser::new();
            parser.set_language(&grammar).expect("a compatible grammar");
            let (wall, cpu, _) = measure(runs, || parser.parse(&text, None));
            format!(
                ", \"tree_sitter_alone_wall_ms\": {wall:.3}, \"tree_sitter_alone_cpu_ms\": {cpu:.3}"
            )
        });
        #[allow(clippy::print_stdout)]
        {
            println!(
                "{{\"language\": \"{}\", \"path\": \"{path}\", \"lines\": {}, \"bytes\": {}, \"runs\": {runs}, \"parse_wall_ms\": {wall:.3}, \"parse_cpu_ms\": {cpu:.3}, \"errors\": {errors}, \"broken_check_wall_ms\": {check_wall:.3}, \"broken_check_cpu_ms\": {check_cpu:.3}, \"broken_reported\": {}, \"reedit_wall_ms\": {reedit_wall:.3}, \"reedit_cpu_ms\": {reedit_cpu:.3}{}}}",
                language.name(),
                text.lines().count(),
                text.len(),
                matches!(verdict, Verdict::Broken(..)),
                bare.unwrap_or_default(),
            );
        }
    }
}
