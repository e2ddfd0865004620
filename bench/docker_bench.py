#!/usr/bin/env python3
"""Docker benchmarks: prints figures, asserts nothing.

In one run, with its own daemons (runtime and state dirs of its own):

  cold start  `airlock create --docker shell` until running (the boot plus
              mounting the docker disk and starting dockerd) vs `airlock
              create shell` of the base template (the boot alone); the
              difference is dockerd's share;
  run         `docker run --rm IMAGE true` inside a docker sandbox (the
              engine making a container) vs `airlock exec NAME -- true` in
              the same sandbox (the floor of any command);
  pull        `docker pull` inside the sandbox of a --pull-mib image from a
              real registry on the host's loopback (Debian's
              docker-registry, TLS from a bench CA) through proxyd (its
              CONNECT, TLS terminated to place the registry credential), vs
              `skopeo copy` of the same image by the host, directly, to an
              OCI directory; and `curl` in the guest of the image's layer
              blob through the same path (the transfer alone, without the
              engine's decompression, hashing and unpacking).

Each figure is min/median/max over --runs, and each ratio is of medians.
usage: bench/docker_bench.py [--runs N] [--pull-mib N] [--airlock PATH]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from benchlib import cli, make_certs, mmm, run, timed

ap = argparse.ArgumentParser()
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--pull-mib", type=int, default=100)
here = os.path.dirname(os.path.abspath(__file__))
top = os.path.join(here, "..")
default_cli = os.path.join(top, "bazel-bin", "cli", "airlock")
ap.add_argument("--airlock", default=default_cli if os.path.exists(default_cli) else "airlock")
args = ap.parse_args()

tmp = tempfile.mkdtemp(prefix="airlock-dbench-", dir="/tmp")
env = dict(os.environ, AIRLOCK_RUNTIME_DIR=tmp + "/run", AIRLOCK_STATE_DIR=tmp + "/state")
USER, PASSWORD = "bench", "bench-pull-password"
airlock = cli(args.airlock, env)


def sh(name, script):
    return airlock("exec", name, "--", "sh", "-c", script)


registry = None
try:
    make_certs(tmp, ["registry.bench", "localhost"])
    ready = tmp + "/registry.port"
    registry = subprocess.Popen(["python3", os.path.join(top, "tests/fixtures/registry.py"),
                                 "--dir", tmp + "/registry", "--tls", tmp + "/up.pem",
                                 tmp + "/up.key", "--htpasswd", f"{USER}:{PASSWORD}",
                                 "--ready", ready])
    for _ in range(400):
        if os.path.exists(ready) and open(ready).read().strip():
            break
        time.sleep(0.05)
    port = open(ready).read().strip()
    run(["python3", os.path.join(top, "tests/fixtures/make_image.py"), "--out", tmp + "/img",
         "--kind", "scratch", "--big-mib", str(args.pull_mib)])
    run(["skopeo", "copy", "--dest-tls-verify=false", "--dest-creds", f"{USER}:{PASSWORD}",
         f"oci:{tmp}/img:v1", f"docker://localhost:{port}/bench/big:v1"])
    certs = tmp + "/certs"
    os.makedirs(certs)
    shutil.copy(tmp + "/ca.pem", certs + "/ca.crt")
    os.makedirs(tmp + "/state", mode=0o700)
    with open(tmp + "/state/proxyd.conf", "w") as f:
        f.write(f"resolve = registry.bench=127.0.0.1\nupstream-ca = {tmp}/ca.pem\n")
    airlock("daemon", "start")
    airlock("policy", "init", "deny-all")
    registry_host = f"registry.bench:{port}"
    airlock("policy", "allow", "network", registry_host)
    airlock("secret", "set", "--registry", registry_host, "-u", USER, "-t", PASSWORD)
    # The first boot also probes KVM; keep it out of the figures.
    airlock("run", "--rm", "shell", "--", "true")

    plain, docker = [], []
    for i in range(args.runs):
        plain.append(timed(lambda: airlock("create", "--name", f"plain{i}", "shell")))
        airlock("rm", "-f", f"plain{i}")
        docker.append(timed(lambda: airlock("create", "--docker", "--name", f"dock{i}", "shell")))
        if i < args.runs - 1:
            airlock("rm", "-f", f"dock{i}")
    box = f"dock{args.runs - 1}"
    sh(box, "set -e; r=$(mktemp -d); mkdir -p $r/bin; cp \"$(command -v busybox)\" $r/bin/; "
            "ln -s busybox $r/bin/true; tar -C $r -c . | docker import - bench:1 >/dev/null")
    sh(box, "docker run --rm bench:1 true")  # the first container warms the engine
    runs = [timed(lambda: sh(box, "docker run --rm bench:1 true")) for _ in range(args.runs)]
    execs = [timed(lambda: airlock("exec", box, "--", "true")) for _ in range(args.runs)]
    ref = f"{registry_host}/bench/big:v1"
    manifest = json.load(open(os.path.join(tmp, "img", "blobs", "sha256", json.load(
        open(tmp + "/img/index.json"))["manifests"][0]["digest"][7:])))
    blob_url = f"https://{registry_host}/v2/bench/big/blobs/{manifest['layers'][0]['digest']}"
    transfers = [timed(lambda: sh(box, f"curl -sSf -o /dev/null {blob_url}"))
                 for _ in range(args.runs)]
    pulls, skopeos = [], []
    for i in range(args.runs):
        pulls.append(timed(lambda: sh(box, f"docker pull -q {ref} >/dev/null")))
        sh(box, f"docker rmi {ref} >/dev/null")
        out = f"{tmp}/skopeo{i}"
        skopeos.append(timed(lambda: run(
            ["skopeo", "copy", "--src-cert-dir", certs, "--src-creds", f"{USER}:{PASSWORD}",
             f"docker://localhost:{port}/bench/big:v1", f"oci:{out}:v1"])))
        shutil.rmtree(out)
    med = statistics.median
    print(f"docker benchmark ({os.cpu_count()} CPUs; {args.runs} runs; "
          f"{args.pull_mib} MiB image)")
    print(f"  cold start: create --docker shell   {mmm(docker)}")
    print(f"              create shell            {mmm(plain)}")
    print(f"              dockerd's share          {med(docker) - med(plain):.2f} s "
          f"({(med(docker) - med(plain)) / med(docker) * 100:.0f}% of the docker start; "
          f"ratio {med(docker) / med(plain):.2f})")
    print(f"  run:        docker run --rm IMAGE true  {mmm(runs)}")
    print(f"              airlock exec NAME -- true   {mmm(execs)}")
    print(f"              ratio                       {med(runs) / med(execs):.2f}")
    print(f"  pull:       docker pull via proxyd      {mmm(pulls)}")
    print(f"              skopeo copy on the host     {mmm(skopeos)}")
    print(f"              ratio                       {med(pulls) / med(skopeos):.2f}")
    print(f"  transfer:   curl of the layer via proxyd {mmm(transfers)} "
          f"({args.pull_mib / med(transfers):.1f} MiB/s)")
finally:
    subprocess.run([args.airlock, "rm", "-f", "--all"], env=env, capture_output=True)
    subprocess.run([args.airlock, "daemon", "stop"], env=env, capture_output=True)
    if registry is not None:
        registry.terminate()
        registry.wait()
    shutil.rmtree(tmp, ignore_errors=True)
