"""What the sandbox benchmarks share: running a command or the CLI and
stopping at the first failure, timing, min/median/max, and a bench CA with
a server certificate. The scripts in bench/ import it from beside them."""
import os
import statistics
import subprocess
import sys
import time


def run(argv, **kw):
    """Runs argv and returns its CompletedProcess; exits the benchmark with
    the command's output when it fails."""
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({r.returncode}): {r.stdout[-500:]} {r.stderr[-2000:]}")
    return r


def cli(airlock, env):
    """A function running `airlock ARGS...` with `env` (its own daemons)."""
    return lambda *a: run([airlock, *a], env=env)


def timed(fn):
    t = time.monotonic()
    fn()
    return time.monotonic() - t


def host_memory_mib(pid):
    """The host memory a VM's process holds, in MiB: its resident pages
    (VmRSS) other than the shared memory it maps, plus each memfd it holds
    in full. A restored sandbox's guest RAM (and a direct-mode one's) is a
    memfd, and the pages of it the VM has not touched since are memory
    all the same, which VmRSS leaves out."""
    own, files = host_memory_parts_mib(pid)
    return own + files


def host_memory_parts_mib(pid):
    """host_memory_mib in two parts, in MiB: the memory the VM alone holds
    (its anonymous resident pages, plus each memfd in full), and the
    resident pages of files it maps (RssFile: the kernel and initramfs
    QEMU keeps mapped, QEMU's own binary and libraries), which are page
    cache every VM of the same files shares, and clean, so the host can
    reclaim them."""
    status = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if value.strip().endswith("kB"):
                status[key] = int(value.split()[0])
    own = status.get("RssAnon", 0) * 1024
    fd_dir = f"/proc/{pid}/fd"
    seen = set()  # QEMU holds a restored guest's memfd twice (fd 4, and its own open)
    for fd in os.listdir(fd_dir):
        try:
            if os.readlink(f"{fd_dir}/{fd}").startswith("/memfd:"):
                st = os.stat(f"{fd_dir}/{fd}")
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    own += st.st_blocks * 512
        except OSError:
            pass
    return own / (1 << 20), status.get("RssFile", 0) / 1024


def mmm(values, unit="s", fmt="%.2f"):
    return "min %s / median %s / max %s %s" % (fmt % min(values), fmt % statistics.median(values),
                                               fmt % max(values), unit)


def make_certs(directory, names):
    """Writes a bench CA (ca.pem, ca.key) and a certificate for `names`
    signed by it (up.pem, up.key) into `directory`, with openssl."""
    alt = ",".join("DNS:" + n for n in names)
    run(["sh", "-c", f"cd {directory} && openssl req -x509 -newkey ec -pkeyopt "
         "ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 -subj '/CN=bench CA' "
         "2>/dev/null && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
         f"-keyout up.key -out up.csr -subj /CN={names[0]} 2>/dev/null && "
         f"printf 'subjectAltName={alt}\\n' > ext && openssl x509 -req -in up.csr -CA ca.pem "
         "-CAkey ca.key -CAcreateserial -out up.pem -days 2 -extfile ext 2>/dev/null"])
