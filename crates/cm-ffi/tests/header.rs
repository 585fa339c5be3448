//! include/cm.h must match the Rust side: the same exported functions
//! (checked against the built libcm.so with `nm -D`), each with the same
//! parameter and return types (checked against the `extern "C"`
//! declarations in src/), the same callback types, structures and
//! constants. Any drift fails here.

mod common;

use std::collections::BTreeMap;
use std::process::Command;

/// Rust source with comments removed and whitespace collapsed.
fn rust_source() -> String {
    let mut files = Vec::new();
    let mut dirs = vec![common::crate_dir().join("src")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("read src dir") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut all = String::new();
    for f in files {
        let s = std::fs::read_to_string(f).expect("read src");
        for line in s.lines() {
            let code = line.split("//").next().unwrap_or("");
            all.push_str(code);
            all.push(' ');
        }
    }
    collapse(&all)
}

/// cm.h with comments removed and whitespace collapsed.
fn header() -> String {
    let s = std::fs::read_to_string(common::crate_dir().join("include/cm.h")).expect("read cm.h");
    let mut out = String::new();
    let mut rest = s.as_str();
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        rest = rest[i..].split_once("*/").map_or("", |(_, r)| r);
    }
    out.push_str(rest);
    let no_line_comments: String = out
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    no_line_comments
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Split at top-level commas.
fn split_params(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for ch in s.chars() {
        match ch {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_owned());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_owned());
    }
    out
}

/// A Rust FFI type as C spells it (spaces normalised: `const char*`).
fn c_type(rust: &str) -> String {
    let t = rust.trim();
    if let Some(inner) = t.strip_prefix("*const ") {
        return format!("const {}*", c_type(inner));
    }
    if let Some(inner) = t.strip_prefix("*mut ") {
        return format!("{}*", c_type(inner));
    }
    let base = t.rsplit("::").next().unwrap_or(t);
    match base {
        "c_int" => "int",
        "i64" => "int64_t",
        "u64" => "uint64_t",
        "f64" | "c_double" => "double",
        "usize" => "size_t",
        "c_char" => "char",
        "c_void" => "void",
        "()" => "void",
        "sockaddr" => "struct sockaddr",
        "cm_estimate" => "struct cm_estimate",
        "cm_feedback" => "struct cm_feedback",
        "Option<PaperSend>" => "cm_send_fn",
        "Option<PaperUpdate>" => "cm_update_fn",
        "Option<CtxSend>" => "cm_ctx_send_fn",
        "Option<CtxUpdate>" => "cm_ctx_update_fn",
        other => other,
    }
    .to_owned()
}

/// Normalise a C type: `const struct sockaddr *` -> `const struct sockaddr*`.
fn norm_c(t: &str) -> String {
    collapse(&t.replace('*', " * "))
        .replace(" *", "*")
        .trim()
        .to_owned()
}

/// A C parameter without its name.
fn c_param_type(p: &str) -> String {
    let spaced = collapse(&p.replace('*', " * "));
    let toks: Vec<&str> = spaced.split(' ').collect();
    let last = toks.last().copied().unwrap_or("");
    let is_ident = last.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !last.is_empty()
        && toks.len() > 1
        && !matches!(last, "int" | "double" | "char" | "void");
    let kept = if is_ident {
        &toks[..toks.len() - 1]
    } else {
        &toks[..]
    };
    norm_c(&kept.join(" "))
}

type Sig = (String, Vec<String>);

