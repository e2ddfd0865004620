#!/usr/bin/env python3
"""Agent benchmarks: prints figures, asserts nothing.

In one run, with its own daemons (runtime and state dirs of its own, the
operator network settings tools/configure_network.sh writes, deny-all):

  install   `airlock run --rm claude -- --version` with no agents/claude
            image (the install: a sandbox of its own, npm from the real
            registry through proxyd, the save as an image), vs the same
            `npm install -g` of the same version run directly on the host
            into a scratch prefix (the reference: no VM, no proxy, no save);
  cached    the same command once the image exists;
  start     `airlock run --rm claude -- true` once the image exists (the
            agent's sandbox without its CLI's own start-up, which is slow
            under TCG), vs
  shell     `airlock run --rm shell -- true` (the floor: a boot and an exec);
  size      the agent template's and the agents/claude image's sizes.

Each figure is min/median/max over its runs (--installs for the install,
--runs for the others), and each ratio is of medians. usage:
bench/agents_bench.py [--installs N] [--runs N] [--version V] [--airlock PATH]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchlib import cli, mmm, run, timed

ap = argparse.ArgumentParser()
ap.add_argument("--installs", type=int, default=2)
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--version", default="2.1.332")
here = os.path.dirname(os.path.abspath(__file__))
top = os.path.join(here, "..")
default_cli = os.path.join(top, "bazel-bin", "cli", "airlock")
ap.add_argument("--airlock", default=default_cli if os.path.exists(default_cli) else "airlock")
args = ap.parse_args()

tmp = tempfile.mkdtemp(prefix="airlock-abench-", dir="/tmp")
env = dict(os.environ, AIRLOCK_RUNTIME_DIR=tmp + "/run", AIRLOCK_STATE_DIR=tmp + "/state")
PKG = "@anthropic-ai/claude-code"
TAG = "agents/claude:" + args.version
airlock = cli(args.airlock, env)


def image_size(name):
    for img in json.loads(airlock("template", "ls", "--json").stdout):
        if name in img["names"]:
            return img["size_bytes"]
    return 0


def version_run():
    out = airlock("run", "--rm", "--kit-arg", "version=" + args.version, "claude", "--",
                  "--version").stdout
    if args.version not in out:
        sys.exit(f"claude --version printed {out!r}")


try:
    os.makedirs(tmp + "/state", mode=0o700)
    run(["bash", os.path.join(top, "tools", "configure_network.sh"), tmp + "/state"])
    airlock("policy", "init", "deny-all")

    installs, direct = [], []
    for i in range(args.installs):
        if image_size(TAG):
            airlock("template", "rm", TAG)
        installs.append(timed(version_run))
        prefix = f"{tmp}/npm-{i}"
        direct.append(timed(lambda: run(
            ["npm", "install", "-g", "--prefix", prefix, "--cache", prefix + "-cache",
             "--no-fund", "--no-audit", "--loglevel=error", "--allow-scripts=" + PKG,
             f"{PKG}@{args.version}"])))
        shutil.rmtree(prefix, ignore_errors=True)
        shutil.rmtree(prefix + "-cache", ignore_errors=True)
    cached = [timed(version_run) for _ in range(args.runs)]
    start = [timed(lambda: airlock("run", "--rm", "--kit-arg", "version=" + args.version,
                                   "claude", "--", "true")) for _ in range(args.runs)]
    shell = [timed(lambda: airlock("run", "--rm", "shell", "--", "true"))
             for _ in range(args.runs)]
    med = statistics.median
    print(f"agents benchmark ({os.cpu_count()} CPUs; claude {args.version}; "
          f"{args.installs} installs, {args.runs} runs)")
    print(f"  install: airlock run claude -- --version  {mmm(installs)}")
    print(f"           npm install -g on the host        {mmm(direct)}")
    print(f"           ratio airlock/host                {med(installs) / med(direct):.2f}")
    print(f"  cached:  airlock run claude -- --version  {mmm(cached)}")
    print(f"  start:   airlock run claude -- true        {mmm(start)}")
    print(f"  shell:   airlock run shell -- true         {mmm(shell)}")
    print(f"           ratio cached/shell                {med(cached) / med(shell):.2f}")
    print(f"           ratio start/shell                 {med(start) / med(shell):.2f}")
    print(f"  size:    agent:latest {image_size('agent:latest') / 2**20:.0f} MiB, "
          f"{TAG} {image_size(TAG) / 2**20:.0f} MiB")
finally:
    subprocess.run([args.airlock, "rm", "-f", "--all"], env=env, capture_output=True)
    subprocess.run([args.airlock, "daemon", "stop"], env=env, capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)
