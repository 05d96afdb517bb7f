"""One account's flood of slow legal schemas beside another account's ordinary checks (issue 69).

The attacker keeps CONNS requests of an expensive schema (an `allOf` of 1,000 backtracking
lookahead patterns over the 16 example actions a submission may hold: each check compiles and runs
them in a checker process) in flight for SECS seconds; the victim sends an ordinary check every 3 s
(20 a minute: its own share). The first line says how long the attacker's schema costs alone: a
schema that holds a checker its whole 2 s is played by the API tests' slow checker
(`internals::openenv_schema_guard_shares`). Prints the victim's latencies and answers, the
attacker's answers by status and code, and the server's CPU (its own and its reaped checkers')
over the flood. Usage: flood.py URL USERS_JSON SERVER_PID SECS CONNS
"""

import collections
import json
import os
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request

url, users_file, pid, secs, conns = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
tokens = {u["name"]: u["token"] for u in json.load(open(users_file))}


def submission(sid, action, examples):
    return {
        "submission_id": sid,
        "name": "Flood bench",
        "image": "ghcr.io/test/echo-ok:v1",
        "schema": {"action": action, "observation": {"type": "object"}},
        "tasks": [{"task_id": "echo-1", "split": "train"}],
        "example_actions": examples,
    }


ORDINARY = submission(
    "ordinary",
    {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    [{"message": "hello"}],
)
SLOW = submission(
    "slow",
    {"type": "object", "properties": {"message": {"type": "string", "allOf": [{"pattern": "^(?=(a+)+b)"}] * 1000}}},
    [{"message": "a" * (24 + i % 8) + "c"} for i in range(16)],
)


def check(token, body):
    data = json.dumps(body).encode()
    req = urllib.request.Request(f"{url}/api/openenv/check", data=data, method="POST")
    req.add_header("authorization", f"Bearer {token}")
    req.add_header("content-type", "application/json")
    started = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            r.read()
            status, code = r.status, "OK"
    except urllib.error.HTTPError as e:
        status, code = e.code, json.loads(e.read() or b"{}").get("code", "?")
    return status, code, time.monotonic() - started


def cpu_s():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    own = (int(fields[11]) + int(fields[12])) / tick
    children = (int(fields[13]) + int(fields[14])) / tick
    return own, children


size = len(json.dumps(SLOW))
first = check(tokens["mallory"], SLOW)
print(f"the slow schema ({size} bytes of body), alone: {first[0]} {first[1]} in {first[2]:.2f} s")
alone = check(tokens["alice"], ORDINARY)
print(f"an ordinary check, alone: {alone[0]} {alone[1]} in {alone[2]:.2f} s")
time.sleep(1)

stop = time.monotonic() + secs
attacker = collections.Counter()
lock = threading.Lock()


def flood():
    while time.monotonic() < stop:
        status, code, _ = check(tokens["mallory"], SLOW)
        with lock:
            attacker[(status, code)] += 1


cpu0, wall0 = cpu_s(), time.monotonic()
threads = [threading.Thread(target=flood) for _ in range(conns)]
for t in threads:
    t.start()
victim = []
while time.monotonic() < stop:
    asked = time.monotonic()
    victim.append(check(tokens["alice"], ORDINARY))
    time.sleep(max(0.0, 3.0 - (time.monotonic() - asked)))
for t in threads:
    t.join()
cpu1, wall = cpu_s(), time.monotonic() - wall0

latencies = sorted(v[2] for v in victim)
answers = collections.Counter((v[0], v[1]) for v in victim)
print(f"flood: {conns} connections of mallory for {secs:.0f} s; alice's ordinary check every 3 s")
print(f"alice: {len(victim)} checks, answers {dict(answers)}")
print(
    f"alice's latency: median {statistics.median(latencies):.3f} s, max {latencies[-1]:.3f} s, "
    f"within 3 s {sum(1 for v in victim if v[0] == 200 and v[2] <= 3.0)}/{len(victim)}"
)
print(f"mallory: {sum(attacker.values())} answers {dict(sorted(attacker.items()))}")
own, children = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
print(
    f"server CPU over {wall:.1f} s: {own:.1f} s own, {children:.1f} s in schema checkers "
    f"({(own + children) / wall:.2f} cores)"
)
ok = all(v[0] == 200 and v[2] <= 3.0 for v in victim)
print("BENCH flood " + ("PASS: every ordinary check answered 200 within 3 s" if ok else "FAIL"))
sys.exit(0 if ok else 1)
