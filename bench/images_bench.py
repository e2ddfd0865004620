#!/usr/bin/env python3
"""Image benchmarks: prints figures, asserts nothing.

In one run, against a real registry (Debian's docker-registry) on loopback
with TLS, and the same ~200 MiB multi-layer image (the base template's
files, re-compressed so nothing is shared with the store, plus a layer of
incompressible data):

  pull       `airlock template pull` until the image is ready to boot (its
             blobs verified and its boot disk built) vs `skopeo copy` of the
             same image to an OCI directory (which does less); cold each time;
  save       `airlock template save` of a sandbox that wrote --changed-mib
             of new data: its time, and the saved layer's size against the
             bytes the sandbox changed;
  first boot `airlock run --rm -t IMAGE shell -- true` of the pulled image vs
             the same of the base template.

Each figure is min/median/max over --runs, and each ratio is of medians.
Runs against its own runtime and state dirs. usage:
bench/images_bench.py [--runs N] [--big-mib N] [--changed-mib N] [--airlock PATH]
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from benchlib import cli, make_certs, mmm, run, timed

ap = argparse.ArgumentParser()
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--big-mib", type=int, default=90)
ap.add_argument("--changed-mib", type=int, default=64)
here = os.path.dirname(os.path.abspath(__file__))
top = os.path.join(here, "..")
default_cli = os.path.join(top, "bazel-bin", "cli", "airlock")
ap.add_argument("--airlock", default=default_cli if os.path.exists(default_cli) else "airlock")
args = ap.parse_args()

image_dir = os.environ.get("AIRLOCK_IMAGE_DIR",
                           os.path.expanduser("~/.cache/airlock/images"))
tmp = tempfile.mkdtemp(prefix="airlock-ibench-", dir="/tmp")
env = dict(os.environ, AIRLOCK_RUNTIME_DIR=tmp + "/run", AIRLOCK_STATE_DIR=tmp + "/state")
airlock = cli(args.airlock, env)


registry = None
try:
    # Certificates, the registry, the image.
    make_certs(tmp, ["localhost"])
    ready = tmp + "/registry.port"
    registry = subprocess.Popen(["python3", os.path.join(top, "tests/fixtures/registry.py"),
                                 "--dir", tmp + "/registry", "--tls", tmp + "/up.pem",
                                 tmp + "/up.key", "--ready", ready])
    for _ in range(200):
        if os.path.exists(ready):
            break
        time.sleep(0.05)
    host = "localhost:" + open(ready).read().strip()
    certs = f"{tmp}/certs.d/{host}"
    os.makedirs(certs)
    shutil.copy(tmp + "/ca.pem", certs + "/ca.crt")
    os.makedirs(tmp + "/state", exist_ok=True)
    with open(tmp + "/state/vmmd.conf", "w") as f:
        f.write(f"registry-certs-dir = {tmp}/certs.d\n")
    run(["python3", os.path.join(top, "tests/fixtures/make_image.py"), "--base",
         image_dir + "/templates/base/oci", "--out", tmp + "/big", "--kind", "big",
         "--big-mib", str(args.big_mib), "--recompress"])
    size = sum(os.path.getsize(os.path.join(tmp + "/big/blobs/sha256", b))
               for b in os.listdir(tmp + "/big/blobs/sha256"))
    ref = f"{host}/bench/big:v1"
    run(["skopeo", "copy", "--dest-cert-dir", certs, f"oci:{tmp}/big:v1", "docker://" + ref])
    airlock("daemon", "start")
    # The first boot also probes KVM; keep it out of the figures.
    airlock("run", "--rm", "shell", "--", "true")

    pulls, skopeos = [], []
    for i in range(args.runs):
        pulls.append(timed(lambda: airlock("template", "pull", "-q", ref)))
        airlock("template", "rm", ref)
        out = f"{tmp}/skopeo{i}"
        skopeos.append(timed(lambda: run(["skopeo", "copy", "--src-cert-dir", certs,
                                          "docker://" + ref, f"oci:{out}:v1"])))
        shutil.rmtree(out)
    airlock("template", "pull", "-q", ref)
    print(f"image: {size / 1048576:.0f} MiB in {len(json.load(open(tmp + '/big/index.json'))['manifests'])} "
          f"manifest, 3 layers, from {host}")
    print(f"pull to ready-to-boot   {mmm(pulls)}")
    print(f"skopeo copy to oci dir  {mmm(skopeos)}")
    print(f"ratio (airlock/skopeo)  {statistics.median(pulls) / statistics.median(skopeos):.2f}x")

    boots_new, boots_base = [], []
    for _ in range(args.runs):
        boots_new.append(timed(lambda: airlock("run", "--rm", "-t", ref, "shell", "--", "true")))
        boots_base.append(timed(lambda: airlock("run", "--rm", "shell", "--", "true")))
    print(f"first boot, new image   {mmm(boots_new)}")
    print(f"boot, base template     {mmm(boots_base)}")
    print(f"ratio (new/base)        {statistics.median(boots_new) / statistics.median(boots_base):.2f}x")

    saves, ratios = [], []
    for i in range(args.runs):
        name = f"saver{i}"
        airlock("create", "--name", name, "shell")
        airlock("exec", name, "--", "sh", "-c",
                f"head -c {args.changed_mib}M /dev/urandom > /home/agent/workspace/data && "
                "mkdir -p /home/agent/workspace/src && for i in $(seq 100); do "
                "echo file $i > /home/agent/workspace/src/f$i; done && sync")
        changed = args.changed_mib * 1048576 + sum(len(f"file {i}\n") for i in range(1, 101))
        saves.append(timed(lambda: airlock("template", "save", "--force", name, f"saved:{i}")))
        info = json.loads(airlock("template", "inspect", f"saved:{i}").stdout)
        layer = info["manifest"]["layers"][-1]["size"]
        ratios.append(layer / changed)
        airlock("rm", "-f", name)
        airlock("template", "rm", f"saved:{i}")
    print(f"template save           {mmm(saves)}")
    print(f"saved layer / changed   {mmm(ratios, 'x', '%.3f')} ({args.changed_mib} MiB random "
          "+ 100 small files)")
finally:
    subprocess.run([args.airlock, "rm", "-f", "--all"], env=env, capture_output=True)
    subprocess.run([args.airlock, "daemon", "stop"], env=env, capture_output=True)
    if registry:
        registry.send_signal(signal.SIGTERM)
        registry.wait()
    shutil.rmtree(tmp, ignore_errors=True)
