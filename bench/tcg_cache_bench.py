#!/usr/bin/env python3
"""TCG's translation cache size (vmmd --tcg-cache-mib): prints figures,
asserts nothing.

For each size in --sizes, vmmd is started with that cache and one sandbox
runs code-heavy work --repeats times in a row:

  shell   a git repository of 100 files made, committed and packed, a perl
          loop, find | sort | awk over /usr and grep | sed over /etc (base
          image);
  node    node sorting 200,000 objects, then `npm --version` (the agent
          image; left out when the image store has no agent:latest);

and prints each run's time (the first translates everything; the later
ones show what a full cache costs in retranslation), the median of the
later runs beside the default size's as a ratio, and the sandbox's host
memory 15 s after the work is done (benchlib's parts: its own, then the
shared file pages). The default size (256 MiB) is the reference.

QEMU keeps every page of the cache it filled: a full cache is flushed and
refilled, never returned, so the memory figure is what an idle sandbox
holds after such work.

vmmd runs with --snapshots=false: each cache size is a new snapshot key,
and the snapshot vmmd would make in the background after each first boot
(a second VM booting) would share the CPUs with the timed work.

Runs against its own runtime and state dirs, so it never touches your
sandboxes. usage: bench/tcg_cache_bench.py [--sizes 64,256] [--repeats N]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import host_memory_parts_mib, run  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--sizes", default="64,256", help="comma-separated MiB; 256 is the default")
ap.add_argument("--repeats", type=int, default=4)
ap.add_argument("--memory", default="1g")
here = os.path.dirname(os.path.abspath(__file__))
default_cli = os.path.join(here, "..", "bazel-bin", "cli", "airlock")
ap.add_argument("--airlock", default=default_cli if os.path.exists(default_cli) else "airlock")
args = ap.parse_args()
try:
    sizes = [int(s) for s in args.sizes.split(",") if s]
except ValueError:
    sys.exit(f"--sizes must be comma-separated numbers of MiB, not {args.sizes!r}")
if any(not 32 <= s <= 2048 for s in sizes):
    sys.exit("--sizes: each size must be from 32 to 2048 MiB (vmmd's --tcg-cache-mib range)")
if 256 not in sizes:
    sizes.append(256)
if args.repeats < 2:
    sys.exit("--repeats must be at least 2 (the first run translates everything)")

WORK = {
    "shell": """set -e
cd /tmp && rm -rf w && mkdir w && cd w
s=$(date +%s%N)
git init -q . && for i in $(seq 100); do echo "line $i" > f$i; done
git add . && git -c user.name=a -c user.email=a@b commit -qm x
git log --oneline >/dev/null; git gc -q
perl -e 'my %h; for (1..20000) { $h{$_ % 97} .= "x" } print scalar(keys %h)' >/dev/null
find /usr -type f 2>/dev/null | head -3000 | sort | awk '{n+=length($0)} END {print n}' >/dev/null
grep -r main /etc 2>/dev/null | sed s/a/b/ | wc -l >/dev/null
echo $(( ($(date +%s%N) - s) / 1000000 ))
""",
    "node": """set -e
s=$(date +%s%N)
node -e 'let a=[];for(let i=0;i<200000;i++)a.push({i,s:String(i)});a.sort((x,y)=>y.i-x.i)'
npm --version >/dev/null
echo $(( ($(date +%s%N) - s) / 1000000 ))
""",
}
IMAGE = {"shell": "base", "node": "agent"}

tmp = tempfile.mkdtemp(prefix="airlock-tcgbench-", dir="/tmp")
env = dict(os.environ, AIRLOCK_RUNTIME_DIR=tmp + "/run", AIRLOCK_STATE_DIR=tmp + "/state")
os.makedirs(tmp + "/state")


def airlock(*a):
    return run([args.airlock, *a], env=env)


def pid_of(name):
    for sb in json.loads(airlock("ls", "--json").stdout):
        if sb["name"] == name:
            return sb["pid"]
    sys.exit(f"sandbox {name} is not listed")


results = {}  # (size, work) -> (runs in ms, (own, files) MiB)
try:
    airlock("daemon", "start")
    templates = airlock("template", "ls").stdout
    works = [w for w in WORK if w != "node" or "agent:latest" in templates]
    if "node" not in works:
        print("no agent:latest in the image store: the node work is left out")
    for size in sizes:
        airlock("daemon", "stop")
        with open(tmp + "/state/vmmd.conf", "w") as f:
            f.write(f"tcg-cache-mib = {size}\nsnapshots = false\n")
        airlock("daemon", "start")
        for work in works:
            name = f"tcg{size}-{work}"
            airlock("create", "--name", name, "-m", args.memory, "-t", IMAGE[work], "shell")
            runs = [int(airlock("exec", name, "--", "sh", "-c", WORK[work]).stdout.split()[-1])
                    for _ in range(args.repeats)]
            time.sleep(15)  # the guest's free page reporting settles
            results[(size, work)] = (runs, host_memory_parts_mib(pid_of(name)))
            airlock("rm", "-f", name)
    print(f"guest memory {args.memory}, {os.cpu_count()} host CPUs, {args.repeats} runs in a row "
          "per sandbox (the first translates everything)")
    for work in works:
        ref = statistics.median(results[(256, work)][0][1:])
        for size in sizes:
            runs, (own, files) = results[(size, work)]
            later = statistics.median(runs[1:])
            print(f"{work:5s} cache {size:4d} MiB: runs {' '.join(f'{r / 1000:.2f}' for r in runs)} s;"
                  f" later median {later / 1000:.2f} s ({later / ref:.2f}x of 256 MiB); "
                  f"memory after {own + files:.0f} MiB ({own:.0f} its own + {files:.0f} shared)")
finally:
    subprocess.run([args.airlock, "rm", "-f", "--all"], env=env, capture_output=True)
    subprocess.run([args.airlock, "daemon", "stop"], env=env, capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)
