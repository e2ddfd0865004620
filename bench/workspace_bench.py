#!/usr/bin/env python3
"""Workspace benchmarks: prints figures, asserts nothing.

Direct mode:

Writes then reads a file of --mib MiB (dd, fsync'd; the read after dropping
the guest's page cache) and creates --files small files, inside a sandbox on
a shared directory, and does the same work on the host in the same
directory; prints MiB/s and files/s for both and their ratio.
Then creates and deletes --small-files empty files in the shared directory
and on the guest's own disk (its root, virtio-blk), --repeats times each,
and prints min/median/max of both and the ratio of the medians (the
sandbox issue's goal: the workspace at most 1.5 times the guest's disk).
Clone mode: the time of `git fetch sandbox-NAME` on the host for one new
commit made in the guest (median of --fetches).
usage: bench/workspace_bench.py [--mib N] [--files N] [--small-files N]
                                [--repeats N] [--airlock PATH]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--mib", type=int, default=128)
ap.add_argument("--files", type=int, default=300)
ap.add_argument("--fetches", type=int, default=5)
ap.add_argument("--small-files", type=int, default=1000)
ap.add_argument("--repeats", type=int, default=5)
here = os.path.dirname(os.path.abspath(__file__))
default_cli = os.path.join(here, "..", "bazel-bin", "cli", "airlock")
ap.add_argument("--airlock", default=default_cli if os.path.exists(default_cli) else "airlock")
args = ap.parse_args()

tmp = tempfile.mkdtemp(prefix="airlock-wsbench-", dir="/tmp")
env = dict(os.environ, AIRLOCK_RUNTIME_DIR=tmp + "/run", AIRLOCK_STATE_DIR=tmp + "/state")
ws = tmp + "/ws"
os.makedirs(ws)
os.chown(ws, 1000, 1000)

WORK = f"""set -e
cd "$1"
now() {{ date +%s.%N; }}
t0=$(now); dd if=/dev/zero of=big bs=1M count={args.mib} conv=fsync 2>/dev/null; t1=$(now)
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
t2=$(now); dd if=big of=/dev/null bs=1M 2>/dev/null; t3=$(now)
i=0; while [ $i -lt {args.files} ]; do echo $i > f$i; i=$((i+1)); done; sync; t5=$(now)
rm -f big f*
echo write $(awk "BEGIN {{ print $t1 - $t0 }}")
echo read $(awk "BEGIN {{ print $t3 - $t2 }}")
echo files $(awk "BEGIN {{ print $t5 - $t3 }}")
"""

# Milliseconds to create and delete N empty files in "$1", timed in the
# guest (the shell's own work is the same on both sides).
SMALL = f"""set -e
mkdir -p "$1/airlock-small" && cd "$1/airlock-small"
s=$(date +%s%N)
i=0; while [ $i -lt {args.small_files} ]; do : > f$i; i=$((i+1)); done
rm -f f*
echo $(( ($(date +%s%N) - s) / 1000000 ))
cd .. && rmdir airlock-small
"""


def parse(out):
    return {k: float(v) for k, v in re.findall(r"^(\w+) ([0-9.e+-]+)$", out, re.M)}


def airlock(*a):
    r = subprocess.run([args.airlock, *a], env=env, capture_output=True, text=True)
    if r.returncode != 0 or "wsbench" in a and "exec" in a and not r.stdout:
        sys.exit(f"airlock {' '.join(a)} failed: {r.stderr}")
    return r.stdout


try:
    airlock("create", "--name", "wsbench", "-m", "1g", "shell", ws)
    # The files loop is timed from the end of the read on.
    guest = parse(airlock("exec", "-u", "root", "wsbench", "--", "sh", "-c", WORK, "sh", ws))
    host = parse(subprocess.run(["sh", "-c", WORK, "sh", ws], capture_output=True, text=True).stdout)
    if len(guest) != 3 or len(host) != 3:
        sys.exit(f"unexpected output: guest {guest} host {host}")
    for key, unit, amount in (("write", "MiB/s", args.mib), ("read", "MiB/s", args.mib),
                              ("files", "files/s", args.files)):
        g, h = amount / guest[key], amount / host[key]
        print(f"{key:6} sandbox {g:10.1f} {unit:8} host {h:10.1f} {unit:8} ratio {g / h:.2f}")

    import statistics
    small = {"workspace": [], "guest disk": []}
    for _ in range(args.repeats):
        for label, where in (("workspace", ws), ("guest disk", "/var/tmp")):
            out = airlock("exec", "-u", "root", "wsbench", "--", "sh", "-c", SMALL, "sh", where)
            small[label].append(int(out.split()[-1]))
    print(f"create+delete {args.small_files} files, {args.repeats} repeats:")
    for label, ms in small.items():
        print(f"  {label:10} min {min(ms)} / median {statistics.median(ms):.0f} / max {max(ms)} ms")
    print(f"  workspace / guest disk: "
          f"{statistics.median(small['workspace']) / statistics.median(small['guest disk']):.2f}x")

    # Clone mode: one commit in the guest, then a timed fetch on the host.
    repo = tmp + "/repo"
    gitenv = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", HOME=tmp)
    subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True, env=gitenv)
    subprocess.run(["sh", "-c", "echo 0 > n && git add n && git -c user.name=b -c user.email=b@b "
                    "commit -qm start"], cwd=repo, check=True, env=gitenv)
    airlock("create", "--clone", "--name", "fetchbench", "-m", "1g", "shell", repo)
    times = []
    for i in range(args.fetches):
        airlock("exec", "fetchbench", "--", "sh", "-c", f"echo commit{i} > n && git commit -qam c{i}")
        t0 = time.monotonic()
        subprocess.run(["git", "fetch", "-q", "sandbox-fetchbench"], cwd=repo, check=True, env=gitenv)
        times.append(time.monotonic() - t0)
    print(f"clone-mode fetch of one commit: median {statistics.median(times) * 1000:.0f} ms "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}, n={len(times)})")
finally:
    subprocess.run([args.airlock, "rm", "-f", "--all"], env=env, capture_output=True)
    subprocess.run([args.airlock, "daemon", "stop"], env=env, capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)
