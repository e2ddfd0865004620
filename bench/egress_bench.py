#!/usr/bin/env python3
"""Egress benchmarks: prints figures, asserts nothing.

Three ways to the same loopback upstream, side by side: direct, through
proxyd, and through squid (squid-openssl, an instance of its own with a
generated config; the column is skipped when squid cannot start), and one
proxyd-only case.

  1 plain HTTP   GET of a small body from nginx, driven by wrk (--concurrency
                 connections, --duration seconds, --repeat runs per column,
                 each figure min/median/max), twice: a new connection per
                 request, and kept-alive connections (each request still
                 decided on its own; upstream, proxyd and squid both keep
                 connections between requests):
                 requests/s, latency p50/p99, what the proxy adds to them,
                 and the proxy's CPU per request; then both again with one
                 connection (1c, 1d): with --concurrency connections every
                 process is busy on a small host and the latencies are
                 mostly queueing, while one connection at a time shows what
                 each request's path adds by itself.
  2 HTTPS        GET of the same small body from nginx's TLS port through
                 TLS interception: proxyd (a --method GET --path /** rule
                 on the host) and squid ssl-bump, driven by bench/https_load
                 (C++, OpenSSL: a CONNECT, then TLS trusting the proxy's CA),
                 twice: a new TLS connection per request (a full handshake
                 each) and kept-alive. Direct is TLS to nginx.
  3 tunnel       a download of --mib MiB over TLS from nginx through a
                 CONNECT tunnel, by curl (proxyd: the host allowed outright;
                 squid: a port without bump) against direct: MiB/s,
                 min/median/max of --repeat.
  4 credential   what proxyd's credential injection adds per request, in one
    injection    run: a custom secret for the sandbox on cred.example.test,
                 none on nocred.example.test, both names on the same
                 loopback HTTPS upstream with the same --method GET --path /**
                 rule (so both are intercepted). The client code of case 2
                 sends `Authorization: Bearer <placeholder>` to each; proxyd
                 swaps in the real value only for cred.example.test (checked
                 once at the upstream before measuring). Through proxyd only:
                 squid has no credential injection.

  5 through a    the same nginx from inside a real sandbox (a 1 GiB shell
    sandbox      guest; the images of tools/build_images.sh): a --mib MiB
                 TLS download through a CONNECT tunnel by the guest's curl,
                 and 300 sequential GETs of /small by one guest curl on a
                 kept-alive connection (each decided on its own); beside
                 the same curl commands on the host through the harness
                 (proxyd without the VM's virtio-serial transport) and
                 direct. guest/harness is the channel's own cost.

--cases picks the cases to run (comma list of http, https, connect, inject,
fair, vm; default all); squid is started for http, https, connect and fair.

Case 6 (fair) attaches a second harness as sandbox B and measures B's
kept-alive GETs alone and while sandbox A floods the proxy with 500
connections: one sandbox must not starve another.

proxyd is driven through bench/egress_harness, the guest agent's real egress
endpoint run on the host and attached to proxyd as a sandbox: the figures
include proxyd and the egress protocol but not the VM's virtio-serial
transport. Cases 1 and 3 use wrk, curl and nginx (tools/install_deps.sh
--bench installs them), so neither the load generator nor the upstream is
the ceiling (the direct column shows how far above the proxies they are).
Case 2 uses bench/https_load because wrk cannot speak TLS through a
CONNECT. Case 4 still uses a Python client and upstream
(tests/fixtures/upstream.py): it checks what the upstream received; its
overhead is in both columns alike.

Runs its own daemons with their own runtime and state dirs, so it never
touches your sandboxes or a system squid.
usage: bench/egress_bench.py [--concurrency N] [--duration S] [--mib N]
                             [--repeat N] [--cases LIST] [--airlock PATH]
                             [--harness PATH] [--squid PATH] [--wrk PATH]
                             [--nginx PATH] [--curl PATH] [--keep]
"""
import argparse
import json
import os
import select
import shutil
import signal
import socket
import ssl
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--concurrency", type=int, default=8)
ap.add_argument("--duration", type=float, default=5.0)
ap.add_argument("--mib", type=int, default=256)
ap.add_argument("--repeat", type=int, default=3)
ALL_CASES = ["http", "https", "connect", "inject", "fair", "vm"]
ap.add_argument("--cases", default=",".join(ALL_CASES),
                help="comma list of the cases to run: " + ",".join(ALL_CASES) + " (default all)")
here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, ".."))
default_cli = os.path.join(root, "bazel-bin", "cli", "airlock")
ap.add_argument("--airlock", default=default_cli if os.path.exists(default_cli) else "airlock")
ap.add_argument("--harness", default=os.path.join(root, "bazel-bin", "bench", "egress_harness"))
ap.add_argument("--https-load", default=os.path.join(root, "bazel-bin", "bench", "https_load"))
ap.add_argument("--squid", default="/usr/sbin/squid")
ap.add_argument("--wrk", default="/usr/bin/wrk")
ap.add_argument("--nginx", default="/usr/sbin/nginx")
ap.add_argument("--curl", default="/usr/bin/curl")
ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs) at the end")
args = ap.parse_args()
cases = [c.strip() for c in args.cases.split(",") if c.strip()]
if not cases or any(c not in ALL_CASES for c in cases):
    ap.error(f"--cases: a comma list of {', '.join(ALL_CASES)}, not {args.cases!r}")
cases = set(cases)

HOST = "api.example.test"
CRED_HOST = "cred.example.test"      # case 4: has the bench sandbox's custom secret
NOCRED_HOST = "nocred.example.test"  # case 4: the same upstream, no credential
UPSTREAM = os.path.join(root, "tests", "fixtures", "upstream.py")
CERTGEN = "/usr/lib/squid/security_file_certgen"
TIMEOUT = 30

# A short dir: Unix socket paths must stay under 108 bytes.
tmp = tempfile.mkdtemp(prefix="airlock-eb-", dir="/tmp")
run_dir, state_dir = tmp + "/run", tmp + "/state"
env = dict(os.environ, AIRLOCK_RUNTIME_DIR=run_dir, AIRLOCK_STATE_DIR=state_dir)
children = []  # (name, Popen) started here, stopped in the finally


