#!/usr/bin/env python3
"""Sandbox benchmarks: prints figures, asserts nothing.

  bare boot    the QEMU command line vmmd used for a booted sandbox (same
               kernel, initramfs, overlay, agent channel) started directly,
               until the agent prints its ready line: the reference;
  run, restore `airlock run --rm shell -- true` of an image booted before:
               create, restore of the image's snapshot, exec, rm (vmmd
               with --warm-pool 0);
  run, pool    the same when vmmd has a warm VM of the snapshot ready
               (the default --warm-pool 1; each run waits for the refill
               first), and the idle host memory that warm VM holds;
  run, workspace  the restore and the pool with a direct-mode workspace
               (its virtiofs plugged into the running VM: a snapshot
               cannot hold one);
  run, clone   the same in clone mode (the source plugged in, then cloned
               in the guest);
  each as min/median/max over --runs and as a ratio of the bare boot's
  median, and the path `airlock ls --json` reported (started_from);
  warm exec    `airlock exec NAME -- true` round trips, beside the CLI's own
               start (`airlock --version`) and the guest's fork+exec floor
               (a loop of /bin/true inside the guest);
  idle memory  host memory of an idle restored sandbox and of a booted one:
               its own (anonymous resident pages, plus the whole memfd its
               guest RAM is in) and the shared page cache of the files it
               maps (kernel, initramfs, QEMU), apart.

Runs against its own runtime and state dirs, so it never touches your
sandboxes. usage: bench/sandbox_bench.py [--runs N] [--execs N] [--airlock PATH]
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
from benchlib import host_memory_parts_mib, mmm, run, timed  # noqa: E402

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


def airlock(*a):
    return run([args.airlock, *a], env=env)


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def sandbox(name):
    for sb in json.loads(airlock("ls", "--json").stdout):
        if sb["name"] == name:
            return sb
    return {}



def wait_for_snapshot():
    snapdir = f"{tmp}/state/snapshots"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if os.path.isdir(snapdir) and any(not d.endswith(".partial") for d in os.listdir(snapdir)):
            return
        time.sleep(0.2)
    sys.exit("vmmd made no snapshot within 300 s (see its log)")


def set_warm_pool(n):
    os.makedirs(f"{tmp}/state", exist_ok=True)
    with open(f"{tmp}/state/vmmd.conf", "w") as f:
        f.write(f"warm-pool = {n}\n")


def warm_vms_ready():
    return airlock("daemon", "logs", "vmmd").stdout.count('"msg":"warm VM ready"')


def wait_for_warm_vm(before):
    deadline = time.monotonic() + 120
    while warm_vms_ready() <= before:
        if time.monotonic() > deadline:
            sys.exit("vmmd made no warm VM within 120 s (see its log)")
        time.sleep(0.1)


try:
    # Restore figures first, without the pool; the pool's come last.
    set_warm_pool(0)
    airlock("daemon", "start")
    # The first boot also probes KVM and makes the image's snapshot; both
    # stay out of the figures. "booted" stays up for the bare boot's command
    # line and the idle memory.
    first_start = time.monotonic()
    airlock("run", "--name", "booted", "-m", args.memory, "shell", "--", "true")
    wait_for_snapshot()
    # Idle memory of the booted sandbox before anything else runs in it.
    time.sleep(max(0.0, 15 - (time.monotonic() - first_start)))
    booted_mem = host_memory_parts_mib(sandbox("booted")["pid"])

    workspace = f"{tmp}/workspace"
    os.makedirs(workspace)
    repo = f"{tmp}/repo"
    run(["sh", "-c", f"git init -q {repo} && cd {repo} && echo hi > README && git add README && "
         "git -c user.name=bench -c user.email=b@example.com commit -qm init"])
    paths = {
        "restore": [],
        "restore (workspace)": [workspace],
        "restore (clone)": ["--clone", repo],
    }
    figures = {}
    started = {}
    for label, extra in paths.items():
        flags = [e for e in extra if e.startswith("--")]
        shares = [e for e in extra if not e.startswith("--")]
        # One run kept to read how it started; the timed ones are --rm.
        airlock("run", "--name", "probe", "-m", args.memory, *flags, "shell", *shares, "--", "true")
        started[label] = sandbox("probe").get("started_from", "?")
        airlock("rm", "-f", "probe")
        figures[label] = [timed(lambda: airlock("run", "--rm", "-m", args.memory, *flags, "shell",
                                                *shares, "--", "true"))
                          for _ in range(args.runs)]

    # The bare boot reuses vmmd's exact command line with its own files.
    pid = sandbox("booted")["pid"]
    argv = [a.decode() for a in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[:-1]]
    sbdir = f"{tmp}/state/sandboxes/booted"
    # A jailed QEMU sees its kernel and initramfs at /vm/ (vmmd/qemu_backend.h).
    images = os.environ.get("AIRLOCK_IMAGE_DIR", os.path.expanduser("~/.cache/airlock/images"))
    kernel = f"{images}/kernel/vmlinux"
    if not os.path.exists(kernel):
        kernel = f"{images}/kernel/vmlinuz"
    initrd = f"{images}/initramfs/initramfs.cpio"
    base = f"{tmp}/bare"
    os.makedirs(base)
    info = run(["qemu-img", "info", "-U", "--output=json", f"{sbdir}/disk.qcow2"]).stdout
    backing_file = json.loads(info)["backing-filename"]
    bare = []
    for i in range(args.runs):
        disk = f"{base}/disk{i}.qcow2"
        run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", backing_file, "-F", "raw", disk])
        console = f"{base}/console{i}.log"
        a = [x.replace(f"{sbdir}/disk.qcow2", disk)
              .replace(f"{sbdir}/console.log", console)
              .replace(f"{tmp}/run/vms/booted/agent.sock", f"{base}/agent{i}.sock")
              .replace(f"{tmp}/run/vms/booted/egress.sock", f"{base}/egress{i}.sock")
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

    warm = [timed(lambda: airlock("exec", "booted", "--", "true")) for _ in range(args.execs)]
    cli_start = [timed(lambda: airlock("--version")) for _ in range(args.execs)]
    loops = 200
    out = airlock("exec", "booted", "--", "sh", "-c",
                  f"s=$(date +%s%N); i=0; while [ $i -lt {loops} ]; do /bin/true; i=$((i+1)); done; "
                  "echo $(( ($(date +%s%N) - s) / " + str(loops) + " ))").stdout
    fork_exec_s = int(out.strip()) / 1e9

    airlock("run", "--name", "restored", "-m", args.memory, "shell", "--", "true")
    time.sleep(15)
    restored_mem = host_memory_parts_mib(sandbox("restored")["pid"])
    restored_from = sandbox("restored").get("started_from", "?")
    accel_seen = sandbox("booted")["accelerator"]

    # The pool: vmmd started again with its default, one warm VM, which the
    # first restore below asks for; each timed run claims it and waits for
    # the next before the following run.
    airlock("rm", "-f", "--all")
    airlock("daemon", "stop")
    set_warm_pool(1)
    airlock("daemon", "start")
    ready = warm_vms_ready()
    airlock("run", "--rm", "-m", args.memory, "shell", "--", "true")
    wait_for_warm_vm(ready)
    warm_pids = [int(p) for p in run(["pgrep", "-f", f"file={tmp}/state/pool/"]).stdout.split()]
    time.sleep(5)
    warm_mem = host_memory_parts_mib(warm_pids[0]) if warm_pids else (0.0, 0.0)
    for label, extra in (("pool", []), ("pool (workspace)", [workspace]),
                         ("pool (clone)", ["--clone", repo])):
        flags = [e for e in extra if e.startswith("--")]
        shares = [e for e in extra if not e.startswith("--")]
        wait_for_warm_vm(ready)
        ready = warm_vms_ready()
        airlock("run", "--name", "probe", "-m", args.memory, *flags, "shell", *shares, "--", "true")
        started[label] = sandbox("probe").get("started_from", "?")
        airlock("rm", "-f", "probe")
        pool = []
        for _ in range(args.runs):
            wait_for_warm_vm(ready)
            ready = warm_vms_ready()
            pool.append(timed(lambda: airlock("run", "--rm", "-m", args.memory, *flags, "shell",
                                              *shares, "--", "true")))
        figures[label] = pool

    accel = sandbox("booted")["accelerator"] if sandbox("booted") else accel_seen
    bare_median = statistics.median(bare)
    print(f"accelerator: {accel}, guest memory {args.memory}, {os.cpu_count()} host CPUs, "
          f"{args.runs} runs each")
    print(f"bare QEMU boot to agent:     {mmm(bare)}")
    for label, values in figures.items():
        print(f"run --rm ... -- true, {label:17s} {mmm(values)}  "
              f"({statistics.median(values) / bare_median:.2f}x bare; started_from={started[label]})")
    print(f"warm exec true:              {mmm([w * 1000 for w in warm], 'ms', '%.1f')}, "
          f"p99 {pct(warm, 99) * 1000:.1f} ms (n={len(warm)})")
    print(f"  CLI start (--version):     {mmm([c * 1000 for c in cli_start], 'ms', '%.1f')}")
    print(f"  guest fork+exec of true:   {fork_exec_s * 1000:.1f} ms")
    budget = statistics.median(cli_start) + 1.3 * fork_exec_s
    print(f"  goal (CLI + 1.3x floor):   {budget * 1000:.1f} ms; warm median is "
          f"{statistics.median(warm) / budget:.2f}x of it")
    print("idle host memory 15 s after start (its own: anonymous pages and guest RAM; + the "
          "page cache of the files it maps, which VMs of one image share):")
    for label, (own, files) in ((f"restored ({restored_from})", restored_mem),
                                ("booted", booted_mem), ("warm VM (unclaimed)", warm_mem)):
        print(f"  {label:20s} {own + files:5.0f} MiB = {own:.0f} MiB its own + {files:.0f} MiB "
              "shared file pages")
    print(f"  restored/booted, its own: {restored_mem[0] / booted_mem[0]:.2f}x")
    finished = True
finally:
    subprocess.run([args.airlock, "rm", "-f", "--all"], env=env, capture_output=True)
    subprocess.run([args.airlock, "daemon", "stop"], env=env, capture_output=True)
    if "finished" in globals():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        # The daemons' logs and the consoles say what went wrong.
        print(f"kept {tmp} (the daemons' logs are in state/logs)", file=sys.stderr)
