//! Compiles `bpf/cm_tcp.bpf.c` with clang into `$OUT_DIR/cm_tcp.bpf.o`,
//! which `src/loader.rs` embeds.
//!
//! Without clang the crate still builds: the object is empty and loading
//! reports `KernelError::NotBuilt`. With clang, a compile error fails the
//! build (a broken program must not pass as "not built").

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join("cm_tcp.bpf.o");
    println!("cargo:rerun-if-changed=bpf/cm_tcp.bpf.c");
    println!("cargo:rerun-if-changed=bpf/cm_tcp.h");
    println!("cargo:rerun-if-env-changed=CM_KERNEL_CLANG");
    let clang = std::env::var("CM_KERNEL_CLANG").unwrap_or_else(|_| "clang".into());
    if Command::new(&clang).arg("--version").output().is_err() {
        println!(
            "cargo:warning=cm-kernel: `{clang}` not found; the `cm` TCP congestion control is not built (apt install clang)"
        );
        std::fs::write(&obj, b"").expect("write the empty object");
        return;
    }
    // libbpf's own headers (bpf_helpers.h, bpf_tracing.h) from libbpf-sys,
    // the uapi (linux/bpf.h) from the system's kernel headers.
    let libbpf_include = std::env::var("DEP_BPF_INCLUDE").expect("libbpf-sys exports its headers");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = match arch.as_str() {
        "x86_64" => "/usr/include/x86_64-linux-gnu",
        "aarch64" => "/usr/include/aarch64-linux-gnu",
        _ => "/usr/include",
    };
    let status = Command::new(&clang)
        .args([
            "-g", "-O2", "-target", "bpf", "-mcpu=v3", "-Wall", "-Werror",
        ])
        .arg(format!("-I{libbpf_include}"))
        .arg(format!("-I{multiarch}"))
        .arg("-Ibpf")
        .args(["-c", "bpf/cm_tcp.bpf.c", "-o"])
        .arg(&obj)
        .status()
        .expect("run clang");
    assert!(status.success(), "clang failed to compile bpf/cm_tcp.bpf.c");
}
