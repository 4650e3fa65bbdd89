#!/usr/bin/env python3
"""Carve at a cluster's size, measured on one machine (docs/scale.md).

  bench/scale.py --carve build/apps/carve/carve --nodes 1000 --jobs 50000 --store sqlite
  bench/scale.py --carve ... --nodes 5000 --jobs 50000 --store postgres [--heartbeat-ms 500]

Starts a `carve server` (SQLite in a temporary directory, or a private PostgreSQL from Debian's
packages with a second server following), then `carve sim agents --nodes N` (simulated agents
speaking the real protocol, each job's replica a virtual `sleep`), then submits JOBS one-GPU jobs
with `carve sim submit` while the cluster runs them. It records: the agents' heartbeat latency
and rate (as the agents saw it, every 10 s), the server's own heartbeat and scheduling-cycle
histograms (/metrics), the submissions' rate and latency, the server's peak resident memory,
how long the whole load took to run, and, on PostgreSQL, how long the follower took to lead (its
/readyz answering 200 as leader, the store loaded) once the leader was killed (SIGKILL) with
everything in the store. Prints one JSON document (prefix "RESULT ") and writes it to --out.
Python 3 standard library only.
"""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, token=None, timeout=5):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def wait_for(pred, seconds, what):
    until = time.time() + seconds
    while time.time() < until:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    sys.exit(f"scale: {what} did not happen within {seconds} s")


def rss_kib(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def histogram(text, name):
    """The quantile bounds p50/p90/p99 and the count of a Prometheus histogram."""
    buckets = [(float("inf") if le == "+Inf" else float(le), int(n))
               for le, n in re.findall(name + r'_bucket\{le="([^"]+)"\} (\d+)', text)]
    total = buckets[-1][1] if buckets else 0
    out = {"count": total}
    m = re.search(name + r"_sum ([0-9.e+-]+)", text)
    if m and total:
        out["mean_ms"] = round(float(m.group(1)) / total * 1000, 2)
    for q in (0.5, 0.9, 0.99):
        bound = next((le for le, n in buckets if total and n >= q * total), None)
        out[f"p{int(q * 100)}_at_most_ms"] = None if bound is None else (
            "inf" if bound == float("inf") else bound * 1000)
    return out


class Postgres:
    def __init__(self, root):
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not bins:
            sys.exit("scale: no PostgreSQL server installed (scripts/deps installs it)")
        self.bin = os.path.dirname(bins[-1])
        self.dir = os.path.join(root, "pg")
        os.makedirs(self.dir)
        self.port = free_port()
        self.as_ = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
            self.as_ = ["runuser", "-u", "postgres", "--"]
        subprocess.run(self.as_ + [self.bin + "/initdb", "-D", self.dir + "/data", "-A", "trust",
                                   "-U", "carve"], check=True, stdout=subprocess.DEVNULL)
        opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                "-c max_connections=300")
        subprocess.run(self.as_ + [self.bin + "/pg_ctl", "-D", self.dir + "/data", "-l",
                                   self.dir + "/server.log", "-w", "-o", opts, "start"],
                       check=True, stdout=subprocess.DEVNULL)
        self.url = f"postgresql://carve@127.0.0.1:{self.port}/postgres"

    def stop(self):
        subprocess.run(self.as_ + [self.bin + "/pg_ctl", "-D", self.dir + "/data", "-m",
                                   "immediate", "stop"], stdout=subprocess.DEVNULL)


