use super::*;

/// Per language: a file name, a valid file, the same file after an edit
/// that breaks it, and the 1-based line the first new error must be on.
const CASES: &[(&str, &str, &str, usize)] = &[
    (
        "a.py",
        "def f(x):\n    y = x + 1\n    return y\n",
        "def f(x):\n    y = x + 1\n        return y\n",
        3,
    ),
    (
        "a.rs",
        "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n",
        "fn main() {\n    let x = 1\n    println!(\"{x}\");\n}\n",
        2,
    ),
    (
        "a.go",
        "package main\n\nfunc main() {\n\tx := 1\n\t_ = x\n}\n",
        "package main\n\nfunc main() {\n\tx := (1\n\t_ = x\n}\n",
        4,
    ),
    ("a.js", "function f(a) {\n  return a + 1;\n}\n", "function f(a) {\n  return a +;\n}\n", 2),
    (
        "a.ts",
        "function f(a: number): number {\n  return a + 1;\n}\n",
        "function f(a: number): number {\n  return a + 1;\n\n",
        2,
    ),
    (
        "a.tsx",
        "const A = () => <div className=\"x\">hi</div>;\n",
        "const A = () => <div className=\"x\">{hi</div>;\n",
        1,
    ),
    ("a.json", "{\n  \"a\": 1,\n  \"b\": [1, 2]\n}\n", "{\n  \"a\": 1\n  \"b\": [1, 2]\n}\n", 2),
    ("a.yaml", "a: 1\nb:\n  - x\n  - y\n", "a: 1\nb:\n  - x\n  - y\n c: [1, 2\n", 1),
    ("a.toml", "[a]\nb = 1\nc = \"x\"\n", "[a]\nb = 1\nc = \"x\n", 3),
    ("a.c", "int f(int x) {\n  return x + 1;\n}\n", "int f(int x) {\n  return x + ;\n}\n", 2),
    (
        "a.cpp",
        "#include <vector>\nint f(std::vector<int> v) {\n  return v.size();\n}\n",
        "#include <vector>\nint f(std::vector<int> v) {\n  return v.size(;\n}\n",
        3,
    ),
    (
        "A.java",
        "class A {\n  int f(int x) {\n    return x + 1;\n  }\n}\n",
        "class A {\n  int f(int x) {\n    return x + 1\n  }\n}\n",
        3,
    ),
    (
        "a.sh",
        "#!/bin/sh\nif [ -f x ]; then\n  echo yes\nfi\n",
        "#!/bin/sh\nif [ -f x ]; then\n  echo yes\n",
        4,
    ),
];

#[test]
fn every_language_parses_its_valid_file_and_reports_its_broken_edit() {
    let limits = Limits::default();
    for &(path, valid, broken, line) in CASES {
        let language = Language::for_path(path, valid.as_bytes()).expect(path);
        assert_eq!(parse(language, valid.as_bytes(), &limits), Parsed::Errors(vec![]), "{path}");
        assert_eq!(
            check_edit(path, Some(valid.as_bytes()), valid.as_bytes(), &limits),
            Verdict::Clean(language),
            "{path}"
        );
        match check_edit(path, Some(valid.as_bytes()), broken.as_bytes(), &limits) {
            Verdict::Broken(l, errors) => {
                assert_eq!(l, language);
                let first = &errors[0];
                assert_eq!(first.line, line, "{path}: {errors:?}");
                assert_eq!(
                    first.text,
                    broken.lines().nth(line - 1).unwrap_or("").trim_end(),
                    "{path}"
                );
                assert!(first.column >= 1, "{path}");
            }
            other => panic!("{path}: {other:?}"),
        }
    }
}

#[test]
fn every_language_has_a_case() {
    let all = [
        Language::Bash,
        Language::C,
        Language::Cpp,
        Language::Go,
        Language::Java,
        Language::JavaScript,
        Language::Json,
        Language::Python,
        Language::Rust,
        Language::Toml,
        Language::Tsx,
        Language::TypeScript,
        Language::Yaml,
    ];
    for language in all {
        assert!(
            CASES.iter().any(|(p, v, ..)| Language::for_path(p, v.as_bytes()) == Some(language)),
            "{language:?}"
        );
    }
}

