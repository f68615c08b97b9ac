//! The `hayate` node. Being built; see the CQL server issue.

mod auth;
mod config;
mod metrics;

fn main() {
    eprintln!("hayate: the CQL server is not built yet (see the CQL server issue).");
    std::process::exit(2);
}
