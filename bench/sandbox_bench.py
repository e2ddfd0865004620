#!/usr/bin/env python3
"""Sandbox benchmarks: prints figures, asserts nothing.

  cold run   `airlock run NEW shell -- echo ready` until "ready" is printed
             (create + boot + exec), median of --runs;
  bare boot  the same QEMU command line vmmd used (same kernel, initramfs,
             template overlay, agent channel) started directly, until the
             agent prints its ready line; the ratio is Airlock's overhead;
  warm exec  `airlock exec NAME -- true` round trips: median and p99;
  idle RSS   resident memory of one idle sandbox's QEMU process.

Runs against its own runtime and state dirs, so it never touches your
sandboxes. usage: bench/sandbox_bench.py [--runs N] [--execs N] [--airlock PATH]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--execs", type=int, default=50)
ap.add_argument("--memory", default="1g")
here = os.path.dirname(os.path.abspath(__file__))
default_cli = os.path.join(here, "..", "bazel-bin", "cli", "airlock")
ap.add_argument("--airlock", default=default_cli if os.path.exists(default_cli) else "airlock")
args = ap.parse_args()

tmp = tempfile.mkdtemp(prefix="airlock-bench-", dir="/tmp")
env = dict(os.environ, AIRLOCK_RUNTIME_DIR=tmp + "/run", AIRLOCK_STATE_DIR=tmp + "/state")


def airlock(*a, check=True):
    r = subprocess.run([args.airlock, *a], env=env, capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"airlock {' '.join(a)} failed ({r.returncode}): {r.stderr}")
    return r


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def qemu_pid(name):
    import json
    for sb in json.loads(airlock("ls", "--json").stdout):
        if sb["name"] == name:
            return sb["pid"]
    return 0


try:
    airlock("daemon", "start")
    # The first boot also probes KVM; keep it out of the figures.
    airlock("run", "--name", "warmup", "-m", args.memory, "shell", "--", "true")

    cold = []
    for i in range(args.runs):
        t0 = time.monotonic()
        r = airlock("run", "--name", f"cold{i}", "-m", args.memory, "shell", "--", "echo", "ready")
        cold.append(time.monotonic() - t0)
        assert r.stdout == "ready\n", r.stdout
        airlock("rm", "-f", f"cold{i}")

    # The bare boot reuses vmmd's exact command line with its own files.
    pid = qemu_pid("warmup")
    argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[:-1]
    argv = [a.decode() for a in argv]
    sbdir = f"{tmp}/state/sandboxes/warmup"
    # A jailed QEMU sees its kernel and initramfs at /vm/ (vmmd/qemu_backend.h).
    images = os.environ.get("AIRLOCK_IMAGE_DIR", os.path.expanduser("~/.cache/airlock/images"))
    kernel = f"{images}/kernel/vmlinux"
    if not os.path.exists(kernel):
        kernel = f"{images}/kernel/vmlinuz"
    initrd = f"{images}/initramfs/initramfs.cpio"
    base = f"{tmp}/bare"
    os.makedirs(base)
    bare = []
    for i in range(args.runs):
        disk = f"{base}/disk{i}.qcow2"
        backing = subprocess.run(["qemu-img", "info", "-U", "--output=json", f"{sbdir}/disk.qcow2"],
                                 capture_output=True, text=True).stdout
        import json
        backing_file = json.loads(backing)["backing-filename"]
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", backing_file, "-F", "raw",
                        disk], check=True)
        console = f"{base}/console{i}.log"
        a = [x.replace(f"{sbdir}/disk.qcow2", disk)
              .replace(f"{sbdir}/console.log", console)
              .replace(f"{tmp}/run/vms/warmup/agent.sock", f"{base}/agent{i}.sock")
              .replace(f"{tmp}/run/vms/warmup/egress.sock", f"{base}/egress{i}.sock")
              .replace("/vm/kernel", kernel).replace("/vm/initrd", initrd) for x in argv]
        t0 = time.monotonic()
        p = subprocess.Popen(a, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while True:
            try:
                if "AIRLOCK-AGENT-READY" in open(console, errors="replace").read():
                    break
            except FileNotFoundError:
                pass
            if p.poll() is not None or time.monotonic() - t0 > 120:
                sys.exit("bare boot failed")
            time.sleep(0.005)
        bare.append(time.monotonic() - t0)
        p.kill()
        p.wait()

    warm = []
    for _ in range(args.execs):
        t0 = time.monotonic()
        airlock("exec", "warmup", "--", "true")
        warm.append(time.monotonic() - t0)

    time.sleep(5)
    rss_kib = 0
    for line in open(f"/proc/{qemu_pid('warmup')}/status"):
        if line.startswith("VmRSS:"):
            rss_kib = int(line.split()[1])
    import json
    accel = [sb for sb in json.loads(airlock("ls", "--json").stdout)
             if sb["name"] == "warmup"][0]["accelerator"]

    print(f"accelerator: {accel}, guest memory {args.memory}, {os.cpu_count()} host CPUs")
    print(f"cold run to first output:  median {statistics.median(cold):.2f} s "
          f"(min {min(cold):.2f}, max {max(cold):.2f}, n={len(cold)})")
    print(f"bare QEMU boot to agent:   median {statistics.median(bare):.2f} s "
          f"(min {min(bare):.2f}, max {max(bare):.2f}, n={len(bare)})")
    print(f"overhead ratio (cold/bare): {statistics.median(cold) / statistics.median(bare):.2f}x")
    print(f"warm exec true round trip: median {statistics.median(warm) * 1000:.1f} ms, "
          f"p99 {pct(warm, 99) * 1000:.1f} ms (n={len(warm)}, CLI process included)")
    print(f"idle sandbox host RSS:     {rss_kib / 1024:.0f} MiB")
finally:
    subprocess.run([args.airlock, "rm", "-f", "--all"], env=env, capture_output=True)
    subprocess.run([args.airlock, "daemon", "stop"], env=env, capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)