#[test]
fn the_python_indentation_case_names_line_column_and_text() {
    let before = "class A:\n    def f(self):\n        return 1\n";
    let after = "class A:\n    def f(self):\n        x = 1\n            return x\n";
    let Verdict::Broken(Language::Python, errors) =
        check_edit("pkg/a.py", Some(before.as_bytes()), after.as_bytes(), &Limits::default())
    else {
        panic!("not reported");
    };
    assert_eq!((errors[0].line, errors[0].column), (4, 13), "{errors:?}");
    assert_eq!(errors[0].text, "            return x");
}

#[test]
fn an_added_file_is_blamed_for_every_error() {
    let broken = "def f(:\n";
    assert!(matches!(
        check_edit("new.py", None, broken.as_bytes(), &Limits::default()),
        Verdict::Broken(Language::Python, _)
    ));
}

#[test]
fn old_errors_are_not_blamed_even_when_lines_shift() {
    let limits = Limits::default();
    let before = "x = 1\ndef f(:\n    pass\n";
    // Three lines inserted above the old error, which moves to line 5.
    let after = "import os\nimport sys\n\nx = 1\ndef f(:\n    pass\n";
    assert_eq!(
        check_edit("a.py", Some(before.as_bytes()), after.as_bytes(), &limits),
        Verdict::Clean(Language::Python)
    );
    // A second, new error beside the old one is reported, alone.
    let worse = "x = 1\ndef f(:\n    pass\ny = [1,\n";
    let Verdict::Broken(_, errors) =
        check_edit("a.py", Some(before.as_bytes()), worse.as_bytes(), &limits)
    else {
        panic!("new error not reported");
    };
    assert!(errors.iter().all(|e| e.line >= 4), "{errors:?}");
}

#[test]
fn unknown_languages_are_not_checked() {
    let limits = Limits::default();
    for path in ["README.md", "Makefile", "a.txt", ".py", "data"] {
        assert_eq!(check_edit(path, None, b"((((", &limits), Verdict::NotChecked, "{path}");
    }
}

#[test]
fn shebangs_choose_the_language_of_extensionless_scripts() {
    let cases: &[(&str, Option<Language>)] = &[
        ("#!/bin/bash\n", Some(Language::Bash)),
        ("#!/usr/bin/env bash\n", Some(Language::Bash)),
        ("#!/usr/bin/env -S python3 -u\n", Some(Language::Python)),
        ("#!/usr/bin/python3\n", Some(Language::Python)),
        ("#!/usr/bin/env node\n", Some(Language::JavaScript)),
        ("#!/usr/bin/perl\n", None),
        ("echo hi\n", None),
    ];
    for (text, language) in cases {
        assert_eq!(Language::for_path("bin/run", text.as_bytes()), *language, "{text}");
    }
    assert_eq!(Language::for_path("src/Main.JAVA", b""), Some(Language::Java));
    assert_eq!(Language::for_path("x.h", b""), Some(Language::Cpp));
}

#[test]
fn limits_bound_size_and_time() {
    let big = "x = 1\n".repeat(10);
    let small = Limits { max_bytes: 10, ..Limits::default() };
    assert_eq!(parse(Language::Python, big.as_bytes(), &small), Parsed::Skipped(Skip::TooLarge));
    assert_eq!(
        check_edit("a.py", None, big.as_bytes(), &small),
        Verdict::Skipped(Language::Python, Skip::TooLarge)
    );
    let no_time = Limits { max_time: Duration::ZERO, ..Limits::default() };
    let long = "x = [1,\n".repeat(20_000);
    assert_eq!(parse(Language::Python, long.as_bytes(), &no_time), Parsed::Skipped(Skip::TimedOut));
}

