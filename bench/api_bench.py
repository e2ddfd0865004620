#!/usr/bin/env python3
"""REST API benchmarks (apid): prints figures, asserts nothing.

In one run, with its own daemons (runtime and state dirs of its own):

  create   POST /v1/sandboxes and GET until core.status is running, vs
           `airlock create shell` (which returns once it runs), the same
           base template;
  exec     POST {endpoint}/v1/processes/exec of `true` on a kept-alive
           connection, vs `airlock exec NAME -- true` (a CLI process each
           time, as a user runs it), in the same sandbox;
  get      GET /v1/sandboxes/<uid> with 8 connections (wrk, 2 threads, for
           --seconds), vs nginx serving the same JSON body as a static file
           on loopback with the same wrk settings (an HTTP server's ceiling
           on this machine).

Each figure is min/median/max over --runs, and each ratio is of medians.
Needs wrk and nginx (Debian packages: apt-get install wrk nginx-light).
usage: bench/api_bench.py [--runs N] [--execs N] [--seconds S] [--airlock PATH]
"""
import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

from benchlib import cli, mmm, run, timed

ap = argparse.ArgumentParser()
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--execs", type=int, default=20)
ap.add_argument("--seconds", type=int, default=10)
here = os.path.dirname(os.path.abspath(__file__))
top = os.path.join(here, "..")
default_cli = os.path.join(top, "bazel-bin", "cli", "airlock")
ap.add_argument("--airlock", default=default_cli if os.path.exists(default_cli) else "airlock")
args = ap.parse_args()
for tool in ("wrk", "nginx"):
    if shutil.which(tool) is None and not os.path.exists("/usr/sbin/" + tool):
        sys.exit(f"{tool} is missing: apt-get install wrk nginx-light")

tmp = tempfile.mkdtemp(prefix="airlock-abench-", dir="/tmp")
env = dict(os.environ, AIRLOCK_RUNTIME_DIR=tmp + "/run", AIRLOCK_STATE_DIR=tmp + "/state",
           AIRLOCK_API_LISTEN="127.0.0.1:0")
airlock = cli(args.airlock, env)


class Api:
    """A kept-alive HTTP/1.1 connection to apid."""

    def __init__(self, base):
        u = urllib.parse.urlparse(base)
        self.conn = http.client.HTTPConnection(u.hostname, u.port)
        self.prefix = u.path

    def call(self, method, path, body=None, token=None):
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = "Bearer " + token
        data = json.dumps(body) if body is not None else None
        self.conn.request(method, self.prefix + path, body=data, headers=headers)
        r = self.conn.getresponse()
        payload = r.read()
        return r.status, json.loads(payload) if payload else None, dict(r.getheaders())


