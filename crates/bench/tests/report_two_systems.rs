//! `hayate-bench report` over two synthetic runs, hayate and cassandra, as the peer harness
//! leaves them, plus a directory holding only a real YCSB summary: the charts exist and are well
//! formed, and the page has the table with the ratios against the baseline.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// A run of `seconds` at `ops_per_sec`, half reads, half updates, with a p95 of `p95_us`.
fn write_run(dir: &Path, label: &str, seconds: u32, ops_per_sec: u32, p95_us: u32) {
    std::fs::create_dir_all(dir).expect("create run dir");
    let mut csv = String::from("elapsed_s,operation,count,mean_us,p50_us,p95_us,p99_us,p999_us,max_us\n");
    for t in 1..=seconds {
        let half = ops_per_sec / 2;
        // Second 7 has no updates: its latency fields are empty.
        let updates = if t == 7 { 0 } else { half };
        let wobble = p95_us / 10 * (t % 3);
        let p95 = p95_us + wobble;
        csv.push_str(&format!(
            "{t},READ,{half},{},{},{p95},{},{},{}\n",
            p95 / 2,
            p95 / 3,
            p95 * 2,
            p95 * 3,
            p95 * 4
        ));
        if updates == 0 {
            csv.push_str(&format!("{t},UPDATE,0,,,,,,\n"));
        } else {
            csv.push_str(&format!(
                "{t},UPDATE,{updates},1,1,{p95},{},{},{}\n",
                p95 * 2,
                p95 * 3,
                p95 * 4
            ));
        }
        csv.push_str(&format!(
            "{t},Intended-READ,{half},1,1,{p95},{},{},{}\n",
            p95 * 2,
            p95 * 3,
            p95 * 4
        ));
        csv.push_str(&format!("{t},ALL,{},,,,,,,\n", half + updates));
    }
    std::fs::write(dir.join("timeseries.csv"), csv).expect("write csv");
    let ops = u64::from(ops_per_sec) * u64::from(seconds);
    std::fs::write(
        dir.join("summary.txt"),
        format!(
            "[OVERALL], RunTime(ms), {}\n[OVERALL], Throughput(ops/sec), {ops_per_sec}\n\
             [READ], Operations, {}\n[READ], 95thPercentileLatency(us), {p95_us}\n\
             [READ], 99thPercentileLatency(us), {}\n[UPDATE], Operations, {}\n\
             [UPDATE], 95thPercentileLatency(us), {p95_us}\n[UPDATE], Return=OK, 1\n",
            seconds * 1000,
            ops / 2,
            p95_us * 2,
            ops / 2
        ),
    )
    .expect("write summary");
    std::fs::write(
        dir.join("meta.json"),
        format!(r#"{{"label": "{label}", "phase": "run", "argv": [], "properties": {{}}, "threads": 16, "target_ops": null}}"#),
    )
    .expect("write meta");
}

fn report(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hayate-bench"))
        .arg("report")
        .args(args)
        .output()
        .expect("run hayate-bench")
}

/// Checks that the tags of an SVG or HTML document nest: every opened element is closed in
/// order, or closes itself.
fn assert_tags_nest(text: &str, void: &[&str]) {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').expect("a tag ends") + start;
        let tag = &rest[start + 1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('!') || tag.starts_with('?') {
            continue;
        }
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if let Some(closing) = tag.strip_prefix('/') {
            let open = stack.pop().unwrap_or_default();
            assert_eq!(open, closing.trim(), "mismatched closing tag");
        } else if !tag.ends_with('/') && !void.contains(&name.as_str()) {
            stack.push(name);
        }
    }
    assert!(stack.is_empty(), "unclosed tags: {stack:?}");
}

#[test]
fn two_systems_give_charts_and_a_page_with_ratios() {
    let root = scratch("report-two-systems");
    write_run(&root.join("hayate"), "hayate", 30, 14_000, 900);
    write_run(&root.join("cassandra"), "cassandra", 30, 1_000, 38_000);
    let ycsb = root.join("ycsb-only");
    std::fs::create_dir_all(&ycsb).expect("mkdir");
    std::fs::write(
        ycsb.join("summary.txt"),
        "Loading workload...\n[OVERALL], RunTime(ms), 60000\n[OVERALL], Throughput(ops/sec), 5000\n\
         [INSERT], Operations, 300000\n[INSERT], 95thPercentileLatency(us), 1200\n",
    )
    .expect("write");
    let out = root.join("out");
    let output = report(&[
        "-o",
        out.to_str().expect("utf-8 path"),
        "--title",
        "hayate vs Cassandra",
        "--baseline",
        "cassandra",
        "--png-scale",
        "0.5",
        root.join("hayate").to_str().expect("utf-8"),
        root.join("cassandra").to_str().expect("utf-8"),
        ycsb.to_str().expect("utf-8"),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("hayate / cassandra"), "{stdout}");

    for stem in [
        "run-throughput",
        "run-read-p95",
        "run-read-p99",
        "run-update-p95",
        "run-read-throughput",
    ] {
        let png = std::fs::read(out.join(format!("{stem}.png"))).expect("png written");
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{stem}.png is not a PNG");
        let svg = std::fs::read_to_string(out.join(format!("{stem}.svg"))).expect("svg written");
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert_tags_nest(&svg, &[]);
        assert!(
            svg.contains(">hayate</text>") && svg.contains(">cassandra</text>"),
            "{stem}: legend"
        );
    }
    // No run of this phase inserts, and the summary-only load run is not charted.
    assert!(!out.join("run-insert-p95.svg").exists());
    assert!(!out.join("load-throughput.svg").exists());

    let html = std::fs::read_to_string(out.join("index.html")).expect("index.html");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_tags_nest(&html, &["meta", "img", "br"]);
    assert!(html.contains("<table class=\"summary\">"));
    assert!(html.contains("<td>hayate / cassandra</td>"), "ratio row");
    assert!(html.contains("<td>14.00× higher</td>"), "throughput ratio");
    assert!(html.contains("<td>42.22× lower</td>"), "latency ratio");
    assert!(
        html.contains("<td>ycsb-only</td><td>load</td>"),
        "summary-only row"
    );
    assert!(html.contains("<td>5000</td>"), "insert rate of the YCSB run");
    assert!(html.contains("src=\"run-read-p95.svg\""));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn an_unknown_baseline_or_missing_directory_is_a_usage_error() {
    let root = scratch("report-errors");
    write_run(&root.join("hayate"), "hayate", 3, 100, 100);
    let hayate = root.join("hayate");
    let output = report(&[
        "--baseline",
        "mysql",
        "-o",
        root.join("out").to_str().expect("utf-8"),
        hayate.to_str().expect("utf-8"),
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no run is labelled 'mysql'") && stderr.contains("hayate"),
        "{stderr}"
    );

    let output = report(&[root.join("nowhere").to_str().expect("utf-8")]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a directory"));
    let _ = std::fs::remove_dir_all(&root);
}