#[test]
fn messages_quote_the_token_and_the_missing_kind() {
    let limits = Limits::default();
    let Parsed::Errors(errors) = parse(Language::Rust, b"fn f() { let x = (1; }\n", &limits) else {
        panic!()
    };
    assert!(!errors.is_empty());
    assert!(
        errors
            .iter()
            .all(|e| e.message.starts_with("unexpected `") || e.message.starts_with("missing `")),
        "{errors:?}"
    );
    // Collected errors are bounded.
    let many = "def f(:\n".repeat(5000);
    let Parsed::Errors(errors) = parse(Language::Python, many.as_bytes(), &limits) else {
        panic!()
    };
    assert!(errors.len() <= MAX_ERRORS);
}

#[test]
fn dialects_the_grammars_refuse_are_not_checked() {
    let limits = Limits::default();
    // JSON with comments and trailing commas (tsconfig, VS Code settings).
    let jsonc = "{\n  // comment\n  \"a\": 1,\n  \"b\": [1, 2],\n}\n";
    for path in [
        "tsconfig.json",
        "web/tsconfig.app.json",
        "jsconfig.json",
        ".vscode/settings.json",
        ".devcontainer/devcontainer.json",
    ] {
        assert_eq!(
            check_edit(path, None, jsonc.as_bytes(), &limits),
            Verdict::NotChecked,
            "{path}"
        );
    }
    // The control: the same text as plain JSON is reported.
    assert!(matches!(
        check_edit("data.json", None, jsonc.as_bytes(), &limits),
        Verdict::Broken(..)
    ));
    // Templated YAML (Helm, Jinja).
    let helm = "metadata:\n  name: {{ .Values.name }}\n{{- if .Values.x }}\nspec: {}\n{{- end }}\n";
    assert_eq!(
        check_edit("chart/templates/pod.yaml", None, helm.as_bytes(), &limits),
        Verdict::NotChecked
    );
    let jinja = "a: 1\n{% for x in xs %}\n- {{ x }}\n{% endfor %}\n";
    assert_eq!(check_edit("roles/x.yml", None, jinja.as_bytes(), &limits), Verdict::NotChecked);
}

/// Each `(path, text)`, added as a new file, is blamed for nothing.
fn assert_all_clean(cases: &[(&str, &str)]) {
    let limits = Limits::default();
    for &(path, text) in cases {
        let language = Language::for_path(path, text.as_bytes()).unwrap();
        assert_eq!(
            check_edit(path, None, text.as_bytes(), &limits),
            Verdict::Clean(language),
            "{text}"
        );
    }
}

#[test]
fn newer_syntax_parses_clean() {
    assert_all_clean(&[
        ("a.py", "x = f\"{d[\"a\"]}\"\nif x:\n    pass\n"),
        ("a.py", "match p:\n    case {\"a\": 1}:\n        pass\n    case _:\n        pass\n"),
        ("a.ts", "type A<T> = T extends string ? 'a' : 'b';\nconst x = <T,>(a: T) => a;\n"),
        ("a.c", "#define F(x) ((x) + 1)\nstatic int g(void) { return F(2); }\n"),
        ("a.h", "#pragma once\nnamespace n { template <typename T> T f(T x); }\n"),
    ]);
}

#[test]
fn the_incremental_parse_of_the_old_text_finds_what_a_fresh_parse_finds() {
    let limits = Limits::default();
    for &(path, valid, broken, _) in CASES {
        let language = Language::for_path(path, valid.as_bytes()).unwrap();
        // Both directions: broken from valid's tree, valid from broken's.
        for (from, to) in [(valid, broken), (broken, valid), (broken, "")] {
            let (_, tree) = parse_from(language, from.as_bytes(), &limits, None);
            let old = edited(tree.unwrap(), from.as_bytes(), to.as_bytes());
            let (reparsed, _) = parse_from(language, to.as_bytes(), &limits, Some(&old));
            assert_eq!(reparsed, parse(language, to.as_bytes(), &limits), "{path}: {to:?}");
        }
    }
}