/// `extern "C" fn` declarations in the Rust source, as C types.
fn rust_functions(src: &str) -> BTreeMap<String, Sig> {
    let mut out = BTreeMap::new();
    let mut rest = src;
    while let Some(i) = rest.find("extern \"C\" fn ") {
        rest = &rest[i + "extern \"C\" fn ".len()..];
        let Some(open) = rest.find('(') else { break };
        let name = rest[..open].trim().to_owned();
        let (params, after) = matching(&rest[open + 1..]);
        let ret = after
            .split('{')
            .next()
            .unwrap_or("")
            .trim()
            .strip_prefix("->")
            .map_or("()".to_owned(), |r| r.trim().to_owned());
        let types = split_params(params)
            .iter()
            .map(|p| c_type(p.split_once(':').map_or(p.as_str(), |(_, t)| t)))
            .collect();
        out.insert(name, (c_type(&ret), types));
    }
    // `ctx_int!(fn name(params) ...)`: context first, int result.
    let mut rest = src;
    while let Some(i) = rest.find("ctx_int!( ") {
        rest = &rest[i..];
        let Some(f) = rest.find(" fn ") else { break };
        rest = &rest[f + 4..];
        let Some(open) = rest.find('(') else { break };
        let name = rest[..open].trim().to_owned();
        let (params, _) = matching(&rest[open + 1..]);
        let mut types = vec!["cm_ctx*".to_owned()];
        types.extend(
            split_params(params)
                .iter()
                .map(|p| c_type(p.split_once(':').map_or(p.as_str(), |(_, t)| t))),
        );
        out.insert(name, ("int".to_owned(), types));
    }
    out.remove("$name");
    out
}

/// The text up to the matching `)`, and what follows it.
fn matching(s: &str) -> (&str, &str) {
    let mut depth = 1;
    for (i, ch) in s.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return (&s[..i], &s[i + 1..]);
                }
            }
            _ => {}
        }
    }
    (s, "")
}

/// Function prototypes in the header.
fn header_functions(h: &str) -> BTreeMap<String, Sig> {
    let mut out = BTreeMap::new();
    for stmt in h.split(';').map(collapse) {
        let stmt = stmt
            .rsplit(['{', '}'])
            .next()
            .unwrap_or("")
            .trim()
            .to_owned();
        let stmt = stmt
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect::<String>();
        let stmt = collapse(&stmt);
        if stmt.starts_with("typedef") || !stmt.contains("cm_") || !stmt.ends_with(')') {
            continue;
        }
        let Some(open) = stmt.find('(') else { continue };
        let head = &stmt[..open];
        let Some(name) = head.split([' ', '*']).rfind(|t| !t.is_empty()) else {
            continue;
        };
        let ret = norm_c(&head[..head.len() - name.len()]);
        let (params, _) = matching(&stmt[open + 1..]);
        let types: Vec<String> = if params.trim() == "void" {
            vec![]
        } else {
            split_params(params)
                .iter()
                .map(|p| c_param_type(p))
                .collect()
        };
        out.insert(name.to_owned(), (ret, types));
    }
    out
}

fn exported_symbols() -> Vec<String> {
    let lib = common::lib_dir().join("libcm.so");
    let o = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .expect("run nm");
    assert!(o.status.success(), "nm failed");
    let mut v: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, kind, name) = (f.next()?, f.next()?, f.next()?);
            (kind == "T" && name.starts_with("cm_")).then(|| name.to_owned())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn header_declares_exactly_the_exported_functions() {
    let exported = exported_symbols();
    let declared: Vec<String> = header_functions(&header()).into_keys().collect();
    assert!(exported.len() > 50, "too few exports: {exported:?}");
    assert_eq!(declared, exported, "cm.h vs nm -D libcm.so");
}

#[test]
fn header_signatures_match_the_rust_declarations() {
    let rust = rust_functions(&rust_source());
    let c = header_functions(&header());
    assert_eq!(
        rust.keys().collect::<Vec<_>>(),
        c.keys().collect::<Vec<_>>(),
        "function names"
    );
    for (name, sig) in &rust {
        assert_eq!(Some(sig), c.get(name), "signature of {name} (Rust vs cm.h)");
    }
}

#[test]
fn header_callback_types_match() {
    let src = rust_source();
    let h = collapse(&header());
    for (alias, typedef) in [
        ("PaperSend", "cm_send_fn"),
        ("PaperUpdate", "cm_update_fn"),
        ("CtxSend", "cm_ctx_send_fn"),
        ("CtxUpdate", "cm_ctx_update_fn"),
    ] {
        let decl = format!("type {alias} = unsafe extern \"C\" fn(");
        let i = src.find(&decl).unwrap_or_else(|| panic!("{decl}"));
        let (params, _) = matching(&src[i + decl.len()..]);
        let rust: Vec<String> = split_params(params).iter().map(|p| c_type(p)).collect();
        let tdecl = format!("typedef void (*{typedef})(");
        let j = h.find(&tdecl).unwrap_or_else(|| panic!("{tdecl}"));
        let (cparams, _) = matching(&h[j + tdecl.len()..]);
        let c: Vec<String> = split_params(cparams)
            .iter()
            .map(|p| c_param_type(p))
            .collect();
        assert_eq!(rust, c, "callback type {typedef}");
    }
}

