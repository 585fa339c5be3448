//! The `cm` command-line tool.

fn main() {}
