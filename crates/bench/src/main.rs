//! `hayate-bench`: the YCSB-compatible client and ACT device test. Built by the benchmark issue;
//! until then the storage engine's own benchmark is `storage-bench` in `hayate-storage`.

fn main() {
    eprintln!(
        "hayate-bench is not built yet (see the benchmark issue); \
         for the storage engine benchmark run: cargo run --release -p hayate-storage --bin storage-bench -- --help"
    );
    std::process::exit(2);
}