#[test]
fn header_structs_and_constants_match() {
    let src = rust_source();
    let h = collapse(&header());
    for name in ["cm_estimate", "cm_feedback"] {
        let decl = format!("pub struct {name} {{");
        let i = src.find(&decl).unwrap_or_else(|| panic!("{decl}"));
        let body = &src[i + decl.len()..];
        let body = &body[..body.find('}').unwrap_or(body.len())];
        let rust: Vec<(String, String)> = split_params(body)
            .iter()
            .filter_map(|f| {
                let f = f.trim().strip_prefix("pub ")?;
                let (n, t) = f.split_once(':')?;
                Some((n.trim().to_owned(), c_type(t)))
            })
            .collect();
        let cdecl = format!("struct {name} {{");
        let j = h.find(&cdecl).unwrap_or_else(|| panic!("{cdecl}"));
        let cbody = &h[j + cdecl.len()..];
        let cbody = &cbody[..cbody.find('}').unwrap_or(cbody.len())];
        let c: Vec<(String, String)> = cbody
            .split(';')
            .filter(|f| !f.trim().is_empty())
            .map(|f| {
                let f = collapse(f);
                let (t, n) = f.rsplit_once(' ').expect("type name");
                (n.to_owned(), norm_c(t))
            })
            .collect();
        assert_eq!(rust, c, "struct {name}");
    }
    // Constants: `pub const CM_X: c_int = N;` vs `#define CM_X N`.
    let rust: BTreeMap<String, String> = src
        .split("pub const ")
        .skip(1)
        .filter_map(|s| {
            let (name, rest) = s.split_once(':')?;
            let value = rest.split_once('=')?.1.split(';').next()?.trim();
            name.starts_with("CM_")
                .then(|| (name.trim().to_owned(), value.to_owned()))
        })
        .collect();
    let c: BTreeMap<String, String> = header()
        .lines()
        .filter_map(|l| {
            let mut t = l.split_whitespace();
            (t.next()? == "#define").then_some(())?;
            let (n, v) = (t.next()?, t.next()?);
            // Names that are poisoned with a compile error are C only.
            (n.starts_with("CM_") && !v.starts_with("_Pragma"))
                .then(|| (n.to_owned(), v.to_owned()))
        })
        .collect();
    assert!(rust.len() >= 7, "{rust:?}");
    assert_eq!(rust, c, "constants");
}

/// cm.h compiles on its own as strict C99 and as C++ (its `extern "C"`).
#[test]
fn header_compiles_as_c99_and_cxx() {
    let dir = common::TempDir::new("hdr");
    let src = dir.0.join("h.c");
    std::fs::write(
        &src,
        "#include \"cm.h\"\nint main(void) { return cm_open(0, 0) < 0 ? 0 : 1; }\n",
    )
    .expect("write");
    let inc = common::crate_dir().join("include");
    let mut compilers = vec![("cc", vec!["-std=c99"])];
    if Command::new("c++").arg("--version").output().is_ok() {
        compilers.push(("c++", vec!["-x", "c++", "-std=c++11"]));
    }
    for (cc, lang) in compilers {
        let o = Command::new(cc)
            .args(&lang)
            .args([
                "-Wall",
                "-Wextra",
                "-Wpedantic",
                "-Werror",
                "-fsyntax-only",
                "-I",
            ])
            .arg(&inc)
            .arg(&src)
            .output()
            .expect("run compiler");
        assert!(
            o.status.success(),
            "{cc}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// tests/c/api_test.c calls every function cm.h declares (so a new export
/// cannot go untested from C).
#[test]
fn c_test_calls_every_function() {
    let test = std::fs::read_to_string(common::crate_dir().join("tests/c/api_test.c"))
        .expect("read api_test.c");
    let missing: Vec<String> = header_functions(&header())
        .into_keys()
        .filter(|f| !test.contains(&format!("{f}(")))
        .collect();
    assert!(missing.is_empty(), "not called by api_test.c: {missing:?}");
}
