#!/usr/bin/env python3
"""Host memory of a sandbox with and without free page reporting: prints
figures, asserts nothing.

Each repeat creates two sandboxes of the same size. In the second one the
guest's balloon device is unbound from its driver first (as root),
so it is the same VM, kernel and workload without free page reporting: the
reference. For each it prints the QEMU process's host memory (benchlib's
host_memory_mib: resident pages, plus the whole memfd a restored guest's
RAM is in)

  idle       15 s after the sandbox is running;
  burst      right after the guest wrote and deleted 384 MiB in /dev/shm;
  after      15 s later (what an idle sandbox keeps of a burst it is done with);

as min/median/max over the repeats, and the ratio of the medians.

Runs against its own runtime and state dirs, so it never touches your
sandboxes. usage: bench/memory_bench.py [--repeats N] [--memory 1g] [--airlock PATH]
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
from benchlib import cli, host_memory_mib, mmm  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--repeats", type=int, default=3)
ap.add_argument("--memory", default="1g")
ap.add_argument("--burst-mib", type=int, default=384)
here = os.path.dirname(os.path.abspath(__file__))
default_cli = os.path.join(here, "..", "bazel-bin", "cli", "airlock")
ap.add_argument("--airlock", default=default_cli if os.path.exists(default_cli) else "airlock")
args = ap.parse_args()

tmp = tempfile.mkdtemp(prefix="airlock-membench-", dir="/tmp")
env = dict(os.environ, AIRLOCK_RUNTIME_DIR=tmp + "/run", AIRLOCK_STATE_DIR=tmp + "/state")
airlock = cli(args.airlock, env)


def sandbox(name):
    for sb in json.loads(airlock("ls", "--json").stdout):
        if sb["name"] == name:
            return sb
    return None



def measure(name, reporting):
    airlock("create", "--name", name, "-m", args.memory, "shell")
    for _ in range(600):
        sb = sandbox(name)
        if sb and sb["state"] == "running":
            break
        if sb and sb["state"] == "failed":
            sys.exit(f"sandbox {name} failed: {sb.get('failure')}")
        time.sleep(0.5)
    pid = sandbox(name)["pid"]
    started.append(sandbox(name).get("started_from", "?"))
    if not reporting:
        # Unbinding the device stops the driver, as rmmod would.
        airlock("exec", "-u", "root", name, "--", "sh", "-c",
                "d=/sys/bus/virtio/drivers/virtio_balloon; "
                "for v in $d/virtio*; do basename $v > $d/unbind; done")
    time.sleep(15)
    idle = host_memory_mib(pid)
    airlock("exec", name, "--", "sh", "-c",
            f"dd if=/dev/zero of=/dev/shm/burst bs=1M count={args.burst_mib} 2>/dev/null && "
            "rm /dev/shm/burst")
    burst = host_memory_mib(pid)
    time.sleep(15)
    after = host_memory_mib(pid)
    airlock("rm", "-f", name)
    return idle, burst, after


started = []
try:
    figures = {True: [], False: []}
    for i in range(args.repeats):
        for reporting in (True, False):
            figures[reporting].append(measure(f"mem{i}{'r' if reporting else 'n'}", reporting))
    print(f"guest memory {args.memory}, burst {args.burst_mib} MiB, {args.repeats} repeats; "
          f"started from: {', '.join(started)}")
    for k, label in enumerate(("idle", "burst", "after")):
        on = [f[k] for f in figures[True]]
        off = [f[k] for f in figures[False]]
        print(f"{label:6s} reporting {mmm(on, 'MiB', '%.0f')} | "
              f"without {mmm(off, 'MiB', '%.0f')} | "
              f"ratio {statistics.median(on) / statistics.median(off):.2f}")
finally:
    subprocess.run([args.airlock, "rm", "-f", "--all"], env=env, capture_output=True)
    subprocess.run([args.airlock, "daemon", "stop"], env=env, capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)
