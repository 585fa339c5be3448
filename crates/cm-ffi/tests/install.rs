//! install.sh fills in cm.pc from cm.pc.in, and a C program builds with
//! `pkg-config --cflags --libs cm` against the installed files and runs.

mod common;

use std::process::Command;
use std::time::Duration;

#[test]
fn install_and_build_with_pkg_config() {
    let prefix = common::TempDir::new("prefix");
    let o = Command::new("bash")
        .arg(common::crate_dir().join("install.sh"))
        .arg("--prefix")
        .arg(&prefix.0)
        .arg("--from")
        .arg(common::lib_dir())
        .output()
        .expect("run install.sh");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in [
        "lib/libcm.so",
        "lib/libcm.a",
        "include/cm.h",
        "include/cm_compat.h",
        "lib/pkgconfig/cm.pc",
    ] {
        assert!(prefix.0.join(f).exists(), "{f} not installed");
    }
    let pc = std::fs::read_to_string(prefix.0.join("lib/pkgconfig/cm.pc")).expect("cm.pc");
    assert!(!pc.contains('@'), "unfilled placeholder in cm.pc:\n{pc}");
    assert!(pc.contains("Version: 0."), "{pc}");

    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "cm"])
        .env("PKG_CONFIG_PATH", prefix.0.join("lib/pkgconfig"))
        .output()
        .expect("run pkg-config");
    assert!(
        flags.status.success(),
        "{}",
        String::from_utf8_lossy(&flags.stderr)
    );
    let flags = String::from_utf8_lossy(&flags.stdout).into_owned();
    assert!(flags.contains("-lcm"), "{flags}");

    let exe = prefix.0.join("alf_sender");
    let o = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Werror"])
        .arg(common::crate_dir().join("examples/c/alf_sender.c"))
        .args(flags.split_whitespace())
        .arg(format!("-Wl,-rpath,{}", prefix.0.join("lib").display()))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run cc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = common::run(
        &exe,
        &["50"],
        &[
            ("CM_EXAMPLE_MODE", "embedded"),
            ("CM_SOCKET", "/nonexistent/cm-ffi-test.sock"),
        ],
        Duration::from_secs(60),
    );
    assert!(r.ok, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.num("alf", "acked"), 50.0);
}
