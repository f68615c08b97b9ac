"""Scenarios run inside a private network namespace (`unshare -n`), where nftables rules can cut
traffic between loopback addresses without touching the machine's network, and where the
default ports of 127.0.0.x are always free.

A test calls `run_scenario(__file__, args, ...)`, which runs that same file as a script under
`unshare -n` (the script's `__main__` block runs the scenario); nodes the script started are
killed afterwards, whatever happened, from the pid file it keeps (`HAYATE_PID_FILE`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def requirements_problem() -> str | None:
    """Why scenarios cannot run here (root, unshare, ip, nft), or None."""
    if os.geteuid() != 0:
        return "needs root, for a private network namespace (unshare -n) and nft rules in it"
    for tool, package in (("unshare", "util-linux"), ("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (Debian: apt-get install {package}; scripts/driver-tests.sh does it as root)"
    probe = subprocess.run(["unshare", "-n", "--", "nft", "list", "ruleset"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot use nft in a private network namespace here: {probe.stderr.strip()[:200]}"
    return None


def kill_leftover_nodes(pid_file: Path) -> None:
    """Kills nodes the scenario started if it died without doing so (a timeout kills only it)."""
    if not pid_file.exists():
        return
    for line in pid_file.read_text().split():
        pid = int(line)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"hayate" in cmdline:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


def nft(*args: str) -> str:
    return subprocess.run(["nft", *args], check=True, capture_output=True, text=True).stdout


def cut(table: str, a: str, b: str) -> None:
    """Drops every TCP and UDP packet between addresses a and b, both ways, with the rules of
    nftables table `table` (counted: see `dropped_packets`)."""
    nft("add", "table", "inet", table)
    nft("add", "chain", "inet", table, "out", "{ type filter hook output priority 0 ; policy accept ; }")
    for src, dst in ((a, b), (b, a)):
        nft("add", "rule", "inet", table, "out", "ip", "saddr", src, "ip", "daddr", dst,
            "meta", "l4proto", "{ tcp, udp }", "counter", "drop")


def dropped_packets(table: str) -> int:
    """Packets the rules of `table` dropped so far."""
    text = nft("list", "table", "inet", table)
    return sum(int(part.split()[1]) for part in text.split("counter")[1:])


def heal(table: str) -> None:
    """Removes the rules `cut` added."""
    nft("delete", "table", "inet", table)


def run_scenario(script: str, args: list[str], pid_file: Path, timeout_s: float, what: str) -> str:
    """Runs `script` (a test file) under `unshare -n` with `args`; skips the test when the machine
    cannot, fails it with the scenario's output when it fails or times out. Returns its stdout."""
    if os.environ.get("HAYATE_REFERENCE"):
        pytest.skip("starts its own hayate cluster (HAYATE_REFERENCE is set)")
    problem = requirements_problem()
    if problem:
        pytest.skip(problem)
    env = {**os.environ, "PYTHONPATH": str(HERE), "HAYATE_PID_FILE": str(pid_file), "NO_COLOR": "1"}
    try:
        proc = subprocess.run(
            ["unshare", "-n", "--", sys.executable, str(Path(script).resolve()), *args],
            capture_output=True, text=True, timeout=timeout_s, env=env, cwd=HERE)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"the {what} scenario did not finish within {timeout_s} s:\n{out[-6000:]}")
    finally:
        kill_leftover_nodes(pid_file)
    print(proc.stdout[-4000:])
    # The head of stderr holds the verdict (an assertion's first line), its tail what led to it.
    err = proc.stderr if len(proc.stderr) <= 12000 else f"{proc.stderr[:4000]}\n[...]\n{proc.stderr[-8000:]}"
    assert proc.returncode == 0, f"the {what} scenario failed:\n{proc.stdout[-8000:]}\n{err}"
    return proc.stdout
