//! Writes the seed corpus for the `control_decode` fuzz target: one valid
//! frame per message kind of each direction, a batched frame of each, and an
//! empty frame. Usage: `cargo run --bin gen_corpus -- DIR` (from `fuzz/`).

use std::path::PathBuf;

use cm_ipc::{Frame, Message, ToClient, ToDaemon};

fn frame<M: Message>(msgs: &[M]) -> Vec<u8> {
    let mut f = Frame::new();
    for m in msgs {
        f.push(m);
    }
    f.finish()
}

fn main() {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "corpus/control_decode".into()),
    );
    std::fs::create_dir_all(&dir).expect("create corpus dir");

    let daemon = cm_ipc::examples::to_daemon();
    let client = cm_ipc::examples::to_client();

    let mut files: Vec<(String, Vec<u8>)> = vec![("empty".into(), frame::<ToDaemon>(&[]))];
    for (i, m) in daemon.iter().enumerate() {
        files.push((format!("daemon-{i:02}"), frame(std::slice::from_ref(m))));
    }
    files.push(("daemon-batch".into(), frame(&daemon)));
    for (i, m) in client.iter().enumerate() {
        files.push((format!("client-{i:02}"), frame(std::slice::from_ref(m))));
    }
    files.push(("client-batch".into(), frame(&client)));

    for (name, bytes) in &files {
        // The seeds must decode; a generator bug would otherwise go unnoticed.
        let ok = cm_ipc::decode_frame::<ToDaemon>(bytes).is_ok()
            || cm_ipc::decode_frame::<ToClient>(bytes).is_ok();
        assert!(ok, "seed {name} does not decode");
        std::fs::write(dir.join(name), bytes).expect("write seed");
    }
    println!("wrote {} seeds to {}", files.len(), dir.display());
}