def airlock(*a):
    r = subprocess.run([args.airlock, *a], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"airlock {' '.join(a)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def sh(script, cwd):
    r = subprocess.run(["sh", "-c", "set -e; " + script], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {script}\n{r.stderr}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def start_upstream(name, tls):
    ready = f"{tmp}/{name}.port"
    argv = [sys.executable, UPSTREAM, "--port", "0", "--ready", ready]
    if tls:
        argv += ["--tls", f"{tmp}/up.pem", f"{tmp}/up.key"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(f"{tmp}/{name}.log", "w"))
    children.append((name, p))
    for _ in range(100):
        try:
            port = int(open(ready).read() or 0)
            if port:
                return port
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.1)
    sys.exit(f"upstream {name} did not start: {open(f'{tmp}/{name}.log').read()}")


SMALL_BODY = "upstream saw GET /small\n"
SMALL_BODY_NGINX = SMALL_BODY.replace("\n", "\\n")


def start_nginx(mib):
    """nginx on loopback: a plain port and a TLS port (the test
    certificate), /small a short body, /big.bin `mib` MiB. Returns
    (plain port, tls port, a second tls port): the second for case 2, whose
    rule makes proxyd intercept it (the first is tunnelled)."""
    if not os.path.exists(args.nginx):
        sys.exit(f"{args.nginx} missing (tools/install_deps.sh --bench)")
    d = tmp + "/nginx"
    os.makedirs(d + "/www")
    # nginx's worker runs as nobody: it must get through the temp dir to
    # www (only squid's start did this before, so a run without squid
    # served 403s).
    os.chmod(tmp, 0o711)
    with open(d + "/www/big.bin", "wb") as f:
        chunk = os.urandom(1 << 20)
        for _ in range(mib):
            f.write(chunk)
    plain, tls, tls2 = free_port(), free_port(), free_port()
    conf = f"""# generated by bench/egress_bench.py
daemon off;
master_process on;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  keepalive_requests 1000000;
  sendfile on;
  server {{
    listen 127.0.0.1:{plain};
    listen 127.0.0.1:{tls} ssl;
    listen 127.0.0.1:{tls2} ssl;
    ssl_certificate {tmp}/up.pem;
    ssl_certificate_key {tmp}/up.key;
    root {d}/www;
    location = /small {{ default_type text/plain; return 200 "{SMALL_BODY_NGINX}"; }}
  }}
}}
"""
    with open(d + "/nginx.conf", "w") as f:
        f.write(conf)
    p = subprocess.Popen([args.nginx, "-p", d, "-c", d + "/nginx.conf"],
                         stdout=subprocess.DEVNULL, stderr=open(d + "/out.log", "w"),
                         start_new_session=True)
    children.append(("nginx", p))
    if not (wait_port(plain, p, 20) and wait_port(tls, p, 20) and wait_port(tls2, p, 20)):
        sys.exit(f"nginx did not start: {open(d + '/out.log').read()}"
                 f"{open(d + '/error.log').read() if os.path.exists(d + '/error.log') else ''}")
    return plain, tls, tls2


def wrk_once(proxy_port, port, close, connections, duration):
    """One wrk run of GET /small from nginx at `port`: directly, or through
    the forward proxy at `proxy_port` (absolute-form target). Returns
    {rps, n, p50, p99 (s), errors}."""
    host = f"{HOST}:{port}"
    lines = []
    if proxy_port is not None:
        lines.append(f'wrk.path = "http://{host}/small"')
        lines.append(f'wrk.headers["Host"] = "{host}"')
    if close:
        lines.append('wrk.headers["Connection"] = "close"')
    script = f"{tmp}/wrk-{proxy_port}-{int(close)}.lua"
    with open(script, "w") as f:
        f.write("\n".join(lines) + "\n")
    url = f"http://127.0.0.1:{proxy_port or port}/small"
    r = subprocess.run([args.wrk, "-t", str(min(2, connections)), "-c", str(connections),
                        "-d", f"{duration:g}s",
                        "--latency", "-s", script, url], capture_output=True, text=True,
                       timeout=duration + 60)
    out = r.stdout
    if r.returncode != 0 or "Requests/sec" not in out:
        raise RuntimeError(f"wrk failed ({r.returncode}): {r.stderr or out}")

    def seconds(text):
        for unit, mult in (("us", 1e-6), ("ms", 1e-3), ("s", 1.0), ("m", 60.0)):
            if text.endswith(unit):
                return float(text[:-len(unit)]) * mult
        return float(text)

    res = {"errors": 0}
    for line in out.splitlines():
        f = line.split()
        if line.strip().startswith("50%"):
            res["p50"] = seconds(f[1])
        elif line.strip().startswith("99%"):
            res["p99"] = seconds(f[1])
        elif "requests in" in line:
            res["n"] = int(f[0])
        elif line.startswith("Requests/sec:"):
            res["rps"] = float(f[1])
        elif "Non-2xx or 3xx responses" in line:
            res["errors"] += int(f[-1])
        elif line.strip().startswith("Socket errors:"):
            # connect/read/write/timeout; "read" counts servers closing
            # kept-alive connections, which is how proxyd ends each one
            parts = dict(x.strip().split(" ") for x in line.split(":", 1)[1].split(","))
            res["errors"] += int(parts.get("connect", 0)) + int(parts.get("timeout", 0))
    return res


def https_once(proxy_port, port, cafile, keep_alive, connections, duration):
    """One bench/https_load run of GET /small from nginx's TLS `port`:
    directly, or through a CONNECT of the proxy at `proxy_port` (which
    intercepts it). Returns {rps, n, p50, p99 (s), errors}."""
    argv = [args.https_load, "--port", str(port), "--host", HOST, "--cafile", cafile,
            "--connections", str(connections), "--duration", f"{duration:g}"]
    if proxy_port is not None:
        argv += ["--proxy-port", str(proxy_port)]
    if keep_alive:
        argv.append("--keep-alive")
    r = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    if r.returncode != 0 or not r.stdout.startswith("{"):
        raise RuntimeError(f"https_load failed ({r.returncode}): {r.stderr or r.stdout}")
    out = json.loads(r.stdout)
    if out["n"] == 0:
        raise RuntimeError(f"https_load: no request succeeded: {out['first_error']}")
    return out


def curl_download(proxy_port, port, mib):
    """MiB/s of one TLS download of /big.bin from nginx by curl, directly or
    through a CONNECT tunnel of the proxy at `proxy_port`."""
    argv = [args.curl, "-sS", "-o", "/dev/null", "-w", "%{size_download} %{time_total}",
            "--cacert", f"{tmp}/ca.pem", "--resolve", f"{HOST}:{port}:127.0.0.1",
            f"https://{HOST}:{port}/big.bin"]
    if proxy_port is not None:
        argv[1:1] = ["--proxy", f"http://127.0.0.1:{proxy_port}", "--proxytunnel"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"curl failed ({r.returncode}): {r.stderr.strip()}")
    size, total = r.stdout.split()
    if int(float(size)) != mib << 20:
        raise RuntimeError(f"curl got {size} bytes, not {mib << 20}")
    return mib / float(total)


def mmm3(values):
    """(min, median, max) of `values`, or None."""
    return (min(values), statistics.median(values), max(values)) if values else None


def fmt3(t, spec, scale=1.0):
    return "-" if t is None else "/".join(format(v * scale, spec) for v in t)


def read_line(proc, seconds):
    """The first stdout line of `proc`, or "" after `seconds`."""
    buf, deadline = b"", time.monotonic() + seconds
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            return ""
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            break
        buf += chunk
    return buf.decode(errors="replace").split("\n")[0]


def cpu_seconds(pids):
    """{name: utime + stime in seconds} of live processes {name: pid}; None
    when one is gone."""
    out = {}
    for name, pid in pids.items():
        try:
            f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        out[name] = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    return out


def host_busy_seconds():
    """CPU seconds the whole host has spent busy (all CPUs), from /proc/stat."""
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(f[:8]) - f[3] - f[4]) / os.sysconf("SC_CLK_TCK")


