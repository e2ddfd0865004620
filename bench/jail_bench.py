#!/usr/bin/env python3
"""The jail's cost: cold start and warm exec with QEMU and virtiofsd jailed
(vmmd's default) beside the same with `jail = false`, in one run. Prints
figures, asserts nothing.

  cold run   `airlock run --rm shell -- true` (create + boot + exec + rm);
  cold share the same with a direct-mode workspace (virtiofsd jailed too);
  warm exec  `airlock exec NAME -- true` round trips.

Two daemon sets with their own runtime and state dirs, run alternately so
both see the same machine. usage: bench/jail_bench.py [--runs N] [--execs N]
"""
import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import cli, mmm, timed  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--execs", type=int, default=40)
here = os.path.dirname(os.path.abspath(__file__))
default_cli = os.path.join(here, "..", "bazel-bin", "cli", "airlock")
ap.add_argument("--airlock", default=default_cli if os.path.exists(default_cli) else "airlock")
args = ap.parse_args()

tmp = tempfile.mkdtemp(prefix="airlock-jailbench-", dir="/tmp")
sets = {}
for label, jail in (("jailed", "true"), ("unjailed", "false")):
    state = f"{tmp}/{label}/state"
    os.makedirs(state)
    with open(f"{state}/vmmd.conf", "w") as f:
        f.write(f"jail = {jail}\n")
    env = dict(os.environ, AIRLOCK_RUNTIME_DIR=f"{tmp}/{label}/run", AIRLOCK_STATE_DIR=state)
    env["AIRLOCK_API_LISTEN"] = "127.0.0.1:0"  # two apids: any free port
    sets[label] = cli(args.airlock, env)
ws = f"{tmp}/ws"
os.makedirs(ws)
os.chown(ws, 1000, 1000)

cold = {k: [] for k in sets}
share = {k: [] for k in sets}
warm = {k: [] for k in sets}
try:
    for label, a in sets.items():
        a("daemon", "start")
        a("run", "--rm", "-m", "1g", "shell", "--", "true")  # the first boot probes KVM
        a("create", "--name", "warm", "-m", "1g", "shell")
    for i in range(args.runs):
        for label, a in sets.items():
            cold[label].append(timed(lambda: a("run", "--rm", "-m", "1g", "shell", "--", "true")))
            share[label].append(timed(lambda: a("run", "--rm", "-m", "1g", "shell", ws, "--", "true")))
    for i in range(args.execs):
        for label, a in sets.items():
            warm[label].append(timed(lambda: a("exec", "warm", "--", "true")))
    print(f"jail cost on this machine ({args.runs} cold runs, {args.execs} execs per set, alternating)")
    for name, figures in (("cold run --rm shell -- true", cold),
                          ("cold run with a direct-mode workspace", share),
                          ("warm exec true", warm)):
        import statistics
        j, u = statistics.median(figures["jailed"]), statistics.median(figures["unjailed"])
        scale, unit, fmt = (1000, "ms", "%.0f") if name.startswith("warm") else (1, "s", "%.2f")
        print(f"  {name}:")
        print(f"    jailed    {mmm([x * scale for x in figures['jailed']], unit, fmt)}")
        print(f"    unjailed  {mmm([x * scale for x in figures['unjailed']], unit, fmt)}")
        print(f"    ratio (median jailed / unjailed) {j / u:.3f}")
finally:
    for label, a in sets.items():
        try:
            a("rm", "-f", "--all")
            a("daemon", "stop")
        except SystemExit:
            pass
    shutil.rmtree(tmp, ignore_errors=True)
