//! `hayate-bench act` on a small file: a few seconds at a low rate give ACT's dumps, the latency
//! table and a verdict that agrees with the exit status; broken configs and devices fail with a
//! message that says what to fix.
//!
//! Files live under Cargo's target directory rather than /tmp, which may be tmpfs and refuse
//! O_DIRECT.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

fn act(config: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hayate-bench"))
        .arg("act")
        .args(extra)
        .arg(config)
        .output()
        .expect("run hayate-bench")
}

#[test]
fn a_short_run_on_a_file_prints_the_table_and_a_verdict() {
    let dir = scratch("act-small-file");
    // In a folder that does not exist yet: the tool makes it, as it makes the file.
    let device = dir.join("not-yet").join("device.bin");
    let config = dir.join("act.conf");
    std::fs::write(
        &config,
        format!(
            "# a tiny load on a 64 MiB file\ndevice-names: {}\nfile-size-mbytes: 64\n\
             test-duration-sec: 3600\nread-reqs-per-sec: 200\nwrite-reqs-per-sec: 100\n\
             service-threads: 2\n",
            device.display()
        ),
    )
    .expect("write config");
    let output = act(&config, &["--duration-sec", "3", "--seed", "7"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        std::fs::metadata(&device).map(|m| m.len()).unwrap_or(0),
        64 << 20,
        "the file is created at file-size-mbytes"
    );
    for expected in [
        "ACT-STORAGE CONFIGURATION",
        "large-block-writes-per-sec: 2.35",
        "after 1 sec:",
        "after 3 sec:",
        "reads (",
        "large-block-writes (",
        "LATENCY TABLE",
        "slice        1      2      4      8     16     32     64",
        "  max ",
        "reads: worst slice",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}\n{stderr}"
        );
    }
    // About 600 reads in 3 s; the schedule must not have been skipped.
    let total_line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("reads ("))
        .expect("a reads dump");
    let reads: u64 = total_line
        .trim_start_matches("reads (")
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a total");
    assert!((500..=700).contains(&reads), "{reads} reads in 3 s at 200/s");
    let passed = stdout.contains("RESULT: PASS");
    assert!(passed || stdout.contains("RESULT: FAIL"));
    assert_eq!(
        output.status.code(),
        Some(if passed { 0 } else { 1 }),
        "{stdout}\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_key_is_refused_with_its_line() {
    let dir = scratch("act-unknown-key");
    let config = dir.join("act.conf");
    std::fs::write(
        &config,
        "device-names: /dev/null\ntest-duration-sec: 10\nread-reqs-per-second: 2000\n",
    )
    .expect("write config");
    let output = act(&config, &[]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("line 3") && stderr.contains("'read-reqs-per-second'"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_device_that_cannot_be_opened_is_named() {
    let dir = scratch("act-no-device");
    let config = dir.join("act.conf");
    let missing = dir.join("no-such-dir").join("device");
    std::fs::write(
        &config,
        format!(
            "device-names: {}\ntest-duration-sec: 10\nread-reqs-per-sec: 10\n",
            missing.display()
        ),
    )
    .expect("write config");
    let output = act(&config, &[]);
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot open device") && stderr.contains("no-such-dir"),
        "{stderr}"
    );

    // A config file that does not exist is a usage error.
    let output = act(&dir.join("absent.conf"), &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot read config file"));
    let _ = std::fs::remove_dir_all(&dir);
}
