#!/usr/bin/env python3
"""A pipeline rank that dies ends the run on every rank, and --resume with
the same mpirun line finishes the job with the output of an uninterrupted
run.

1. mpirun -np 2: when rank 0 has journaled its first block, rank 0 is
   stopped (so the run cannot outpace the test, however fast the machine),
   rank 1's coordinator is SIGKILLed, rank 0 continued. Every process of
   the run (both coordinators, their six workers, mpirun) must be gone
   within 10 s of the kill, and mpirun's message must name rank 1.
2. The same mpirun line with --resume: exit 0, the log says the journaled
   blocks were not recomputed, the output equals a single-process run's
   byte for byte.
3. A rank that fails with an error (rank 1's GPU budget too small) ends
   every rank with exit status != 0 and a message naming it, no output.

Usage: kill_rank.py FLEXGEN WORKDIR
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "..", "ref")
PY = os.environ.get("FG_PYTHON", "/usr/bin/python3")
DEADLINE_S = 10.0


def mpi_env():
    if not shutil.which("mpirun"):
        print("SKIP: no mpirun (apt-get install openmpi-bin)")
        sys.exit(77)
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_btl_vader_single_copy_mechanism="none")
    return env


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def main():
    flexgen, work = sys.argv[1], sys.argv[2]
    env = mpi_env()
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    subprocess.run([PY, os.path.join(REF, "make_checkpoint.py"), "--out", f"{work}/m", "--layers", "4",
                    "--hidden", "64", "--heads", "4", "--ffn", "160", "--vocab", "500", "--max-pos", "96",
                    "--seed", "4"], check=True, stdout=subprocess.DEVNULL)
    with open(f"{work}/p.json", "w") as f:
        f.write("[" + ",".join(f"[2,{10 + i},{20 + 3 * i},{7 + i}]" for i in range(16)) + "]\n")
    common = ["--model", f"{work}/m", "--prompt-ids", f"{work}/p.json", "--gen-len", "6", "--ignore-eos",
              "--gpu-batch-size", "2", "--device", "host"]
    single = subprocess.run([flexgen, "run", *common, "--num-gpu-batches", "2", "--percent", "100", "0", "100", "0",
                             "100", "0", "--offload-dir", f"{work}/off-s", "--out", f"{work}/single.jsonl"],
                            env=env, capture_output=True, text=True)
    assert single.returncode == 0, single.stderr
    fails = 0

    # rank 0: weights on disk; rank 1: CPU cache with CPU attention
    def line(extra, r1=("--percent", "0", "100", "0", "100", "0", "100", "--cpu-cache-compute")):
        r0 = ("--percent", "0", "0", "100", "0", "100", "0")
        out = ["--out", f"{work}/p.jsonl", "--job", f"{work}/job"]
        return ["mpirun", "-np", "1", flexgen, "run", *common, *r0, "--offload-dir", f"{work}/off0", *out, *extra,
                ":", "-np", "1", flexgen, "run", *common, *r1, "--offload-dir", f"{work}/off1", *out, *extra]

    # 1. kill rank 1 after rank 0's first journaled block
    proc = subprocess.Popen(line([]), env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    pids, coord, log = set(), {}, []
    killed_at = None
    for text in proc.stderr:
        log.append(text)
        m = re.match(r"\[(\S+?)(?: rank (\d+)/\d+)? (\d+)\]", text)
        if m:
            pids.add(int(m.group(3)))
            if m.group(1) == "coordinator" and m.group(2) is not None:
                coord[int(m.group(2))] = int(m.group(3))
        if killed_at is None and re.search(r"rank 0/2 \d+\] info: job: block 1/\d+ .* journaled", text):
            os.kill(coord[0], signal.SIGSTOP)
            os.kill(coord[1], signal.SIGKILL)
            killed_at = time.monotonic()
            os.kill(coord[0], signal.SIGCONT)
            break
    if killed_at is None:
        proc.kill()
        print("FAIL kill: the run ended before its first journaled block:\n" + "".join(log[-10:]))
        return 1
    _, rest = proc.communicate(timeout=60)
    ended = time.monotonic() - killed_at
    log.append(rest)
    pids.add(proc.pid)
    left = [p for p in pids if alive(p)]
    deadline = killed_at + DEADLINE_S
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [p for p in pids if alive(p)]
    text = "".join(log)
    if left or ended > DEADLINE_S:
        print(f"FAIL kill: {len(left)} processes left, mpirun ended {ended:.1f} s after the kill")
        fails += 1
    elif proc.returncode == 0 or not re.search(r"rank 1\b", rest):
        print(f"FAIL kill: mpirun exit {proc.returncode}; no message naming rank 1:\n{rest[-2000:]}")
        fails += 1
    elif os.path.exists(f"{work}/p.jsonl"):
        print("FAIL kill: an output file after a failed run")
        fails += 1
    else:
        print(f"ok   kill: rank 1 SIGKILLed; every one of {len(pids)} processes gone, mpirun ended "
              f"{ended:.1f} s after the kill (limit {DEADLINE_S:.0f} s), exit {proc.returncode}: "
              + re.search(r".*rank 1\b.*", rest).group(0).strip())

    # 2. --resume with the same line
    res = subprocess.run(line(["--resume"]), env=env, capture_output=True, text=True, timeout=300)
    m = re.search(r"resuming: (\d+) of (\d+) blocks finished", res.stderr)
    if res.returncode != 0 or not m or int(m.group(1)) < 1:
        print(f"FAIL resume: exit {res.returncode}: {res.stderr[-2000:]}")
        fails += 1
    elif open(f"{work}/p.jsonl").read() != open(f"{work}/single.jsonl").read():
        print("FAIL resume: the output differs from the single-process run's")
        fails += 1
    else:
        print(f"ok   resume: {m.group(1)} of {m.group(2)} blocks kept from the journal; the output equals "
              "the single-process run's byte for byte")

    # 3. a rank's error ends every rank
    os.unlink(f"{work}/p.jsonl")
    shutil.rmtree(f"{work}/job", ignore_errors=True)
    t0 = time.monotonic()
    bad = subprocess.run(line([], r1=("--percent", "100", "0", "100", "0", "100", "0", "--gpu-mem", "64K")),
                         env=env, capture_output=True, text=True, timeout=120)
    if bad.returncode == 0 or "rank 1 of 2 ended with an error" not in bad.stderr or \
            os.path.exists(f"{work}/p.jsonl"):
        print(f"FAIL error: exit {bad.returncode}: {bad.stderr[-2000:]}")
        fails += 1
    else:
        print(f"ok   error: rank 1's budget refused; every rank ended in {time.monotonic() - t0:.1f} s, "
              f"exit {bad.returncode}, no output")
    print("all kill cases passed" if not fails else f"{fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