def descendants(pids):
    """The live pids of `pids`, of every process whose command line names
    this run's temp dir (vmmd's QEMU and virtiofsd, in sessions of their
    own), and of all their descendants."""
    children, mine = {}, []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
            if tmp.encode() in open(f"/proc/{d}/cmdline", "rb").read():
                mine.append(int(d))
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = set(), list(pids) + mine
    while todo:
        p = todo.pop()
        if p in out:
            continue
        out.add(p)
        todo.extend(children.get(p, []))
    return out


def own_cpu_seconds(pids):
    """CPU seconds of this script, the children it waited for (wrk, curl,
    the CLI), and the live processes in `pids` with their descendants
    (nginx's worker, squid's helpers, vmmd's QEMU)."""
    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    for pid in descendants(pids.values()):
        c = cpu_seconds({"p": pid})
        if c:
            total += c["p"]
    return total


# ---------------------------------------------------------------- the client

def read_head(sock, buf=b""):
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"connection closed before a response head ({len(buf)} bytes)")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, rest


def exchange(sock, path, host_header, target=None, sink=None, headers=()):
    """Sends one GET (with the extra `headers`, (name, value) pairs) and
    reads the whole response; returns (status, body bytes, first bytes of
    the body). Reads a large body into `sink`."""
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers)
    req = (f"GET {target or path} HTTP/1.1\r\nHost: {host_header}\r\n"
           f"User-Agent: egress-bench\r\nAccept: */*\r\n{extra}Connection: close\r\n\r\n").encode()
    sock.sendall(req)
    status, headers, rest = read_head(sock)
    want = int(headers.get("content-length", "-1"))
    got, first = len(rest), rest[:200]
    view = memoryview(sink) if sink is not None else None
    while want < 0 or got < want:
        if view is not None:
            n = sock.recv_into(view)
        else:
            chunk = sock.recv(65536)
            n = len(chunk)
            if len(first) < 200:
                first += chunk[:200]
        if n == 0:
            if want < 0:
                break
            raise ConnectionError(f"body cut short at {got} of {want} bytes")
        got += n
    return status, got, first


def connect_tunnel(proxy_port, port, host=HOST):
    s = socket.create_connection(("127.0.0.1", proxy_port), timeout=TIMEOUT)
    try:
        s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        status, _, rest = read_head(s)
        if status != 200 or rest:
            raise ConnectionError(f"CONNECT answered {status}")
        return s
    except BaseException:
        s.close()
        raise


class Way:
    """One column: how a client reaches the upstream at `port`, by the name
    `host`, sending the extra `headers` with each request."""

    def __init__(self, name, proxy_port=None, cafile=None, host=HOST, headers=()):
        self.name, self.proxy_port = name, proxy_port
        self.host, self.headers = host, tuple(headers)
        self.ctx = None
        if cafile:
            self.ctx = ssl.create_default_context(cafile=cafile)

    def open(self, port, tls):
        if self.proxy_port is None:
            s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        elif tls:
            s = connect_tunnel(self.proxy_port, port, self.host)
        else:
            s = socket.create_connection(("127.0.0.1", self.proxy_port), timeout=TIMEOUT)
        if tls:
            try:
                s = self.ctx.wrap_socket(s, server_hostname=self.host)
            except BaseException:
                s.close()
                raise
        return s

    def get(self, port, tls, path, sink=None):
        s = self.open(port, tls)
        try:
            target = None
            if not tls and self.proxy_port is not None:
                target = f"http://{self.host}:{port}{path}"  # absolute form to a forward proxy
            return exchange(s, path, f"{self.host}:{port}", target, sink, self.headers)
        finally:
            s.close()


def check(way, port, tls):
    """A few sequential requests that must succeed before the timed run."""
    for _ in range(5):
        status, _, first = way.get(port, tls, "/small")
        if status != 200 or b"upstream saw GET /small" not in first:
            raise RuntimeError(f"status {status}: {first[:160]!r}")


def load(way, port, tls, concurrency, duration):
    lat, errors = [], []
    lock = threading.Lock()
    start = time.perf_counter()
    deadline = start + duration
    ends = []

    def worker():
        mine, errs = [], []
        while True:
            t0 = time.perf_counter()
            if t0 >= deadline:
                break
            try:
                status, _, first = way.get(port, tls, "/small")
                if status != 200:
                    raise RuntimeError(f"status {status}: {first[:120]!r}")
                mine.append(time.perf_counter() - t0)
            except Exception as e:  # counted, and the first few are shown
                errs.append(f"{type(e).__name__}: {e}")
        with lock:
            lat.extend(mine)
            errors.extend(errs)
            ends.append(time.perf_counter())

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = max(ends) - start
    return {"rps": len(lat) / elapsed, "n": len(lat), "errors": errors,
            "p50": pct(lat, 50), "p99": pct(lat, 99)}