/// Recent language versions: an edit that uses them must not be blamed.
#[test]
fn modern_constructs_of_every_language_parse_clean() {
    assert_all_clean(&[
        (
            "a.rs",
            "fn f(a: Option<u8>, b: bool) {\n    if let Some(x) = a && b {\n        let _ = x;\n    }\n    let Some(y) = a else { return };\n    let p = &raw const y;\n    let c = async || 1;\n}\nfn g() -> impl Sized + use<> {}\n",
        ),
        ("a.py", "type X = int\ndef f[T](x: T) -> T:\n    return x\nclass A[T]:\n    pass\n"),
        (
            "a.go",
            "package p\n\nfunc F[T any](x T) T { return x }\n\nfunc G() {\n\tfor i := range 10 {\n\t\t_ = i\n\t}\n}\n",
        ),
        (
            "A.java",
            "record P(int x) {}\nsealed interface S permits P2 {}\nfinal class P2 implements S {}\nclass A {\n  String f(Object o) {\n    return switch (o) {\n      case Integer i when i > 0 -> \"pos\";\n      default -> { var s = \"\"\"\n        text\n        \"\"\"; yield s; }\n    };\n  }\n}\n",
        ),
        (
            "a.cpp",
            "template <typename T>\nconcept C = requires(T t) { t.f(); };\nauto g(C auto x) { return x; }\nint h() { auto [a, b] = std::pair{1, 2}; return a <=> b == 0; }\n",
        ),
        (
            "a.ts",
            "const x = { a: 1 } satisfies Record<string, number>;\nenum E { A }\nfunction f(this: Window, ...a: number[]): asserts a is number[] {}\nclass C { @dec() m() {} accessor y = 1; }\n",
        ),
        (
            "a.js",
            "class A { #p = 1; static { } get #q() { return this.#p; } }\nconst y = a?.b ?? c;\nlabel: for (const z of w) { break label; }\nimport x from './a.json' with { type: 'json' };\n",
        ),
        (
            "a.sh",
            "#!/bin/bash\ndeclare -A m=([a]=1)\nf() { local x=${1:-d}; echo \"${x^^}\"; }\ncat <<EOF\n$(f a)\nEOF\n[[ $a =~ ^x ]] && echo y\n",
        ),
        (
            "a.c",
            "_Static_assert(1, \"x\");\nstatic inline int f(int n, int a[static n]) { return a[0]; }\n",
        ),
        ("a.toml", "a = 1979-05-27T07:32:00Z\nb = \"\"\"\nx\"\"\"\n[[t]]\nc = { d = [1, 2] }\n"),
        ("a.yaml", "a: &x\n  b: 1\nc:\n  <<: *x\nd: |\n  text\n---\n- !tag x\n"),
    ]);
}

#[test]
fn a_kept_parse_gives_what_a_fresh_check_gives() {
    let limits = Limits::default();
    for &(path, valid, broken, _) in CASES {
        // valid -> broken -> broken with a line more -> valid, each step
        // from the previous step's kept parse.
        let more = format!("{broken}\n");
        let steps = [
            (None, valid),
            (Some(valid), broken),
            (Some(broken), more.as_str()),
            (Some(more.as_str()), valid),
        ];
        let mut kept = None;
        for (before, after) in steps {
            let b = before.map(str::as_bytes);
            let (verdict, next) = check_edit_reusing(path, b, after.as_bytes(), &limits, kept);
            assert_eq!(
                verdict,
                check_edit(path, b, after.as_bytes(), &limits),
                "{path}: {after:?}"
            );
            let next = next.expect("kept");
            assert_eq!(next.text(), after.as_bytes());
            kept = Some(next);
        }
        // A kept parse of another text is not used.
        let (verdict, _) =
            check_edit_reusing(path, Some(broken.as_bytes()), broken.as_bytes(), &limits, kept);
        assert_eq!(verdict, check_edit(path, Some(broken.as_bytes()), broken.as_bytes(), &limits));
    }
}
