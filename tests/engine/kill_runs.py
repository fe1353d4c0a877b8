#!/usr/bin/python3
"""Kill `flexgen run` and its workers at seeded random moments; every run's
output must equal an uninterrupted run's, and the reference engine's.

  kill_runs.py workers FLEXGEN WORKDIR [--seed S] [--kills N]
      Runs the offloading engine on a small random checkpoint with weights on
      disk, a KV cache half on the CPU (CPU attention) and half on disk, and
      activations on disk, and SIGKILLs the gpu, cpu and disk workers at
      seeded random moments of the run's progress (see workers()) until each
      role has been killed N times (default 20) over the runs. The supervisor restarts each; a gpu worker's block is redone (the
      engine redoes a block at most 3 times, so at most 2 gpu kills land in one
      block). Every run's JSONL must equal the reference engine's byte for byte.

  kill_runs.py coordinator FLEXGEN WORKDIR [--seed S] [--trials N]
      Each trial SIGKILLs `flexgen run` at a random moment after its first block
      was journaled (sometimes its resume too), checks that the dead run's
      workers exit and that a resume with another model, prompt file or
      setting, a fresh run over the unfinished job, or a second run while one
      holds the job, is refused; one trial tears the journal's last block, one
      completes the journal (nothing left but the output); then
      `--resume --job DIR` must end with the uninterrupted run's output, byte for
      byte, its log saying it skipped the journaled blocks and computing only
      the rest (journal lines, generated-token count).

  kill_runs.py default-device FLEXGEN WORKDIR [--seed S]
      A user's path: no --device flag and no FLEXGEN_DEVICE in the
      environment. The job is SIGKILLed once before its first journaled block
      and once after it; each `--resume --job DIR` must end with the
      uninterrupted run's output (and the reference engine's, where the
      default backend is the host one, whose bits it equals).

The oracle is the reference engine (`--engine reference`, one process, all in
memory) at the same GPU batch size, which the offloading engine equals bit for
bit (docs/ARCHITECTURE.md, Numerics); sampling is on (temperature, top-p), so
a generator seeded per run rather than per prompt would show. Exit 0 pass,
1 fail.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "..", "ref")

N_PROMPTS, GEN, GBS, K = 32, 8, 2, 2
BLOCK = GBS * K
N_BLOCKS = (N_PROMPTS + BLOCK - 1) // BLOCK
SAMPLING = ["--temperature", "0.8", "--top-p", "0.9", "--seed", "11"]


def make_inputs(work, rng):
    subprocess.run([sys.executable, os.path.join(REF, "make_checkpoint.py"), "--out", f"{work}/m", "--layers", "2",
                    "--hidden", "64", "--heads", "4", "--ffn", "128", "--vocab", "300", "--max-pos", "64",
                    "--seed", "9"], check=True, stdout=subprocess.DEVNULL)
    prompts = [[2] + [rng.randrange(3, 300) for _ in range(rng.randrange(1, 14))] for _ in range(N_PROMPTS)]
    with open(f"{work}/p.json", "w") as f:
        json.dump(prompts, f)


def model_args(work):
    return ["--model", f"{work}/m", "--prompt-ids", f"{work}/p.json", "--gen-len", str(GEN), *SAMPLING]


def reference(flexgen, work):
    out = f"{work}/ref.jsonl"
    subprocess.run([flexgen, "run", "--engine", "reference", *model_args(work), "--gpu-batch-size", str(GBS),
                    "--out", out], check=True, stderr=subprocess.DEVNULL)
    return open(out, "rb").read()


def children(pid):
    """{role: pid} of the live workers whose parent is pid."""
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
            fields = st[st.rindex(")") + 2:].split()
            if int(fields[1]) != pid or fields[0] == "Z":
                continue
            exe = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")[0].decode()
        except (OSError, ValueError):
            continue
        m = re.search(r"flexgen-(gpu|cpu|disk)-worker$", exe)
        if m:
            found[m.group(1)] = (int(d), int(fields[19]))   # pid, start time in clock ticks
    return found


def uptime_ticks():
    return float(open("/proc/uptime").read().split()[0]) * os.sysconf("SC_CLK_TCK")


def journaled(log):
    try:
        return len(re.findall(r"job: block \d+/\d+ .* journaled", open(log).read()))
    except OSError:
        return 0


def fail(msg):
    print("FAIL " + msg)
    return 1


# ---------------------------------------------------------------- workers


def ready_pids(log):
    """Pids of the workers the coordinator has seen say READY."""
    try:
        return {int(x) for x in re.findall(r"worker ready: pid (\d+)", open(log).read())}
    except OSError:
        return set()


def kill_point(p, log, rng, need, mine, gpu_in_block):
    """With the coordinator stopped (SIGSTOP: the run cannot move on, let alone
    end, while its workers die), SIGKILL a random non-empty subset of the roles
    in `need` whose worker has said READY; then SIGCONT. Returns the roles
    killed, {role: journaled blocks at the kill}."""
    os.kill(p.pid, signal.SIGSTOP)
    killed = {}
    try:
        done = journaled(log)
        if done >= N_BLOCKS:
            return killed   # every block is out: the run is shutting down
        up, ready = children(p.pid), ready_pids(log)
        roles = [r for r in need if r in up and up[r][0] in ready and
                 not (r == "gpu" and gpu_in_block.get(done, 0) >= 2)]   # the engine redoes a block 3 times at most
        for r in rng.sample(roles, rng.randint(1, len(roles))) if roles else []:
            try:
                os.kill(up[r][0], signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed[r] = done
            mine[r] += 1
            if r == "gpu":
                gpu_in_block[done] = gpu_in_block.get(done, 0) + 1
    finally:
        os.kill(p.pid, signal.SIGCONT)
    return killed


def workers(flexgen, work, rng, want):
    """Kill points come from the run's own progress, not the clock: after each
    journaled block but the last, at a random moment within the next block
    (a random share of the block before's duration), the coordinator is
    stopped and a random subset of the ready workers is killed. The first
    block the test sees journaled is a kill point with every worker ready and
    no wait, so every run kills at least once however fast or loaded the
    machine, and the count is reached within 3 x N runs; no cap on runs.
    A run that offered no kill point fails (the test saw no block)."""
    ref = reference(flexgen, work)
    policy = ["--gpu-batch-size", str(GBS), "--num-gpu-batches", str(K), "--percent", "30", "30", "0", "50", "0",
              "0", "--cpu-cache-compute", "--offload-dir", f"{work}/off", "--device", "host"]
    kills = {"gpu": 0, "cpu": 0, "disk": 0}
    fails, run = 0, 0
    t_start = time.time()
    while min(kills.values()) < want:
        run += 1
        out, log = f"{work}/w{run}.jsonl", f"{work}/w{run}.log"
        with open(log, "w") as lf:
            p = subprocess.Popen([flexgen, "run", *model_args(work), *policy, "--out", out], stderr=lf)
        gpu_in_block = {}   # journaled blocks at the kill -> gpu kills in that block
        mine = {"gpu": 0, "cpu": 0, "disk": 0}
        points, seen_done, t_block = 0, 0, None
        while p.poll() is None:
            time.sleep(0.001)
            done = journaled(log)
            if done == seen_done or done >= N_BLOCKS:
                continue
            now = time.time()
            block_s = now - t_block if t_block else 0.0
            seen_done, t_block = done, now
            need = [r for r in kills if kills[r] + mine[r] < want]
            if not need:
                continue   # enough: the run ends undisturbed
            if done < N_BLOCKS - 1:   # not the last block: a moment inside it
                time.sleep(rng.uniform(0, 0.8 * block_s))
            if kill_point(p, log, rng, need, mine, gpu_in_block):
                points += 1
        rc = p.wait()
        text = open(log).read()
        seen = {r: len(re.findall(rf"the {r} worker \(pid \d+\) killed by signal 9", text)) for r in kills}
        got = open(out, "rb").read() if os.path.exists(out) else b""
        tag = f"run {run}: {points} kill points, kills gpu {mine['gpu']} cpu {mine['cpu']} disk {mine['disk']}"
        if rc != 0:
            fails += fail(f"{tag}: exit {rc}: {[l for l in text.splitlines() if 'error' in l][-3:]}")
        elif seen != mine:
            fails += fail(f"{tag}: the coordinator saw {seen}")
        elif got != ref:
            fails += fail(f"{tag}: output differs from the reference engine's")
        else:
            print(f"ok   {tag} (seen and restarted: {seen}); output equals the reference engine's")
        for r in kills:   # a kill counts once the coordinator saw the death and restarted the worker
            kills[r] += seen[r]
        if points == 0:
            fails += fail(f"{tag}: the run offered no kill point")
        if fails:
            break
    print(f"workers: {run} runs, kills seen gpu {kills['gpu']} cpu {kills['cpu']} disk {kills['disk']} "
          f"in {time.time() - t_start:.0f} s")
    return fails


# ---------------------------------------------------------------- coordinator


def start(flexgen, cmd, log):
    with open(log, "w") as lf:
        return subprocess.Popen([flexgen, "run", *cmd], stderr=lf)


def block_times(flexgen, cmd, log):
    """Run cmd uninterrupted, noting when each block is journaled: (exit
    status, seconds from the first block to the last)."""
    p = start(flexgen, cmd, log)
    t1 = None
    while p.poll() is None:
        if t1 is None and journaled(log) >= 1:
            t1 = time.time()
        time.sleep(0.01)
    return p.returncode, time.time() - (t1 or time.time())


def kill_coordinator(flexgen, cmd, log, delay, meanwhile=None):
    """Start cmd and SIGKILL it `delay` s after its first journaled block
    (calling meanwhile() first). Returns (blocks journaled per its log, its
    worker pids), or None when it ended first."""
    p = start(flexgen, cmd, log)
    t = time.time()
    while journaled(log) < 1 and p.poll() is None and time.time() - t < 120:
        time.sleep(0.01)
    t = time.time()
    if meanwhile:
        meanwhile()
    time.sleep(max(0.0, delay - (time.time() - t)))
    pids = [w[0] for w in children(p.pid).values()]
    if p.poll() is not None:
        return None
    p.send_signal(signal.SIGKILL)
    p.wait()
    return journaled(log), pids


def alive(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def refused(flexgen, cmd, what):
    r = subprocess.run([flexgen, "run", *cmd], stderr=subprocess.PIPE, text=True)
    if r.returncode != 2 or what not in r.stderr:
        return fail(f"{' '.join(cmd[-4:])}: expected exit 2 naming {what!r}, got {r.returncode}: "
                    f"{r.stderr.strip().splitlines()[-1:]}")
    print(f"ok   refused ({what}): {r.stderr.strip().splitlines()[-1][:150]}")
    return 0


def check_resume(log, killed_log, out, done, ref, tag):
    """The resumed run's log and output: it ran the killed run's policy (with
    --policy auto too: no new search), skipped the `done` journaled blocks (or
    one more, journaled after the last log line the kill let through) and
    computed exactly the rest."""
    text = open(log).read()
    pol = [re.search(r"info: (policy: .*)", x) for x in (open(killed_log).read(), text)]
    if done == N_BLOCKS and not pol[1]:
        pol[1] = pol[0]   # nothing left to compute: no engine, no policy line
    if not all(pol) or pol[0].group(1) != pol[1].group(1) or "policy auto" in text:
        return fail(f"{tag}: the resume ran another policy or searched again: {[x and x.group(1) for x in pol]}")
    m = re.search(r"resuming: (\d+) of (\d+) blocks finished", text)
    blocks = [int(b) for b in re.findall(r"job: block (\d+)/\d+ .* journaled", text)]
    gen = re.search(r"generated (\d+) tokens for (\d+) prompts", text)
    got = open(out, "rb").read() if os.path.exists(out) else b""
    if not m or not gen:
        return fail(f"{tag}: resume failed: {text.strip().splitlines()[-1:]}")
    skipped = int(m.group(1))
    if skipped not in (done, done + 1) or skipped == 0:
        return fail(f"{tag}: the resume skipped {skipped} blocks")
    if blocks != list(range(skipped + 1, N_BLOCKS + 1)):
        return fail(f"{tag}: the resume journaled blocks {blocks}, expected {skipped + 1}..{N_BLOCKS}")
    computed = N_PROMPTS - min(N_PROMPTS, skipped * BLOCK)
    if int(gen.group(2)) != computed or int(gen.group(1)) != computed * GEN:
        return fail(f"{tag}: the resume {gen.group(0)}, expected {computed} prompts")
    if got != ref:
        return fail(f"{tag}: the resumed output differs from the reference engine's")
    rest = f"computed {skipped + 1}..{N_BLOCKS}" if skipped < N_BLOCKS else "computed nothing, wrote the output"
    print(f"ok   {tag}; the resume skipped {skipped} block(s), {rest}; output equals the reference engine's")
    return 0


def coordinator(flexgen, work, rng, trials):
    ref = reference(flexgen, work)
    fixed = ["--gpu-batch-size", str(GBS), "--num-gpu-batches", str(K), "--offload-dir", f"{work}/off",
             "--device", "host"]   # the search and the timing as measured here, GPU or not
    policies = {"percent": ["--percent", "50", "30", "0", "100", "0", "0", "--cpu-cache-compute"],
                "auto": ["--policy", "auto", "--hardware", "flexgen-t4", "--gpu-mem", "400K"]}
    fails = 0
    span = {}
    for name, pol in policies.items():   # uninterrupted: the output, and how long its blocks take
        out = f"{work}/u-{name}.jsonl"
        rc, span[name] = block_times(flexgen, model_args(work) + pol + fixed + ["--out", out], f"{work}/u-{name}.log")
        if rc != 0 or open(out, "rb").read() != ref:
            fails += fail(f"uninterrupted ({name}): exit {rc}, or output differs from the reference engine's")
        print(f"uninterrupted ({name}): blocks 1..{N_BLOCKS} journaled over {span[name]:.2f} s")
    # the other model and prompt file a resume must refuse
    subprocess.run([sys.executable, os.path.join(REF, "make_checkpoint.py"), "--out", f"{work}/m2", "--layers", "2",
                    "--hidden", "64", "--heads", "4", "--ffn", "128", "--vocab", "300", "--max-pos", "64",
                    "--seed", "10"], check=True, stdout=subprocess.DEVNULL)
    prompts = json.load(open(f"{work}/p.json"))
    prompts[-1][-1] = 3 + (prompts[-1][-1] - 2) % 290
    json.dump(prompts, open(f"{work}/p2.json", "w"))
    t, kills = 0, 0
    while kills < trials and t < 3 * trials:
        name = list(policies)[t % 2]
        out, job = f"{work}/c{t}.jsonl", f"{work}/job{t}"
        cmd = model_args(work) + policies[name] + fixed + ["--out", out, "--job", job]
        # a moment between the first block's end and the run's
        busy = []   # a second run on a job in progress is refused, not interleaved
        k = kill_coordinator(flexgen, cmd, f"{work}/c{t}.log", rng.uniform(0, 0.75 * span[name]),
                             (lambda: busy.append(refused(flexgen, ["--resume", "--job", job], "another flexgen run")))
                             if kills == 0 else None)
        fails += sum(busy)
        t += 1
        if k is None:
            print(f"--   trial {t - 1} ({name}): the run ended before the kill; another trial")
            continue
        kills += 1
        done, pids = k
        tag = f"trial {t - 1} ({name}): killed after {done} journaled block(s)"
        # the dead run's workers go (parent death, else heartbeat silence)
        t0 = time.time()
        while any(alive(q) for q in pids) and time.time() - t0 < 15:
            time.sleep(0.1)
        if any(alive(q) for q in pids):
            fails += fail(f"{tag}: workers {[q for q in pids if alive(q)]} alive 15 s after the coordinator died")
        resume = ["--resume", "--job", job]
        if kills == 1:   # what a resume refuses, each exit 2 before any work
            fails += refused(flexgen, resume + ["--gen-len", str(GEN + 1)], "gen_len")
            fails += refused(flexgen, resume + ["--model", f"{work}/m2"], "model_identity")
            fails += refused(flexgen, resume + ["--prompt-ids", f"{work}/p2.json"], "prompts_xxh3")
            fails += refused(flexgen, resume + ["--seed", "12"], "seed")
            fails += refused(flexgen, resume + ["--dump-logits", f"{work}/x.npy"], "--dump-logits")
            fails += refused(flexgen, cmd, "unfinished job")
        journal = f"{job}/journal.jsonl"
        lines = open(journal, "rb").read().split(b"\n")[:-1]
        ref_lines = [x + b"\n" for x in ref.split(b"\n")[:-1]]
        if kills == 1 and len(lines) + BLOCK <= N_PROMPTS:
            # a torn block: three whole lines of the next and half a fourth (as a
            # kill inside the append's write leaves), cut off by the resume
            with open(journal, "wb") as f:
                f.write(b"".join(x + b"\n" for x in lines) + b"".join(ref_lines[len(lines):len(lines) + 3]) +
                        ref_lines[len(lines) + 3][:20])
            done = len(lines) // BLOCK
            tag += " and a torn block after them"
        if kills == 3:
            # every block journaled, the output not yet written: the resume computes nothing
            with open(journal, "wb") as f:
                f.write(b"".join(x + b"\n" for x in lines) + b"".join(ref_lines[len(lines):]))
            done = N_BLOCKS
            tag += ", then the journal completed"
        log = f"{work}/c{t - 1}.r.log"
        if kills % 3 == 2:   # the resume is killed too, and resumed again
            k2 = kill_coordinator(flexgen, resume, log, rng.uniform(0, 0.5 * span[name]))
            m0 = re.search(r"resuming: (\d+) of", open(log).read())
            if k2 is not None and m0:
                done = int(m0.group(1)) + k2[0]
                tag += f", its resume at {done}"
                log = f"{work}/c{t - 1}.r2.log"
        if os.path.exists(job):   # else the killed resume ended first: its log is the one to check
            r = subprocess.run([flexgen, "run", *resume], stderr=open(log, "w"))
            if r.returncode != 0:
                fails += fail(f"{tag}: the resume exited {r.returncode}")
                continue
        fails += check_resume(log, f"{work}/c{t - 1}.log", out, done, ref, tag)
        # the killed run's shared memory and run directory were swept by the next run
        rid = re.search(r"/run-([0-9a-f]+)/ctl", open(f"{work}/c{t - 1}.log").read())
        if rid:
            stale = [f for f in os.listdir("/dev/shm") if f.startswith(f"flexgen-{rid.group(1)}-")]
            # (a resume with nothing to compute starts no workers and leaves the run directory to the next)
            rundir = os.path.exists(f"{work}/xdg/flexgen/run-{rid.group(1)}") and done < N_BLOCKS
            if stale or rundir:
                fails += fail(f"{tag}: the killed run's segments {stale} or run directory are left")
        if os.path.exists(job):
            fails += fail(f"{tag}: the job directory is left after the output was written")
    if kills < trials:
        fails += fail(f"only {kills} of {t} runs were killed before they ended")
    # the killed runs' spill files (disk-tier cache and activations) went with the next run
    spills = [f for f in os.listdir(f"{work}/off") if f.startswith("spill-")]
    if spills:
        fails += fail(f"spill files of killed runs left in the offload directory: {spills}")
    else:
        print("ok   no spill file of a killed run left in the offload directory")
    return fails


# ---------------------------------------------------------------- default device


def default_device(flexgen, work):
    os.environ.pop("FLEXGEN_DEVICE", None)   # as users run it: the device is the default one
    ref = reference(flexgen, work)
    cmd = model_args(work) + ["--gpu-batch-size", str(GBS), "--num-gpu-batches", str(K), "--percent", "50", "30",
                              "0", "100", "0", "0", "--cpu-cache-compute", "--offload-dir", f"{work}/off"]
    out = f"{work}/d-u.jsonl"
    rc, _ = block_times(flexgen, cmd + ["--out", out], f"{work}/d-u.log")
    uninterrupted = open(out, "rb").read() if rc == 0 and os.path.exists(out) else None
    if uninterrupted is None:
        return fail(f"uninterrupted run without --device: exit {rc}")
    host = "gpu worker backend: host" in open(f"{work}/d-u.log").read()
    if host and uninterrupted != ref:
        return fail("uninterrupted run on the default (host) backend differs from the reference engine's")
    print(f"ok   uninterrupted run on the default backend ({'host' if host else 'not host'})")
    fails = 0
    for when in ("before", "after"):
        job, out, log = f"{work}/d-{when}.job", f"{work}/d-{when}.jsonl", f"{work}/d-{when}.log"
        p = start(flexgen, cmd + ["--out", out, "--job", job], log)
        # before: once the record is written (workers starting, nothing journaled); after: one block journaled
        ready = (lambda: os.path.exists(f"{job}/job.json")) if when == "before" else (lambda: journaled(log) >= 1)
        while not ready() and p.poll() is None:
            time.sleep(0.002)
        done = journaled(log)
        if p.poll() is not None or (when == "before" and done > 0):
            fails += fail(f"killed {when} the first block: the run got past that point first ({done} journaled)")
            p.kill(); p.wait()
            continue
        p.send_signal(signal.SIGKILL)
        p.wait()
        device = json.load(open(f"{job}/job.json"))["resources"].get("device", "absent")
        r = subprocess.run([flexgen, "run", "--resume", "--job", job], stderr=open(f"{log}.r", "w"))
        got = open(out, "rb").read() if os.path.exists(out) else b""
        tag = f"killed {when} the first journaled block ({done} journaled; job.json device {device})"
        if r.returncode != 0:
            fails += fail(f"{tag}: --resume exited {r.returncode}: {open(f'{log}.r').read().strip().splitlines()[-1:]}")
        elif got != uninterrupted:
            fails += fail(f"{tag}: the resumed output differs from the uninterrupted run's")
        else:
            print(f"ok   {tag}; resumed to the uninterrupted output" + (" and the reference engine's" if host else ""))
    return fails


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["workers", "coordinator", "default-device"])
    ap.add_argument("flexgen")
    ap.add_argument("work")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--trials", type=int, default=4)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    # run directories of our own: another test's tampering with the shared
    # default (/tmp/flexgen-UID) cannot fail these runs
    os.makedirs(f"{a.work}/xdg", mode=0o700)
    os.environ["XDG_RUNTIME_DIR"] = f"{a.work}/xdg"
    rng = random.Random(a.seed)
    print(f"seed {a.seed}")
    make_inputs(a.work, rng)
    if a.mode == "workers":
        fails = workers(a.flexgen, a.work, rng, a.kills)
    elif a.mode == "coordinator":
        fails = coordinator(a.flexgen, a.work, rng, a.trials)
    else:
        fails = default_device(a.flexgen, a.work)
    print(f"{a.mode}: {'FAILED' if fails else 'passed'}")
    if not fails:
        shutil.rmtree(a.work, ignore_errors=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