def pct(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


# ---------------------------------------------------------------- the output

def fmt(v, spec):
    if v is None or v != v:
        return "-"
    return format(v, spec)


def ratio(a, b):
    if a is None or b is None or a != a or b != b or b == 0:
        return None
    return a / b


def table(rows, cols):
    print(f"  {'':28}" + "".join(f"{c:>14}" for c in cols))
    for label, values, spec in rows:  # the last two columns are ratios
        print(f"  {label:28}" + "".join(f"{fmt(v, spec if i < len(cols) - 2 else '.2f'):>14}"
                                        for i, v in enumerate(values)))


def report_inject(res, cpu):
    """Case 4. res: column -> load() result or an error string; cpu: column
    -> {process: CPU seconds} during its run."""
    cols = ["without credential", "with credential"]
    wo, wi = cols
    for c in cols:
        if isinstance(res.get(c), str):
            print(f"  {c}: not measured: {res[c]}")
    r = {c: res[c] for c in cols if isinstance(res.get(c), dict)}
    get = lambda c, k: r[c][k] if c in r else None
    ms = lambda c, k: get(c, k) * 1000 if c in r else None
    diff = lambda f: f(wi) - f(wo) if wi in r and wo in r else None
    per_req = lambda c, who=None: (
        sum(v for k, v in cpu[c].items() if who in (None, k)) / r[c]["n"] * 1000
        if c in r and cpu.get(c) is not None and r[c]["n"] else None)
    rps = lambda c: get(c, "rps")
    p50 = lambda c: ms(c, "p50")
    p99 = lambda c: ms(c, "p99")
    rows = [  # label, values, spec, with - without, with / without
        ("requests/s", [rps(c) for c in cols], ".1f", diff(rps), ratio(rps(wi), rps(wo))),
        ("latency p50 (ms)", [p50(c) for c in cols], ".2f", diff(p50), ratio(p50(wi), p50(wo))),
        ("latency p99 (ms)", [p99(c) for c in cols], ".2f", diff(p99), ratio(p99(wi), p99(wo))),
        ("proxy CPU per request (ms)", [per_req(c) for c in cols], ".2f", diff(per_req),
         ratio(per_req(wi), per_req(wo))),
        ("requests", [get(c, "n") for c in cols], "d", None, None),
        ("errors", [len(r[c]["errors"]) if c in r else None for c in cols], "d", None, None),
    ]
    print(f"  {'':28}" + "".join(f"{c:>20}" for c in cols) + f"{'with - without':>16}"
          + f"{'with/without':>14}")
    for label, values, spec, d, q in rows:
        print(f"  {label:28}" + "".join(f"{fmt(v, spec):>20}" for v in values)
              + f"{fmt(d, '+' + spec):>16}" + f"{fmt(q, '.2f'):>14}")
    if diff(p50) is not None:
        print(f"  added by injection per request: p50 {diff(p50):+.2f} ms, p99 {diff(p99):+.2f} ms")
    for c in cols:
        if per_req(c) is not None:
            print(f"  {c} CPU per request: " + ", ".join(
                f"{k} {per_req(c, k):.2f} ms" for k in cpu[c]))
    for c in cols:
        if c in r and r[c]["errors"]:
            print(f"  {c} errors, first: {r[c]['errors'][0]}")


# ---------------------------------------------------------------- squid

def start_squid(test_ca):
    """Starts squid in tmp/squid; returns (Popen, bump port, plain port) or
    raises with the reason."""
    if not os.path.exists(args.squid) or not os.path.exists(CERTGEN):
        raise RuntimeError(f"{args.squid} or {CERTGEN} missing (apt-get install squid-openssl)")
    d = tmp + "/squid"
    os.makedirs(d)
    # Squid drops root for the 'proxy' user: it must reach its own files.
    os.chmod(tmp, 0o711)
    shutil.copy(test_ca, d + "/testca.pem")
    sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 "
       "-subj '/CN=egress bench squid CA' 2>/dev/null; cat ca.crt ca.key > ca.pem", d)
    sh(f"{CERTGEN} -c -s {d}/ssl_db -M 4MB >/dev/null", d)
    with open(d + "/hosts", "w") as f:
        f.write(f"127.0.0.1 {HOST}\n")
    bump, plain = free_port(), free_port()
    conf = f"""# generated by bench/egress_bench.py
http_port 127.0.0.1:{bump} ssl-bump generate-host-certificates=on dynamic_cert_mem_cache_size=4MB tls-cert={d}/ca.pem
http_port 127.0.0.1:{plain}
sslcrtd_program {CERTGEN} -s {d}/ssl_db -M 4MB
ssl_bump bump all
tls_outgoing_options cafile={d}/testca.pem
http_access allow all
cache deny all
access_log none
cache_log {d}/cache.log
pid_filename {d}/squid.pid
coredump_dir {d}
netdb_filename none
hosts_file {d}/hosts
pinger_enable off
icp_port 0
htcp_port 0
shutdown_lifetime 0 seconds
visible_hostname egress-bench
cache_effective_user proxy
# squid's default, as proxyd: upstream connections are kept between
# requests (proxyd per sandbox and destination).
max_filedescriptors 4096
"""
    with open(d + "/squid.conf", "w") as f:
        f.write(conf)
    subprocess.run(["chown", "-R", "proxy:proxy", d], check=True)
    p = subprocess.Popen([args.squid, "-N", "-f", d + "/squid.conf"], stdout=open(d + "/out.log", "w"),
                         stderr=subprocess.STDOUT, start_new_session=True)
    children.append(("squid", p))
    if not (wait_port(bump, p, 30) and wait_port(plain, p, 30)):
        why = ""
        for name in ("out.log", "cache.log"):
            try:
                why += open(f"{d}/{name}").read()[-1500:]
            except OSError:
                pass
        raise RuntimeError(f"squid did not start (exit {p.poll()}):\n{why}")
    return p, bump, plain


# ---------------------------------------------------------------- main

