#!/usr/bin/env python3
"""The client of bench/slurm-compare: the same load against Carve's REST API and slurmrestd.

  slurm_compare.py api --system carve --url URL --token TOKEN [--clients 16] [--jobs 2000]
  slurm_compare.py e2e --system slurm --url URL --user root --token JWT [--jobs 1000]

api: CLIENTS threads submit JOBS one-GPU `true` jobs between them, each over its own keep-alive
connection; prints the rate and the latency percentiles, then cancels what is still queued or
running and waits until the system is idle (not measured).
e2e: submits JOBS one-GPU `true` jobs for the 8-GPU node with CLIENTS threads and measures from the
first submission until every job has ended: jobs/s. Polls for ends every 100 ms.
Each prints one JSON line (prefix "RESULT ") besides its human-readable lines.
Python 3 standard library only.
"""

import argparse
import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.parse


class Client:
    """One keep-alive HTTP connection; reconnects once when the server closed it."""

    def __init__(self, url, headers):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port or 80
        self.headers = dict(headers)
        self.conn = None

    def request(self, method, path, body=None, extra=None):
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self.headers)
        if data is not None:
            headers["Content-Type"] = "application/json"
        headers.update(extra or {})
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                text = resp.read()
                if resp.will_close:
                    self.conn.close()
                    self.conn = None
                return resp.status, text
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.conn.close()
                self.conn = None
                if attempt == 1:
                    raise
        raise RuntimeError("unreachable")


class Carve:
    def __init__(self, args):
        self.url = args.url
        self.headers = {"Authorization": "Bearer " + args.token}
        self.cursor = 0

    def client(self):
        return Client(self.url, self.headers)

    def submit(self, client, tag, i, node_bound, command="true"):
        spec = {"name": f"{tag}-{i}", "command": command.split(), "resources": {"gpus": 1}}
        if node_bound:
            spec["resources"]["gpu_model"] = ["H200"]  # carve dev: only h200-0 has H200s
        # The key makes a retry after a dropped connection safe.
        status, text = client.request("POST", "/api/v1/jobs", spec,
                                      {"Idempotency-Key": f"{tag}-{i}"})
        if status != 201:
            raise RuntimeError(f"submit: HTTP {status}: {text[:200]!r}")
        return json.loads(text)["id"]

    def start_ends(self, client):
        """Skips events so far: ends() reports only later ones."""
        while True:
            events = self.events(client)
            if not events:
                return

    def events(self, client):
        status, text = client.request(
            "GET", f"/api/v1/events?after={self.cursor}&limit=10000")
        if status != 200:
            raise RuntimeError(f"events: HTTP {status}")
        events = json.loads(text)
        if events:
            self.cursor = events[-1]["seq"]
        return events

    def ends(self, client):
        """Jobs that reached a final state since the last call: id -> state."""
        done = {}
        final = {"succeeded", "failed", "cancelled", "timed-out", "lost", "preempted"}
        while True:
            events = self.events(client)
            for e in events:
                kind = e["type"]
                if kind.startswith("job.") and kind[4:] in final:
                    done[int(e["subject"].split("/")[1])] = kind[4:]
            if len(events) < 10000:
                return done

    def cancel_rest(self, client, ids):
        for i in ids:
            client.request("POST", f"/api/v1/jobs/{i}/cancel", {})

    def idle(self, client):
        status, text = client.request("GET", "/api/v1/jobs")
        return status == 200 and not json.loads(text)

    def running(self, client, ids):
        status, text = client.request("GET", "/api/v1/jobs")
        return status == 200 and sum(
            1 for j in json.loads(text) if j["id"] in ids and j["state"] == "running") == len(ids)