def wrk(url, headers):
    argv = ["wrk", "-t2", "-c8", f"-d{args.seconds}s", "--latency"]
    for h in headers:
        argv += ["-H", h]
    out = run(argv + [url]).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[p50.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        sys.exit("wrk saw errors: " + out)
    return rps, float(p50.group(1)) * scale


nginx = None
try:
    airlock("daemon", "start")
    urls = json.loads(airlock("api", "url", "--json").stdout)
    secret = airlock("api", "token", "create", "bench").stdout.strip()
    u = urllib.parse.urlparse(urls["token_exchange"])
    api = Api(urls["management"])
    tc = http.client.HTTPConnection(u.hostname, u.port)
    tc.request("POST", u.path, body=json.dumps({"identifier": "bench", "secret": secret}),
               headers={"Content-Type": "application/json"})
    token = json.loads(tc.getresponse().read())["access_token"]

    # --- create to running ---
    api_create, cli_create = [], []
    for i in range(args.runs):
        t = time.monotonic()
        status, sb, _ = api.call("POST", "/v1/sandboxes", {"displayName": f"bench{i}"}, token)
        assert status == 202, sb
        uid = sb["uid"]
        while True:
            status, sb, _ = api.call("GET", f"/v1/sandboxes/{uid}", None, token)
            if sb["core"]["status"] in ("running", "failed"):
                break
            time.sleep(0.05)
        api_create.append(time.monotonic() - t)
        assert sb["core"]["status"] == "running", sb
        airlock("rm", "-f", uid)
        cli_create.append(timed(lambda: airlock("create", "--name", f"cli{i}", "shell")))
        airlock("rm", "-f", f"cli{i}")

    # --- exec round trip ---
    status, sb, _ = api.call("POST", "/v1/sandboxes", {"displayName": "execs"}, token)
    uid = sb["uid"]
    while sb["core"]["status"] not in ("running", "failed"):
        time.sleep(0.1)
        status, sb, _ = api.call("GET", f"/v1/sandboxes/{uid}", None, token)
    status, cred, _ = api.call("POST", f"/v1/sandboxes/{uid}/endpoint-credentials",
                               {"permissions": ["sandboxesExec"]}, token)
    ep = Api(sb["core"]["endpoint"]["uri"])
    rest_exec, cli_exec = [], []
    for _ in range(args.execs):
        t = time.monotonic()
        status, out, _ = ep.call("POST", "/v1/processes/exec", {"cmd": ["true"]}, cred["token"])
        rest_exec.append(time.monotonic() - t)
        assert status == 200 and out["exitCode"] == 0, out
        cli_exec.append(timed(lambda: airlock("exec", uid, "--", "true")))

    # --- GET requests/s with 8 connections ---
    status, body, headers = api.call("GET", f"/v1/sandboxes/{uid}", None, token)
    static = tmp + "/www"
    os.makedirs(static)
    os.chmod(tmp, 0o755)  # nginx's workers run as an unprivileged user
    with open(static + "/sandbox.json", "w") as f:
        json.dump(body, f)
    with open(tmp + "/nginx.conf", "w") as f:
        f.write(f"""worker_processes 2; daemon off; pid {tmp}/nginx.pid; error_log {tmp}/nginx.err;
events {{ worker_connections 256; }}
http {{ access_log off; default_type application/json;
  server {{ listen 127.0.0.1:0; root {static}; keepalive_requests 1000000; }} }}
""")
    # nginx cannot report an ephemeral port: pick one that is free now.
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    nport = s.getsockname()[1]
    s.close()
    conf = open(tmp + "/nginx.conf").read().replace("127.0.0.1:0", f"127.0.0.1:{nport}")
    open(tmp + "/nginx.conf", "w").write(conf)
    nginx = subprocess.Popen(["nginx", "-c", tmp + "/nginx.conf", "-p", tmp])
    time.sleep(0.5)
    api_rps, api_p50, ng_rps, ng_p50 = [], [], [], []
    for _ in range(args.runs):
        r, p = wrk(urls["management"] + f"/v1/sandboxes/{uid}", [f"Authorization: Bearer {token}"])
        api_rps.append(r)
        api_p50.append(p)
        r, p = wrk(f"http://127.0.0.1:{nport}/sandbox.json", [])
        ng_rps.append(r)
        ng_p50.append(p)

    med = statistics.median
    print(f"create to running  API      {mmm(api_create)}")
    print(f"                   CLI      {mmm(cli_create)}")
    print(f"                   ratio API/CLI {med(api_create) / med(cli_create):.2f}")
    print(f"exec true          REST     {mmm([x * 1000 for x in rest_exec], 'ms', '%.1f')}")
    print(f"                   CLI      {mmm([x * 1000 for x in cli_exec], 'ms', '%.1f')}")
    print(f"                   ratio REST/CLI {med(rest_exec) / med(cli_exec):.2f}")
    print(f"GET sandbox, 8 conns apid   {mmm(api_rps, 'req/s', '%.0f')}, p50 {med(api_p50):.2f} ms")
    print(f"                   nginx    {mmm(ng_rps, 'req/s', '%.0f')}, p50 {med(ng_p50):.2f} ms")
    print(f"                   ratio apid/nginx {med(api_rps) / med(ng_rps):.2f}")
finally:
    if nginx is not None:
        nginx.terminate()
        nginx.wait()
    subprocess.run([args.airlock, "rm", "-f", "--all"], env=env, capture_output=True)
    subprocess.run([args.airlock, "daemon", "stop"], env=env, capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)