squid_proc = None
squid_error = "not started"
signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))  # still clean up
try:
    # A test CA and an upstream certificate for every name used (case 4's
    # two names reach the same upstream).
    names = [HOST] + ([CRED_HOST, NOCRED_HOST] if "inject" in cases else [])
    san = ",".join(f"DNS:{n}" for n in names)
    sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key "
       "-out ca.pem -days 2 -subj '/CN=egress bench test CA' 2>/dev/null; "
       "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout up.key -out up.csr "
       f"-subj '/CN={HOST}' 2>/dev/null; printf 'subjectAltName={san}\\n' > ext; "
       "openssl x509 -req -in up.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out up.pem -days 2 "
       "-extfile ext 2>/dev/null", tmp)
    nginx_plain = nginx_tls = nginx_tls2 = None
    if cases & {"http", "https", "connect", "vm", "fair"}:
        nginx_plain, nginx_tls, nginx_tls2 = start_nginx(
            args.mib if cases & {"connect", "vm"} else 1)
    http_port = nginx_plain if "http" in cases else None
    # proxyd intercepts this port
    bump_up = nginx_tls2 if "https" in cases else None
    # and tunnels this one
    tunnel_up = nginx_tls if "connect" in cases else None
    # case 4: intercepted by both names, one with a credential
    inject_up = start_upstream("https-inject", True) if "inject" in cases else None

    os.makedirs(state_dir, mode=0o700)
    with open(state_dir + "/proxyd.conf", "w") as f:
        f.write("resolve = " + ",".join(f"{n}=127.0.0.1" for n in names)
                + f"\nupstream-ca = {tmp}/ca.pem\n")
    airlock("daemon", "start")
    airlock("policy", "init", "deny-all")
    if http_port:
        airlock("policy", "allow", "network", f"{HOST}:{http_port}", "--sandbox", "bench")
    if "fair" in cases:
        for sb in ("bench", "benchb"):
            airlock("policy", "allow", "network", f"{HOST}:{nginx_plain}", "--sandbox", sb)
    if bump_up:
        airlock("policy", "allow", "network", f"{HOST}:{bump_up}", "--method", "GET", "--path",
                "/**", "--sandbox", "bench")
    if tunnel_up:
        airlock("policy", "allow", "network", f"{HOST}:{tunnel_up}", "--sandbox", "bench")
    if "vm" in cases:
        for port in (nginx_plain, nginx_tls):
            for sb in ("bench", "benchvm"):
                if port not in (http_port, tunnel_up) or sb == "benchvm":
                    airlock("policy", "allow", "network", f"{HOST}:{port}", "--sandbox", sb)
    if inject_up:
        # The same rule for both names: both intercepted, only one credentialed.
        for n in (CRED_HOST, NOCRED_HOST):
            airlock("policy", "allow", "network", f"{n}:{inject_up}", "--method", "GET", "--path",
                    "/**", "--sandbox", "bench")
        secret_value = "bench-real-" + secrets.token_hex(16)
        out = airlock("secret", "set-custom", "--sandbox", "bench", "--host", CRED_HOST, "--env",
                      "BENCH_TOKEN", "--value", secret_value)
        placeholder = next((l.split("=", 1)[1].strip() for l in out.splitlines()
                            if l.startswith("BENCH_TOKEN=")), "")
        if not placeholder:
            sys.exit(f"airlock secret set-custom printed no BENCH_TOKEN=<placeholder>: {out!r}")

    os.makedirs(tmp + "/groot")
    harness = subprocess.Popen([args.harness, "--proxyd-socket", run_dir + "/proxyd.sock",
                                "--socket", tmp + "/egress.sock", "--sandbox", "bench",
                                "--root", tmp + "/groot"],
                               stdout=subprocess.PIPE, stderr=open(tmp + "/harness.log", "w"))
    children.append(("egress_harness", harness))
    line = read_line(harness, 60)  # proxyd waits 30 s for the attachment
    if not line.startswith("forward_port="):
        sys.exit(f"egress_harness did not attach: {line!r} {open(tmp + '/harness.log').read()}")
    forward_port = int(line.split("=", 1)[1])
    # case 6: a second sandbox, on a harness of its own
    forward_port_b = None
    if "fair" in cases:
        os.makedirs(tmp + "/groot-b")
        harness_b = subprocess.Popen([args.harness, "--proxyd-socket", run_dir + "/proxyd.sock",
                                      "--socket", tmp + "/egress-b.sock", "--sandbox", "benchb",
                                      "--root", tmp + "/groot-b"],
                                     stdout=subprocess.PIPE,
                                     stderr=open(tmp + "/harness-b.log", "w"))
        children.append(("egress_harness (benchb)", harness_b))
        line = read_line(harness_b, 60)
        if not line.startswith("forward_port="):
            sys.exit(f"the second egress_harness did not attach: {line!r} "
                     f"{open(tmp + '/harness-b.log').read()}")
        forward_port_b = int(line.split("=", 1)[1])
    proxyd_pid = int(open(run_dir + "/proxyd.pid").read().strip())
    proxyd_ca = state_dir + "/ca/ca.crt"
    for _ in range(50):  # the CA is written when proxyd starts
        if os.path.exists(proxyd_ca):
            break
        time.sleep(0.1)

    if cases & {"http", "https", "connect", "fair"}:
        try:
            squid_proc, squid_bump, squid_plain = start_squid(tmp + "/ca.pem")
            squid_error = None
        except Exception as e:
            squid_error = str(e)
            print(f"squid: {squid_error}\n(continuing without the squid column)\n")

    C, D = args.concurrency, args.duration
    print(f"egress benchmark: {os.cpu_count()} host CPUs, concurrency {C}, {D:g} s per run, "
          f"{args.repeat} runs per column")
    if cases & {"http", "connect"}:
        ver = subprocess.run([args.nginx, "-v"], capture_output=True, text=True).stderr.strip()
        print(f"cases 1 and 3: {ver} upstream (1 worker), wrk -t 2 (case 1), curl (case 3)")
    print("proxyd column: client -> egress_harness (the guest agent's egress endpoint, on the "
          "host) -> proxyd -> upstream;\n  no VM and no virtio-serial transport in the way")
    if squid_proc:
        ver = subprocess.run([args.squid, "-v"], capture_output=True, text=True).stdout.split("\n")[0]
        print(f"squid column: {ver}, ssl-bump (client-first) for HTTPS, a plain port for "
              "CONNECT, no cache,\n  upstream connections kept between requests (its default; "
              "proxyd keeps them too)")
    print("case 2: bench/https_load against nginx; case 4: Python client and upstream "
          "(tests/fixtures/upstream.py),\n  whose own overhead is in every column alike.")
    print("proxy CPU per request: proxyd + egress_harness + secretsd (asked for credentials "
          "when proxyd has no\n  answer its revision watch vouches for) for proxyd, the squid "
          "process for squid")
    print("cases: " + ", ".join(c for c in ALL_CASES if c in cases))
    print()

    proxyd_pids = {"proxyd": proxyd_pid, "egress_harness": harness.pid}
    try:  # proxyd asks secretsd for the credentials of every request it decides
        proxyd_pids["secretsd"] = int(open(run_dir + "/secretsd.pid").read().strip())
    except (OSError, ValueError):
        pass
    squid_pids = {"squid": squid_proc.pid} if squid_proc else {}

    # Everything this run started, to tell the host's other load apart.
    ours = {f"{n}-{p.pid}": p.pid for n, p in children}
    for name in ("vmmd", "proxyd", "policyd", "gitd", "secretsd"):
        try:
            ours[name] = int(open(f"{run_dir}/{name}.pid").read().strip())
        except (OSError, ValueError):
            pass
    busy0, own0, t0 = host_busy_seconds(), own_cpu_seconds(ours), time.monotonic()

    def report_wrk(title, res, cpu):
        """res: column -> list of wrk_once results, or an error string;
        cpu: column -> [{process: CPU seconds}] per run."""
        cols = ["direct", "proxyd", "squid"]
        print(title)
        for c in cols:
            if isinstance(res.get(c), str):
                print(f"  {c}: not measured: {res[c]}")
        r = {c: res[c] for c in cols if isinstance(res.get(c), list)}
        fig = lambda c, k: mmm3([x[k] for x in r[c]]) if c in r else None
        med = lambda c, k: fig(c, k)[1] if fig(c, k) else None
        added = lambda c, k: (mmm3([x[k] - med("direct", k) for x in r[c]])
                              if c in r and "direct" in r else None)
        per_req = lambda c: (mmm3([sum(cp.values()) / x["n"] for cp, x in zip(cpu[c], r[c])
                                   if cp and x["n"]]) if c in r and cpu.get(c) else None)
        med_cpu = lambda c: per_req(c)[1] if per_req(c) else None
        rows = [
            ("requests/s", [fig(c, "rps") for c in cols], ".0f", 1,
             ratio(med("proxyd", "rps"), med("direct", "rps")),
             ratio(med("proxyd", "rps"), med("squid", "rps"))),
            ("latency p50 (ms)", [fig(c, "p50") for c in cols], ".2f", 1000,
             ratio(med("proxyd", "p50"), med("direct", "p50")),
             ratio(med("proxyd", "p50"), med("squid", "p50"))),
            ("latency p99 (ms)", [fig(c, "p99") for c in cols], ".2f", 1000,
             ratio(med("proxyd", "p99"), med("direct", "p99")),
             ratio(med("proxyd", "p99"), med("squid", "p99"))),
            ("added p50 vs direct (ms)", [None] + [added(c, "p50") for c in cols[1:]], ".2f",
             1000, None, None),
            ("added p99 vs direct (ms)", [None] + [added(c, "p99") for c in cols[1:]], ".2f",
             1000, None, None),
            ("proxy CPU per request (ms)", [None] + [per_req(c) for c in cols[1:]], ".3f", 1000,
             None, ratio(med_cpu("proxyd"), med_cpu("squid"))),
            ("errors (all runs)", [(sum(x["errors"] for x in r[c]),) * 3 if c in r else None
                                   for c in cols], "d", 1, None, None),
        ]
        print(f"  {'min/median/max':27}" + "".join(f"{c:>22}" for c in cols)
              + f"{'proxyd/direct':>15}{'proxyd/squid':>14}")
        for label, values, spec, scale, q1, q2 in rows:
            print(f"  {label:27}" + "".join(f"{fmt3(v, spec, scale):>22}" for v in values)
                  + f"{fmt(q1, '.2f'):>15}{fmt(q2, '.2f'):>14}")
        print("  (ratios of the medians)")
        if "proxyd" in r and cpu.get("proxyd") and all(cpu["proxyd"]):
            names = sorted(cpu["proxyd"][0])
            share = {k: statistics.median(cp[k] / x["n"] for cp, x in zip(cpu["proxyd"], r["proxyd"])
                                          if x["n"]) for k in names}
            print("  proxyd column CPU per request (medians): "
                  + ", ".join(f"{k} {share[k] * 1000:.3f} ms" for k in names))

    def measure_wrk(title, close, connections=C):
        measure_runs(title, [
            (col, None if proxy is False else
             (lambda proxy=proxy: wrk_once(proxy, nginx_plain, close, connections, D)), pids)
            for col, proxy, pids in (("direct", None, None),
                                     ("proxyd", forward_port, proxyd_pids),
                                     ("squid", squid_plain if squid_proc else False, squid_pids))])

    def measure_runs(title, ways):
        """ways: (column, a function making one run's result, or None when
        the column cannot run, the pids whose CPU counts)."""
        res, cpu = {}, {}
        for col, run_once, pids in ways:
            if run_once is None:
                res[col] = squid_error or "unavailable"
                continue
            runs, cpus = [], []
            try:
                for _ in range(args.repeat):
                    c0 = cpu_seconds(pids) if pids else None
                    runs.append(run_once())
                    c1 = cpu_seconds(pids) if pids else None
                    cpus.append({k: c1[k] - c0[k] for k in c1} if c0 and c1 else None)
            except Exception as e:
                res[col] = f"{type(e).__name__}: {e}"
                continue
            res[col], cpu[col] = runs, cpus
        report_wrk(title, res, cpu)
        print()

    if "http" in cases:
        measure_wrk(f"1a. plain HTTP GET of a small body from nginx, wrk -c {C}, "
                    f"a new connection per request", True)
        measure_wrk(f"1b. the same with kept-alive connections (each request still decided on "
                    f"its own; upstream, connections kept between requests by both)", False)
        # With C connections every process of the run is busy on this host's
        # CPUs, so 1a/1b's latencies are mostly queueing; one connection at
        # a time shows what each request's path adds by itself.
        measure_wrk("1c. one connection at a time, a new one per request (no queueing: the "
                    "latency each request's path adds)", True, 1)
        measure_wrk("1d. one kept-alive connection", False, 1)
    if "https" in cases:
        if not os.path.exists(args.https_load):
            sys.exit(f"{args.https_load} missing (bazel build //bench:https_load)")
        bump_ways = (("direct", None, tmp + "/ca.pem", None),
                     ("proxyd", forward_port, proxyd_ca, proxyd_pids),
                     ("squid", squid_bump if squid_proc else False, tmp + "/squid/ca.crt",
                      squid_pids))
        for keep, what in ((False, "a new TLS connection per request (a full handshake each, "
                                   "no session reuse)"),
                           (True, "kept-alive TLS connections (each request still decided "
                                  "on its own)")):
            measure_runs(f"2{'b' if keep else 'a'}. HTTPS GET of a small body from nginx with "
                         f"interception (proxyd: a --method GET --path /** rule; squid: "
                         f"ssl-bump; direct: TLS to nginx), bench/https_load -c {C}, {what}", [
                (col, None if proxy is False else
                 (lambda proxy=proxy, ca=ca, keep=keep:
                  https_once(proxy, bump_up, ca, keep, C, D)), pids)
                for col, proxy, ca, pids in bump_ways])

    if "connect" in cases:
        print(f"3. CONNECT tunnel: TLS download of {args.mib} MiB from nginx by curl "
              f"(min/median/max of {args.repeat})")
        rates, per_gib, busy = {}, {}, {}
        for col, proxy, pids in (("direct", None, {}), ("proxyd", forward_port, proxyd_pids),
                                 ("squid", squid_plain if squid_proc else None, squid_pids)):
            if col == "squid" and not squid_proc:
                print(f"  {col}: not measured: {squid_error}")
                continue
            try:
                rates[col], per_gib[col], busy[col] = [], [], []
                for _ in range(args.repeat):
                    c0 = cpu_seconds(pids) if pids else None
                    b0, w0 = host_busy_seconds(), time.monotonic()
                    rates[col].append(curl_download(proxy, nginx_tls, args.mib))
                    busy[col].append((host_busy_seconds() - b0) / (time.monotonic() - w0)
                                     / os.cpu_count() * 100)
                    c1 = cpu_seconds(pids) if pids else None
                    if c0 and c1:
                        per_gib[col].append(sum(c1[k] - c0[k] for k in c1) * 1024 / args.mib)
            except Exception as e:
                rates.pop(col, None)
                print(f"  {col}: failed: {type(e).__name__}: {e}")
        cols = ["direct", "proxyd", "squid"]
        med = lambda c: statistics.median(rates[c]) if c in rates else None
        med_cpu = lambda c: statistics.median(per_gib[c]) if per_gib.get(c) else None
        print(f"  {'':27}" + "".join(f"{c:>22}" for c in cols)
              + f"{'proxyd/direct':>15}{'proxyd/squid':>14}")
        print(f"  {'MiB/s':27}" + "".join(f"{fmt3(mmm3(rates.get(c)), '.0f'):>22}" for c in cols)
              + f"{fmt(ratio(med('proxyd'), med('direct')), '.2f'):>15}"
              + f"{fmt(ratio(med('proxyd'), med('squid')), '.2f'):>14}")
        print(f"  {'proxy CPU-s per GiB':27}"
              + "".join(f"{fmt3(mmm3(per_gib.get(c)) if per_gib.get(c) else None, '.2f'):>22}"
                        for c in cols)
              + f"{'-':>15}{fmt(ratio(med_cpu('proxyd'), med_cpu('squid')), '.2f'):>14}")
        print(f"  {'host CPUs busy (%)':27}"
              + "".join(f"{fmt3(mmm3(busy.get(c)) if busy.get(c) else None, '.0f'):>22}"
                        for c in cols))
        print("  (proxyd's CPU is proxyd's and egress_harness's, the guest agent's side of the "
              "tunnel; where\n  direct keeps the host's CPUs busy, a proxy's CPU per GiB is "
              "what bounds its rate)")
        print()

    if "inject" in cases:
        print("4. credential injection: HTTPS GET with interception through proxyd, a new "
              "connection per request,\n  `Authorization: Bearer <placeholder>` to "
              f"{NOCRED_HOST} (no credential) and to {CRED_HOST}\n  (the bench sandbox's custom "
              "secret): the same upstream and rule; proxyd asks secretsd for both")
        print("  squid: not measured: squid has no credential injection")
        auth = [("Authorization", f"Bearer {placeholder}")]
        ways = [("without credential", Way("proxyd", forward_port, proxyd_ca, NOCRED_HOST, auth),
                 f"Bearer {placeholder}", "the placeholder"),
                ("with credential", Way("proxyd", forward_port, proxyd_ca, CRED_HOST, auth),
                 f"Bearer {secret_value}", "the real value")]
        # Once, before measuring: what the upstream received from each name.
        seen, problems = {}, []
        for col, way, want, what in ways:
            try:
                status, _, first = way.get(inject_up, True, "/small")
                line = first.decode(errors="replace").split("\n")[0]
                got = line.split(" auth=", 1)[1] if " auth=" in line else "(no auth= in the body)"
                seen[col] = ("the real value" if got == f"Bearer {secret_value}" else
                             "the placeholder" if got == f"Bearer {placeholder}" else repr(got))
                if status != 200 or got != want:
                    problems.append(f"{way.host}: status {status}, the upstream received "
                                    f"{seen[col]}, not {what}")
            except Exception as e:
                problems.append(f"{way.host}: {type(e).__name__}: {e}")
        if problems:
            print("  check at the upstream: FAILED: " + "; ".join(problems))
        else:
            print(f"  check at the upstream: ok: {CRED_HOST} received the real value "
                  f"(Authorization: Bearer <{len(secret_value)}-char value>), {NOCRED_HOST} the "
                  f"placeholder ({placeholder})")
        res, cpu = {}, {}
        for col, way, _, _ in ways:
            if problems:
                res[col] = "the check at the upstream failed"
                continue
            try:
                check(way, inject_up, True)
            except Exception as e:
                res[col] = f"check request failed: {type(e).__name__}: {e}"
                continue
            c0 = cpu_seconds(proxyd_pids)
            res[col] = load(way, inject_up, True, C, D)
            c1 = cpu_seconds(proxyd_pids)
            cpu[col] = {k: c1[k] - c0[k] for k in c1} if c0 and c1 else None
        report_inject(res, cpu)
        print()

    if "fair" in cases:
        flood = 500
        print(f"6. fair sharing: sandbox B's kept-alive GETs (wrk -c 1) alone, and while sandbox A "
              f"floods\n  the same proxy with wrk -c {flood} (new connections; proxyd's cap is 256 "
              f"per sandbox, so A's\n  extra connections are reset and retried); squid, with no "
              f"notion of sandboxes, serves both alike\n  (min/median/max of {args.repeat})")
        fair = {}
        for col, a_port, b_port in (("proxyd", forward_port, forward_port_b),
                                    ("squid", squid_plain, squid_plain)):
            if col == "squid" and not squid_proc:
                print(f"  squid: not measured: {squid_error}")
                continue
            alone, flooded, a_rps = [], [], []
            try:
                for _ in range(args.repeat):
                    alone.append(wrk_once(b_port, nginx_plain, False, 1, D))
                    a_script = f"{tmp}/wrk-flood.lua"
                    with open(a_script, "w") as f:
                        f.write(f'wrk.path = "http://{HOST}:{nginx_plain}/small"\n'
                                f'wrk.headers["Host"] = "{HOST}:{nginx_plain}"\n'
                                'wrk.headers["Connection"] = "close"\n')
                    a = subprocess.Popen([args.wrk, "-t", "2", "-c", str(flood), "-d",
                                          f"{D + 2:g}s", "-s", a_script,
                                          f"http://127.0.0.1:{a_port}/small"],
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         text=True)
                    try:
                        time.sleep(1)  # A at full pressure before B starts
                        flooded.append(wrk_once(b_port, nginx_plain, False, 1, D))
                        out, _ = a.communicate(timeout=D + 60)
                    finally:
                        if a.poll() is None:  # B failed: the flood must not load what follows
                            a.kill()
                            a.wait()
                    rps = [l.split()[1] for l in out.splitlines() if l.startswith("Requests/sec:")]
                    a_rps.append(float(rps[0]) if rps else 0.0)
            except Exception as e:
                print(f"  {col}: failed: {type(e).__name__}: {e}")
                continue
            fair[col] = (alone, flooded, a_rps)
        if fair:
            print(f"  {'':34}" + "".join(f"{c:>22}" for c in fair))
            for label, pick, scale, spec in (
                    ("B p50 alone (ms)", lambda f: [r["p50"] for r in f[0]], 1000, ".2f"),
                    ("B p50 under A's flood (ms)", lambda f: [r["p50"] for r in f[1]], 1000, ".2f"),
                    ("B p99 alone (ms)", lambda f: [r["p99"] for r in f[0]], 1000, ".2f"),
                    ("B p99 under A's flood (ms)", lambda f: [r["p99"] for r in f[1]], 1000, ".2f"),
                    ("B requests/s under A's flood", lambda f: [r["rps"] for r in f[1]], 1, ".0f"),
                    ("B errors under A's flood", lambda f: [r["errors"] for r in f[1]], 1, ".0f"),
                    ("A requests/s (the flood)", lambda f: f[2], 1, ".0f")):
                print(f"  {label:34}" + "".join(f"{fmt3(mmm3(pick(fair[c])), spec, scale):>22}"
                                                for c in fair))
            for c in fair:
                a50 = statistics.median(r["p50"] for r in fair[c][0])
                f50 = statistics.median(r["p50"] for r in fair[c][1])
                print(f"  {c}: B's p50 under the flood is {fmt(ratio(f50, a50), '.2f')}x its p50 "
                      "alone (medians)")
        print()

    if "vm" in cases:
        print(f"5. through a real sandbox: nginx from inside a 1 GiB guest (min/median/max of "
              f"{args.repeat})")
        NREQ = 300
        small = f"http://{HOST}:{nginx_plain}/small?[1-{NREQ}]"
        big = f"https://{HOST}:{nginx_tls}/big.bin"
        # Prints the bytes received (all requests) and the microseconds taken.
        timed_curl = ("s=$(date +%s%N); n=$(curl -sS -f -o /dev/null -w '%{{size_download}}\\n' "
                      "{flags} '{url}' | awk '{{t += $1}} END {{print t}}') || exit 1; "
                      "e=$(date +%s%N); echo \"$n $(( (e - s) / 1000 ))\"")

        def seconds_for(out, want_bytes):
            got, us = out.split()[-2:]
            if int(float(got)) != want_bytes:
                raise RuntimeError(f"curl received {got} bytes, not {want_bytes}")
            return int(us) / 1e6

        def host_run(flags, url, want_bytes):
            r = subprocess.run(["bash", "-o", "pipefail", "-c",
                                timed_curl.format(flags=flags, url=url)],
                               capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise RuntimeError(r.stderr.strip())
            return seconds_for(r.stdout, want_bytes)

        vm_error = None
        try:
            r = subprocess.run([args.airlock, "create", "--name", "benchvm", "-m", "1g", "shell"],
                               env=env, capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                raise RuntimeError(f"airlock create failed: {r.stderr.strip()}")
            subprocess.run([args.airlock, "exec", "-i", "benchvm", "--", "sh", "-c",
                            "cat > /tmp/ca.pem"], env=env, input=open(tmp + "/ca.pem").read(),
                           capture_output=True, text=True, check=True)
        except Exception as e:
            vm_error = str(e)
            print(f"  not measured: {vm_error}")

        def guest_run(flags, url, want_bytes):
            r = subprocess.run([args.airlock, "exec", "benchvm", "--", "bash", "-o", "pipefail",
                                "-c", timed_curl.format(flags=flags, url=url)], env=env,
                               capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise RuntimeError(f"in the guest: {r.stderr.strip() or r.stdout.strip()}")
            return seconds_for(r.stdout, want_bytes)

        if vm_error is None:
            harness_proxy = f"--proxy http://127.0.0.1:{forward_port}"
            resolve = f"--resolve {HOST}:{nginx_tls}:127.0.0.1 --resolve {HOST}:{nginx_plain}:127.0.0.1"
            dl_flags = f"--cacert {tmp}/ca.pem {resolve}"
            ways = {
                "download MiB/s": (
                    lambda: guest_run("--cacert /tmp/ca.pem", big, args.mib << 20),
                    lambda: host_run(f"{harness_proxy} --proxytunnel {dl_flags}", big,
                                     args.mib << 20),
                    lambda: host_run(dl_flags, big, args.mib << 20), lambda t: args.mib / t),
                f"{NREQ} kept-alive GETs, requests/s": (
                    lambda: guest_run("", small, NREQ * len(SMALL_BODY)),
                    lambda: host_run(f"{harness_proxy} {resolve}", small, NREQ * len(SMALL_BODY)),
                    lambda: host_run(resolve, small, NREQ * len(SMALL_BODY)),
                    lambda t: NREQ / t),
            }
            cols = ["guest (proxyd)", "host harness", "direct"]
            print(f"  {'min/median/max':36}" + "".join(f"{c:>22}" for c in cols)
                  + f"{'guest/harness':>15}{'guest/direct':>14}")
            for label, (g, h, d, rate) in ways.items():
                figs = []
                for fn in (g, h, d):
                    try:
                        figs.append(mmm3([rate(fn()) for _ in range(args.repeat)]))
                    except Exception as e:
                        print(f"  {label}: failed: {e}")
                        figs.append(None)
                med = [f[1] if f else None for f in figs]
                print(f"  {label:36}" + "".join(f"{fmt3(f, '.1f'):>22}" for f in figs)
                      + f"{fmt(ratio(med[0], med[1]), '.2f'):>15}"
                      + f"{fmt(ratio(med[0], med[2]), '.2f'):>14}")
            print("  guest column: curl in the guest (HTTPS_PROXY, the guest's agent, the egress "
                  "port, proxyd);\n  harness column: the same curl on the host through the "
                  "agent's egress endpoint run on the host")
        subprocess.run([args.airlock, "rm", "-f", "benchvm"], env=env, capture_output=True)
        print()

    other = (host_busy_seconds() - busy0) - (own_cpu_seconds(ours) - own0)
    wall = time.monotonic() - t0
    print(f"other processes on the host used {max(other, 0):.1f} CPU-s during the "
          f"{wall:.0f} s of runs ({max(other, 0) / wall * 100:.0f}% of one CPU); "
          f"figures are unreliable when that is high")

    # What proxyd said while under load: its warnings and errors by message.
    try:
        log = open(state_dir + "/logs/proxyd.log", errors="replace").read().splitlines()
        by_msg = {}
        for l in log:
            try:
                e = json.loads(l)
            except ValueError:
                continue
            if e.get("level") in ("warning", "warn", "error"):
                by_msg.setdefault((e["level"], e.get("msg", "")), []).append(e)
        print(f"proxyd log: {len(log)} lines, "
              f"{sum(len(v) for v in by_msg.values())} warnings/errors")
        for (level, msg), es in sorted(by_msg.items(), key=lambda kv: -len(kv[1]))[:5]:
            print(f"  {len(es)} x {level}: {msg}" + (f" ({es[-1]['error'][:200]})"
                                                      if "error" in es[-1] else ""))
    except OSError:
        pass
finally:
    if squid_proc is not None:
        if squid_proc.poll() is None:
            squid_proc.terminate()
            try:
                squid_proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(squid_proc.pid, signal.SIGKILL)  # its own group: squid and its helpers
        except ProcessLookupError:
            pass
    for name, p in reversed(children):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    subprocess.run([args.airlock, "daemon", "stop"], env=env, capture_output=True)
    if args.keep:
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