class Slurm:
    API = "/slurm/v0.0.38"

    def __init__(self, args):
        self.url = args.url
        self.headers = {"X-SLURM-USER-NAME": args.user, "X-SLURM-USER-TOKEN": args.token}
        self.seen = set()

    def client(self):
        return Client(self.url, self.headers)

    def submit(self, client, tag, i, node_bound, command="true"):
        del node_bound  # the Slurm cluster here is the one 8-GPU node
        body = {
            "script": f"#!/bin/sh\nexec {command}\n",
            "job": {
                "name": f"{tag}-{i}",
                "current_working_directory": "/tmp",
                "environment": {"PATH": "/usr/bin:/bin"},
                "gres": "gpu:1",
                "standard_output": "/dev/null",
                "standard_error": "/dev/null",
            },
        }
        status, text = client.request("POST", self.API + "/job/submit", body)
        answer = json.loads(text) if text else {}
        if status != 200 or answer.get("errors"):
            raise RuntimeError(f"submit: HTTP {status}: {text[:300]!r}")
        return answer["job_id"]

    def active(self):
        out = subprocess.run(
            ["squeue", "-h", "-o", "%i", "-t", "PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED"],
            capture_output=True, text=True, check=True).stdout
        return {int(x) for x in out.split()}

    def start_ends(self, client):
        del client

    def states(self, ids):
        """How the jobs ended (squeue keeps ended jobs for MinJobAge, 300 s): id -> state."""
        out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i %T"], capture_output=True,
                             text=True, check=True).stdout
        states = {}
        for line in out.splitlines():
            job, state = line.split()
            if int(job) in ids:
                states[int(job)] = "succeeded" if state == "COMPLETED" else state.lower()
        return states

    def cancel_rest(self, client, ids):
        del client, ids
        subprocess.run(["scancel", "--user", "root"], check=False)

    def idle(self, client):
        del client
        return not self.active()

    def running(self, client, ids):
        del client
        out = subprocess.run(["squeue", "-h", "-o", "%i", "-t", "RUNNING"], capture_output=True,
                             text=True, check=True).stdout
        return set(ids) <= {int(x) for x in out.split()}


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    k = min(len(sorted_values) - 1, max(0, int(round(p / 100.0 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


def submit_all(system, clients, jobs, tag, node_bound):
    """Submits jobs 0..jobs-1 from `clients` threads; returns (ids, latencies_s, wall_s)."""
    ids, latencies, errors = [], [], []
    lock = threading.Lock()
    next_job = [0]
    barrier = threading.Barrier(clients + 1)

    def worker():
        client = system.client()
        mine_ids, mine_lat = [], []
        barrier.wait()
        while True:
            with lock:
                i = next_job[0]
                next_job[0] += 1
            if i >= jobs:
                break
            t = time.perf_counter()
            try:
                mine_ids.append(system.submit(client, tag, i, node_bound))
            except Exception as e:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(str(e))
                continue
            mine_lat.append(time.perf_counter() - t)
        with lock:
            ids.extend(mine_ids)
            latencies.extend(mine_lat)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        print(f"{len(errors)} submissions failed; first: {errors[0]}", file=sys.stderr)
    return ids, sorted(latencies), wall, len(errors)


def wait_idle(system, client, timeout_s=900):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if system.idle(client):
            return True
        time.sleep(0.5)
    return False


def run_api(system, args):
    client = system.client()
    tag = f"api-{int(time.time())}"
    # Blockers hold the 8-GPU node, so what is submitted queues behind them: the submission path
    # with the scheduler cycling over a growing queue, without launching jobs on the same CPUs.
    blockers = [system.submit(client, f"{tag}-blocker", i, True, "sleep 3600")
                for i in range(args.blockers)]
    if blockers:
        deadline = time.time() + 60
        while not system.running(client, blockers):
            if time.time() > deadline:
                print("the blockers did not start", file=sys.stderr)
                return 1
            time.sleep(0.2)
    ids, lat, wall, failed = submit_all(system, args.clients, args.jobs, tag, args.blockers > 0)
    ids += blockers
    ms = [x * 1000 for x in lat]
    result = {
        "system": args.system, "measure": "api", "clients": args.clients, "jobs": len(lat),
        "blockers": args.blockers,
        "failed": failed, "wall_s": round(wall, 3), "rate_per_s": round(len(lat) / wall, 1),
        "p50_ms": round(percentile(ms, 50), 2), "p99_ms": round(percentile(ms, 99), 2),
        "max_ms": round(ms[-1] if ms else 0, 2),
    }
    print(f"{args.system}: {len(lat)} submissions by {args.clients} clients in {wall:.2f} s "
          f"({'queued behind %d blockers' % args.blockers if args.blockers else 'running'}): "
          f"{result['rate_per_s']}/s, p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, "
          f"max {result['max_ms']} ms")
    print("RESULT " + json.dumps(result), flush=True)
    system.cancel_rest(client, ids)
    if not wait_idle(system, client):
        print("the system did not become idle after cancelling", file=sys.stderr)
        return 1
    return 0


def run_e2e(system, args):
    client = system.client()
    system.start_ends(client)
    start = time.perf_counter()
    ids, _, submit_wall, failed = submit_all(system, args.clients, args.jobs,
                                             f"e2e-{int(time.time())}", True)
    pending = set(ids)
    ended = {}
    deadline = time.time() + args.timeout
    while pending and time.time() < deadline:
        if isinstance(system, Slurm):
            pending &= system.active()
        else:
            ended.update(system.ends(client))
            pending -= ended.keys()
        if pending:
            time.sleep(0.1)
    wall = time.perf_counter() - start
    done = len(ids) - len(pending)
    if isinstance(system, Slurm):
        ended = system.states(set(ids))
    succeeded = sum(1 for i in ids if ended.get(i) == "succeeded")
    result = {
        "system": args.system, "measure": "e2e", "jobs": len(ids), "failed": failed,
        "ended": done, "succeeded": succeeded, "submit_s": round(submit_wall, 3),
        "wall_s": round(wall, 3),
        "jobs_per_s": round(done / wall, 2),
    }
    print(f"{args.system}: {done} of {len(ids)} one-GPU `true` jobs ended ({succeeded} succeeded) "
          f"{wall:.2f} s after the first submission (submitting took {submit_wall:.2f} s): "
          f"{result['jobs_per_s']} jobs/s")
    print("RESULT " + json.dumps(result), flush=True)
    return 0 if not pending and not failed and succeeded == len(ids) else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("measure", choices=["api", "e2e"])
    p.add_argument("--system", choices=["carve", "slurm"], required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--token", required=True, help="Carve: a bearer token; Slurm: a JWT")
    p.add_argument("--user", default="root", help="Slurm: the user the JWT is for")
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--timeout", type=float, default=900, help="e2e: give up after this long")
    p.add_argument("--blockers", type=int, default=8,
                   help="api: `sleep` jobs that hold the node's GPUs first (0: jobs run as "
                        "submitted, on every node of carve dev)")
    args = p.parse_args()
    if args.jobs is None:
        args.jobs = 2000 if args.measure == "api" else 1000
    system = Carve(args) if args.system == "carve" else Slurm(args)
    return run_api(system, args) if args.measure == "api" else run_e2e(system, args)


if __name__ == "__main__":
    sys.exit(main())
