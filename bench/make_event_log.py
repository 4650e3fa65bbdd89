#!/usr/bin/env python3
"""Writes a store with N hash-chained events (4 tenants) for timing `carve audit verify` and
`carve audit export`: bench/make_event_log.py N DIR, then `carve audit verify --data DIR` or
`carve server --data DIR` and `carve audit export --tenant acme`. The hash is the store's
(docs/store.md), so the server appends to the chain and verify accepts it."""
import hashlib
import json
import os
import sqlite3
import sys

n, out = int(sys.argv[1]), sys.argv[2]
os.makedirs(out, exist_ok=True)
db = sqlite3.connect(os.path.join(out, "carve.db"))
db.executescript(
    "CREATE TABLE IF NOT EXISTS records(kind TEXT NOT NULL, id TEXT NOT NULL, json TEXT NOT NULL,"
    " PRIMARY KEY (kind, id)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS events(seq INTEGER PRIMARY KEY, time_us INTEGER NOT NULL,"
    " actor TEXT NOT NULL, type TEXT NOT NULL, subject TEXT NOT NULL, reason TEXT NOT NULL,"
    " details_json TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL);")
prev, rows = "0" * 64, []
for seq in range(1, n + 1):
    tenant = ["acme", "globex", "initech", "umbrella"][seq % 4]
    details = json.dumps({"tenant": tenant, "project": "p", "queue": "default"},
                         separators=(",", ":"), sort_keys=True)
    event = (seq, 1796000000000000 + seq * 1000, "scheduler", "job.scheduled",
             "job/%d" % (seq // 5 + 1), "placed on gpu-a", details)
    preimage = "\n".join([prev] + [str(f) for f in event])
    digest = hashlib.sha256(preimage.encode()).hexdigest()
    rows.append(event + (prev, digest))
    prev = digest
db.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?)", rows)
db.commit()
print("%d events, head %d:%s" % (n, n, prev))
