//! Placeholder: being built.

use std::process::ExitCode;

pub fn main(_args: &[String]) -> ExitCode {
    eprintln!("hayate-bench act: not built yet");
    ExitCode::from(2)
}