def start_server(args, root, name, port, store):
    data = os.path.join(root, name)
    cmd = [args.carve, "server", "--data", data, "--listen", f"127.0.0.1:{port}",
           "--log-level", "warn", "--node-timeout-ms", str(args.node_timeout_ms),
           "--lost-after-ms", str(args.node_timeout_ms)]
    if store:
        cmd += ["--store", store, "--name", name, "--lease-ms", str(args.lease_ms)]
    log = open(os.path.join(root, name + ".log"), "w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), data


def ready_role(port):
    code, body = get(f"http://127.0.0.1:{port}/readyz")
    try:
        return code, json.loads(body).get("role", "")
    except ValueError:
        return code, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--carve", default="build/apps/carve/carve")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=50000)
    ap.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--heartbeat-ms", type=int, default=500)
    ap.add_argument("--job-seconds", type=int, default=30)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--swarm-threads", type=int, default=64)
    ap.add_argument("--node-timeout-ms", type=int, default=10000)
    ap.add_argument("--lease-ms", type=int, default=3000)
    ap.add_argument("--drain-timeout-s", type=int, default=900)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    args.carve = os.path.abspath(args.carve)

    root = tempfile.mkdtemp(prefix="carve-scale-")
    os.chmod(root, 0o755)  # the PostgreSQL server runs as its own user
    pg = Postgres(root) if args.store == "postgres" else None
    procs = []
    result = {"nodes": args.nodes, "jobs": args.jobs, "store": args.store,
              "heartbeat_ms": args.heartbeat_ms, "job_seconds": args.job_seconds,
              "cores": os.cpu_count()}
    try:
        port = free_port()
        leader, data = start_server(args, root, "a", port, pg.url if pg else None)
        procs.append(leader)
        wait_for(lambda: ready_role(port)[0] == 200, 60, "the server's start")
        follower_port = None
        if pg:
            follower_port = free_port()
            follower, _ = start_server(args, root, "b", follower_port, pg.url)
            procs.append(follower)
            wait_for(lambda: ready_role(follower_port)[1] == "follower", 60, "the follower")
        servers = f"http://127.0.0.1:{port}"
        if follower_port:
            servers += f",http://127.0.0.1:{follower_port}"
        token = open(os.path.join(data, "admin.token")).read().strip()
        os.environ["CARVE_JOIN_TOKEN"] = open(os.path.join(data, "agent.token")).read().strip()
        swarm_json = os.path.join(root, "swarm.json")
        swarm = subprocess.Popen(
            [args.carve, "--server", servers, "sim", "agents", "--nodes", str(args.nodes),
             "--heartbeat-ms", str(args.heartbeat_ms), "--threads", str(args.swarm_threads),
             "--credentials", os.path.join(root, "swarm.credentials"), "--json", swarm_json],
            stdout=open(os.path.join(root, "swarm.out"), "w"), stderr=subprocess.STDOUT)
        procs.append(swarm)
        wait_for(lambda: "registered" in open(os.path.join(root, "swarm.out")).read(), 600,
                 "the agents' registration")
        time.sleep(15)  # the agents' heartbeats settle before the load
        idle_rss = rss_kib(leader.pid, "VmRSS")

        started = time.time()
        submit_json = os.path.join(root, "submit.json")
        submit = subprocess.Popen(
            [args.carve, "--server", servers, "--token", token, "sim", "submit",
             "--jobs", str(args.jobs), "--clients", str(args.clients),
             "--command", f"sleep {args.job_seconds}", "--json", submit_json],
            stdout=subprocess.DEVNULL)
        peak = 0
        done = False
        while not done and time.time() - started < args.drain_timeout_s:
            time.sleep(1)
            peak = max(peak, rss_kib(leader.pid, "VmRSS"))
            if submit.poll() is None:
                continue
            code, body = get(f"http://127.0.0.1:{port}/metrics", token, timeout=30)
            depth = sum(float(v) for v in re.findall(r"^carve_queue_depth\{[^}]*\} (\S+)", body,
                                                     re.M))
            running = len(re.findall(r'^carve_job_allocated_gpus\{', body, re.M))
            done = code == 200 and depth == 0 and running == 0
        result["drained"] = done
        result["load_seconds"] = round(time.time() - started, 1)
        result["submit"] = json.load(open(submit_json))
        code, metrics = get(f"http://127.0.0.1:{port}/metrics", token, timeout=30)
        result["server_cycle"] = histogram(metrics, "carve_scheduler_cycle_seconds")
        result["server_heartbeat"] = histogram(metrics, "carve_agent_heartbeat_seconds")
        result["server_rss_mib"] = {"idle_with_nodes": idle_rss // 1024, "peak": peak // 1024,
                                    "hwm": rss_kib(leader.pid, "VmHWM") // 1024}

        if pg:
            leader.send_signal(signal.SIGKILL)
            killed = time.time()
            wait_for(lambda: ready_role(follower_port) == (200, "leader"), 120, "the take-over")
            result["failover_seconds"] = round(time.time() - killed, 2)
            time.sleep(12)  # the agents find the new leader (their windows show the gap)
        swarm.send_signal(signal.SIGINT)
        swarm.wait(60)
        windows = json.load(open(swarm_json))["windows"]
        result["agent_windows"] = [
            {"at_s": round(w["at_s"]), "beats_per_s": round(w["heartbeats_per_second"]),
             "failed": w["heartbeats_failed"], "late": w["late_beats"],
             "running": w["replicas_running"], **{k: w["heartbeat_latency"].get(k) for k in
                                                  ("p50_ms", "p99_ms", "max_ms")}}
            for w in windows]
        load = [w for w in windows if w["replicas_running"] > 0 or w["replicas_started"] > 0]
        lat = sorted(w["heartbeat_latency"].get("p99_ms", 0) for w in load) or [0]
        result["agent_heartbeat_p99_ms_worst_window"] = lat[-1]
        result["agent_heartbeat_p50_ms_median_window"] = sorted(
            w["heartbeat_latency"].get("p50_ms", 0) for w in load or windows)[len(load or windows)
                                                                            // 2]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        if pg:
            pg.stop()
    text = json.dumps(result, indent=1)
    print("RESULT " + json.dumps(result))
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
