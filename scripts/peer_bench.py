#!/usr/bin/env python3
"""scripts/peer_bench.py — StarZeRO against PyTorch on CPU, on the same GPT-2, checkpoint and batches.

Run through scripts/peer-bench.sh, which makes the virtual environment with PyTorch and builds the
tree; never a dependency of the build or the tests. Two roles in one file:

  driver (default): writes an llm.c token file, has sz-train write a random-init llm.c checkpoint
      (--config MODEL --seed 1 --steps 0 --save), checks that PyTorch's first fp32 losses on that
      checkpoint and batch equal sz-train's (to --tol, 1e-4) and stops if they do not; then runs,
      in turn, sz-bench and the PyTorch configurations on the same model, batch, seq, optimizer and
      thread count, samples every process's PSS and RSS (/proc/PID/smaps_rollup), and writes a
      markdown table, a JSON file and a section of docs/BENCHMARKS.md between marker comments.
  worker (--worker): one PyTorch run (eager or torch.compile, fp32 or bf16 autocast, one process or
      one rank of DDP / FSDP over gloo), one JSON line per step on stdout.

The PyTorch model is llm.c's train_gpt2.py layout (GPT-2 with tanh GELU, tied lm_head, causal
scaled_dot_product_attention), loaded from the llm.c checkpoint (the first V rows of the padded
wte). AdamW as sz-train/sz-bench default: lr 3e-4, betas (0.9, 0.999), eps 1e-8, weight decay 0,
no gradient clipping (sz-train's default is off; sz-bench never clips).
"""
import argparse
import datetime
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BEGIN = "<!-- peer-bench:begin (written by scripts/peer-bench.sh; rerun it to replace) -->"
END = "<!-- peer-bench:end -->"
LR, BETA1, BETA2, EPS, WD = 3e-4, 0.9, 0.999, 1e-8, 0.0


# ---- the PyTorch side (imported only in workers) ------------------------------------------------

def build_model(torch, cfg):
    nn, F = torch.nn, torch.nn.functional
    C, NH, L, V, maxT = cfg["C"], cfg["NH"], cfg["L"], cfg["V"], cfg["maxT"]

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(C, 4 * C)
            self.c_proj = nn.Linear(4 * C, C)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn, self.ln_2, self.mlp = nn.LayerNorm(C), Attn(), nn.LayerNorm(C), MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(V, C), wpe=nn.Embedding(maxT, C),
                h=nn.ModuleList([Block() for _ in range(L)]), ln_f=nn.LayerNorm(C)))
            self.lm_head = nn.Linear(C, V, bias=False)
            self.lm_head.weight = self.transformer.wte.weight  # tied, as llm.c

        def forward(self, idx, targets):
            T = idx.shape[1]
            x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T, dtype=torch.long))
            for blk in self.transformer.h:
                x = blk(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            return F.cross_entropy(logits.float().view(-1, V), targets.view(-1))

    return GPT(), Block


def read_llmc_checkpoint(np, path):
    """llm.c GPT-2 fp32 checkpoint (magic 20240326, version 3): header, then the tensors in order."""
    hdr = np.fromfile(path, dtype=np.int32, count=256)
    if hdr[0] != 20240326 or hdr[1] != 3:
        raise SystemExit(f"{path}: not an llm.c fp32 GPT-2 checkpoint (magic {hdr[0]}, version {hdr[1]})")
    maxT, V, L, NH, C, Vp = (int(x) for x in hdr[2:8])
    cfg = dict(maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp)
    shapes = [("wte", (Vp, C)), ("wpe", (maxT, C)), ("ln1w", (L, C)), ("ln1b", (L, C)),
              ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)), ("attprojb", (L, C)),
              ("ln2w", (L, C)), ("ln2b", (L, C)), ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)),
              ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)), ("lnfw", (C,)), ("lnfb", (C,))]
    data = np.fromfile(path, dtype=np.float32, offset=256 * 4)
    out, off = {}, 0
    for name, shp in shapes:
        n = int(np.prod(shp))
        out[name] = data[off:off + n].reshape(shp)
        off += n
    if off != data.size:
        raise SystemExit(f"{path}: {data.size} floats after the header, the shape says {off}")
    return cfg, out


def load_into(torch, model, cfg, w):
    t = lambda a: torch.from_numpy(a.copy())
    with torch.no_grad():
        tr = model.transformer
        tr.wte.weight.copy_(t(w["wte"][:cfg["V"]]))
        tr.wpe.weight.copy_(t(w["wpe"]))
        for i, b in enumerate(tr.h):
            for mod, key in ((b.ln_1.weight, "ln1w"), (b.ln_1.bias, "ln1b"), (b.attn.c_attn.weight, "qkvw"),
                             (b.attn.c_attn.bias, "qkvb"), (b.attn.c_proj.weight, "attprojw"),
                             (b.attn.c_proj.bias, "attprojb"), (b.ln_2.weight, "ln2w"), (b.ln_2.bias, "ln2b"),
                             (b.mlp.c_fc.weight, "fcw"), (b.mlp.c_fc.bias, "fcb"), (b.mlp.c_proj.weight, "fcprojw"),
                             (b.mlp.c_proj.bias, "fcprojb")):
                mod.copy_(t(w[key][i]))
        tr.ln_f.weight.copy_(t(w["lnfw"]))
        tr.ln_f.bias.copy_(t(w["lnfb"]))


def c_int(x):  # C's int arithmetic as sz-bench does it (two's complement wrap)
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def c_mod(a, b):  # C's % (truncating)
    r = abs(a) % b
    return -r if a < 0 else r


def synthetic_batch(B, T, V, rank):
    """sz-bench's batch of rank r: in[i] = (i*7919 + r*31) % V, tg[i] = (i*104729 + 1 + r) % V."""
    inp = [c_mod(c_int(i * 7919 + rank * 31), V) for i in range(B * T)]
    tgt = [c_mod(c_int(i * 104729 + 1 + rank), V) for i in range(B * T)]
    return inp, tgt


def file_batch(tokens, nd, B, T, step, rank):
    """apps/common/data.c: batch i = step mod nbatches; rank r reads rows r*B .. r*B+B-1."""
    nb = (len(tokens) - 1) // (nd * B * T)
    k = step % nb
    inp, tgt = [], []
    for b in range(B):
        s = (k * nd * B + rank * B + b) * T
        inp += tokens[s:s + T]
        tgt += tokens[s + 1:s + T + 1]
    return inp, tgt


def worker(a):
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    ncpu = os.cpu_count() or 1
    if a.pin:  # one core per rank, as the notes say (two processes on two cores fight otherwise)
        os.sched_setaffinity(0, {rank % ncpu})
    import numpy as np
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg, w = read_llmc_checkpoint(np, a.ckpt)
    model, Block = build_model(torch, cfg)
    load_into(torch, model, cfg, w)
    del w
    B, T, V = a.batch, a.seq, cfg["V"]
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", rank=rank, world_size=world)
        if a.dist == "ddp":
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model)
        else:
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
            from torch.distributed.fsdp.wrap import ModuleWrapPolicy
            model = FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=torch.device("cpu"),
                         auto_wrap_policy=ModuleWrapPolicy({Block}))
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=WD,
                                fused=True)
        fused = True
    except (RuntimeError, TypeError):
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=WD)
        fused = False
    fwd = torch.compile(model) if a.mode == "compile" else model
    tokens = None
    if a.tokens:
        tokens = np.fromfile(a.tokens, dtype=np.uint16, offset=256 * 4).astype(np.int64).tolist()
    print(json.dumps({"start": True, "rank": rank, "world": world, "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "fused_adamw": fused,
                      "affinity": sorted(os.sched_getaffinity(0))}), flush=True)
    for s in range(a.warmup + a.steps):
        inp, tgt = (file_batch(tokens, world, B, T, s, rank) if tokens is not None
                    else synthetic_batch(B, T, V, rank))
        x = torch.tensor(inp, dtype=torch.long).view(B, T)
        y = torch.tensor(tgt, dtype=torch.long).view(B, T)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = fwd(x, y)
        loss.backward()
        opt.step()
        lv = loss.item()
        ms = (time.perf_counter() - t0) * 1e3
        if world > 1:  # the mean over ranks, as sz-train/sz-bench report it; outside the timing
            lt = torch.tensor([lv], dtype=torch.float64)
            torch.distributed.all_reduce(lt)
            lv = lt.item() / world
        if rank == 0:
            print(json.dumps({"step": s + 1, "loss": lv, "ms": ms, "timed": s >= a.warmup}), flush=True)
    if world > 1:
        torch.distributed.destroy_process_group()


# ---- the driver -----------------------------------------------------------------------------------

def read_kb(path, keys):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                k = line.split(":")[0]
                if k in keys:
                    out[k] = int(line.split()[1])
    except OSError:
        pass
    return out


def children_of(pids):
    """All live descendants of pids (walks /proc once)."""
    par = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
                par[int(d)] = (int(st[st.rindex(")") + 2:].split()[1]), st[st.index("(") + 1:st.rindex(")")])
            except (OSError, ValueError):
                pass
    out, todo = {}, list(pids)
    while todo:
        p = todo.pop()
        for c, (pp, comm) in par.items():
            if pp == p and c not in out:
                out[c] = comm
                todo.append(c)
    return out


class MemSampler(threading.Thread):
    """Peak PSS and RSS (kB) of each process named `comm` among the descendants of pids (of pids
    themselves when comm is None), sampled
    every `period` seconds from /proc/PID/smaps_rollup (PSS divides a shared page among its mappers),
    from the moment it is armed (the end of the first step: sz-bench's yardsticks before it allocate
    buffers of their own; every later step reaches the steady peak again)."""

    def __init__(self, roots, comm, period=0.2):
        super().__init__(daemon=True)
        self.roots, self.comm, self.period = roots, comm, period
        self.peak, self.stop_ev, self.armed = {}, threading.Event(), threading.Event()

    def run(self):
        last_scan, procs = 0.0, {}
        while not self.stop_ev.is_set():
            now = time.time()
            if now - last_scan > 1.0:
                if self.comm:  # the named ones among them and their descendants (the ranks under mpirun)
                    procs = {p: c for p, c in children_of(self.roots).items() if c.startswith(self.comm)}
                    for p in self.roots:
                        try:
                            if open(f"/proc/{p}/comm").read().startswith(self.comm):
                                procs[p] = self.comm
                        except OSError:
                            pass
                else:  # the processes themselves (not torch.compile's worker pool)
                    procs = {p: "" for p in self.roots}
                last_scan = now
            for p in list(procs) if self.armed.is_set() else []:
                m = read_kb(f"/proc/{p}/smaps_rollup", ("Pss", "Rss"))
                if m:
                    pk = self.peak.setdefault(p, {"Pss": 0, "Rss": 0})
                    pk["Pss"], pk["Rss"] = max(pk["Pss"], m.get("Pss", 0)), max(pk["Rss"], m.get("Rss", 0))
            self.stop_ev.wait(self.period)

    def result(self):
        self.stop_ev.set()
        self.join()
        ranks = sorted(self.peak.values(), key=lambda v: -v["Pss"])
        return {"pss_mb_per_rank": [v["Pss"] / 1024 for v in ranks], "rss_mb_per_rank": [v["Rss"] / 1024 for v in ranks]}


def communicate_armed(procs, sampler, is_step, timeout):
    """Waits for procs, reading their stdout and stderr line by line; arms the sampler at the first
    line is_step accepts. Returns [(stdout, stderr)] per process, or None on timeout (procs killed)."""
    bufs = [([], []) for _ in procs]

    def pump(stream, buf):
        for line in stream:
            buf.append(line)
            if not sampler.armed.is_set() and is_step(line):
                sampler.armed.set()

    ts = []
    for p, (o, e) in zip(procs, bufs):
        for stream, buf in ((p.stdout, o), (p.stderr, e)):
            t = threading.Thread(target=pump, args=(stream, buf), daemon=True)
            t.start()
            ts.append(t)
    deadline = time.time() + timeout
    try:
        for p in procs:
            p.wait(timeout=max(1, deadline - time.time()))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
        return None
    for t in ts:
        t.join()
    return [("".join(o), "".join(e)) for o, e in bufs]


def run_logged(cmd, env=None, log=None):
    if log:
        print("  $ " + " ".join(shlex.quote(c) for c in cmd), file=log, flush=True)
    return subprocess.run(cmd, env=env, capture_output=True, text=True)


def mpirun_prefix(np_):
    f = ["mpirun", "--oversubscribe"]
    if os.geteuid() == 0:
        f.append("--allow-run-as-root")
    return f + ["-np", str(np_)]


def sz_env():
    e = dict(os.environ)
    e.setdefault("STARPU_SILENT", "1")
    e.setdefault("STARPU_FXT_TRACE", "0")
    return e


def write_tokens(path, tokens):
    import numpy as np
    hdr = np.zeros(256, dtype=np.int32)
    hdr[0], hdr[1], hdr[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(hdr.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint16).tobytes())


def worker_cmd(a, mode, dtype, threads, ckpt, steps, warmup, tokens=None, dist=None, pin=False):
    c = [sys.executable, os.path.abspath(__file__), "--worker", "--mode", mode, "--dtype", dtype,
         "--threads", str(threads), "--ckpt", ckpt, "--batch", str(a.batch), "--seq", str(a.seq),
         "--steps", str(steps), "--warmup", str(warmup)]
    if tokens:
        c += ["--tokens", tokens]
    if dist:
        c += ["--dist", dist]
    if pin:
        c += ["--pin"]
    return c


def run_torch(a, mode, dtype, ckpt, steps, warmup, tokens=None, nranks=1, dist=None, log=None):
    """One PyTorch run; 1 process with a.threads threads, or nranks processes of 1 thread each,
    each pinned to its own core. Returns (step records, memory, info, error)."""
    threads = a.threads if nranks == 1 else 1
    cmd = worker_cmd(a, mode, dtype, threads, ckpt, steps, warmup, tokens, dist, pin=nranks > 1)
    if log:
        print(f"  $ {'(x%d ranks) ' % nranks if nranks > 1 else ''}" + " ".join(shlex.quote(c) for c in cmd),
              file=log, flush=True)
    import socket
    with socket.socket() as so:  # a free port for this run's rendezvous
        so.bind(("127.0.0.1", 0))
        port = str(so.getsockname()[1])
    procs = []
    for r in range(nranks):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), RANK=str(r),
                   WORLD_SIZE=str(nranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=port, LOCAL_RANK=str(r))
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    sampler = MemSampler([p.pid for p in procs], None)
    sampler.start()
    outs = communicate_armed(procs, sampler, lambda l: l.startswith('{"step"'), a.timeout)
    if outs is None:
        sampler.result()
        return None, None, None, f"timed out after {a.timeout} s"
    mem = sampler.result()
    bad = [(p.returncode, e) for p, (o, e) in zip(procs, outs) if p.returncode != 0]
    if bad:
        tail = [l for l in bad[0][1].strip().splitlines() if l.strip()]
        why = tail[-1] if tail else f"exit status {bad[0][0]}"
        return None, mem, None, why
    recs = [json.loads(l) for l in outs[0][0].splitlines() if l.startswith("{")]
    info = next((r for r in recs if r.get("start")), {})
    return [r for r in recs if "step" in r], mem, info, None


STEP_RE = re.compile(r"^step (\d+): ([0-9.]+) ms, loss ([-0-9.naninf]+)")


def run_sz_bench(a, precision, nranks, stage, steps, warmup, log=None):
    cmd = [os.path.join(a.build_dir, "sz-bench"), "--model", a.model, "--batch", str(a.batch), "--seq",
           str(a.seq), "--steps", str(steps), "--warmup", str(warmup), "--precision", precision, "--vocab", str(a.vocab)]
    if nranks > 1:
        cmd = mpirun_prefix(nranks) + cmd + ["--zero-stage", str(stage)]
    if log:
        print("  $ " + " ".join(shlex.quote(c) for c in cmd), file=log, flush=True)
    env = sz_env()
    if nranks == 1 and a.threads != (os.cpu_count() or 1):
        env["STARPU_NCPU"] = str(a.threads)  # sz-bench takes every core unless told
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = MemSampler([p.pid], "sz-bench")
    sampler.start()
    outs = communicate_armed([p], sampler, lambda l: STEP_RE.match(l.strip()) is not None, a.timeout)
    if outs is None:
        sampler.result()
        return None, None, None, f"timed out after {a.timeout} s"
    out, err = outs[0]
    mem = sampler.result()
    if p.returncode != 0:
        tail = [l for l in err.strip().splitlines() if l.strip()]
        return None, mem, None, tail[-1] if tail else f"exit status {p.returncode}"
    recs = []
    for line in err.splitlines():
        m = STEP_RE.match(line.strip())
        if m:
            s = int(m.group(1))
            recs.append({"step": s, "ms": float(m.group(2)), "loss": float(m.group(3)), "timed": s > warmup})
    try:
        info = json.loads(out[out.index("{"):])
    except ValueError:
        info = {}
    return recs, mem, info, None


def sz_train(a, args, nranks=1, log=None):
    cmd = [os.path.join(a.build_dir, "sz-train")] + args
    if nranks > 1:
        cmd = mpirun_prefix(nranks) + cmd
    r = run_logged(cmd, env=sz_env(), log=log)
    if r.returncode != 0:
        raise SystemExit(f"peer-bench: sz-train failed (exit {r.returncode}):\n{r.stderr.strip()}\n{r.stdout.strip()}")
    return [json.loads(l) for l in r.stdout.splitlines() if l.startswith('{"step"')]


def prepare(a, log):
    """The token file of the loss check and the random-init llm.c checkpoint (sz-train's own)."""
    import random
    os.makedirs(a.work_dir, exist_ok=True)
    V = a.vocab
    tok = os.path.join(a.work_dir, f"tokens-v{V}.bin")
    n = a.check_steps * a.batch * a.seq + 1
    rng = random.Random(1234)
    write_tokens(tok, [rng.randrange(V) for _ in range(n)])
    ckpt = os.path.join(a.work_dir, f"init-{a.model.replace(',', '_')}-v{V}.bin")
    if not os.path.exists(ckpt) or a.fresh:
        print(f"peer-bench: writing a random-init {a.model} checkpoint (sz-train --seed 1) to {ckpt}", flush=True)
        sz_train(a, ["--config", a.model, "--vocab", str(V), "--seed", "1", "--train", tok, "--batch", str(a.batch),
                     "--seq", str(a.seq), "--steps", "0", "--save", ckpt], log=log)
    return tok, ckpt


def loss_check(a, tok, ckpt, log):
    """sz-train and PyTorch eager fp32, same checkpoint, same batches, same AdamW: first losses equal."""
    print(f"peer-bench: loss check, {a.check_steps} fp32 steps of sz-train and PyTorch eager on {ckpt}", flush=True)
    ours = sz_train(a, ["--init", ckpt, "--train", tok, "--batch", str(a.batch), "--seq", str(a.seq),
                        "--steps", str(a.check_steps), "--json"], log=log)
    theirs, _, _, err = run_torch(a, "eager", "fp32", ckpt, a.check_steps, 0, tokens=tok, log=log)
    if err:
        raise SystemExit(f"peer-bench: the PyTorch run of the loss check failed: {err}")
    rows, worst = [], 0.0
    for o, t in zip(ours, theirs):
        d = abs(o["loss"] - t["loss"])
        worst = max(worst, d)
        rows.append({"step": o["step"], "starzero": o["loss"], "pytorch": t["loss"], "diff": d})
        print(f"  step {o['step']}: sz-train {o['loss']:.6f}  PyTorch {t['loss']:.6f}  |diff| {d:.2e}", flush=True)
    ok = len(ours) == a.check_steps and len(theirs) == a.check_steps and worst <= a.tol
    return {"steps": rows, "max_diff": worst, "tol": a.tol, "ok": ok}


def summarize(name, system, recs, mem, info, err, nranks, a, extra=None):
    row = {"name": name, "system": system, "ranks": nranks, "error": err}
    if err is None:
        timed = [r["ms"] for r in recs if r["timed"]]
        med = statistics.median(timed) if timed else float("nan")
        row.update({"step_ms": timed, "median_ms": med, "losses": [r["loss"] for r in recs],
                    "first_step_ms": recs[0]["ms"] if recs else None,
                    "tokens_per_s": nranks * a.batch * a.seq / (med / 1e3) if timed else 0})
    if mem:
        row.update(mem)
    if extra:
        row.update(extra)
    return row


def cpu_model():
    flags, name = "", "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and name == "unknown":
                    name = line.split(":", 1)[1].strip()
                if line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1]
    except OSError:
        pass
    fl = set(flags.split())
    return name, "amx_bf16" in fl and "amx_tile" in fl, "avx512_bf16" in fl


def markdown(res):
    a = res["settings"]
    lines = []
    lc = res["loss_check"]
    lines.append(f"Loss check first (`--check-only` runs just this): sz-train and PyTorch eager fp32 on the same "
                 f"checkpoint and token file, {len(lc['steps'])} AdamW steps: losses " +
                 ", ".join(f"{s['starzero']:.6f} / {s['pytorch']:.6f}" for s in lc["steps"]) +
                 f" (sz-train / PyTorch), largest difference {lc['max_diff']:.1e} "
                 f"({'within' if lc['ok'] else 'OUTSIDE'} {lc['tol']:g}).")
    lines.append("")
    lines.append("| system | ranks | ms per timed step (rounds split by ·) | median ms | tokens/s | first step ms | "
                 "peak PSS MB per rank (RSS) | Δ loss vs StarZeRO: step 1 / all steps | load average |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for r in res["rows"]:
        if r["error"]:
            lines.append(f"| {r['name']} | {r['ranks']} | not run: {r['error'].replace('|', '/')[:160]} | | | | | | |")
            continue
        pss = " / ".join(f"{x:.0f}" for x in r.get("pss_mb_per_rank", []))
        rss = " / ".join(f"{x:.0f}" for x in r.get("rss_mb_per_rank", []))
        d = r.get("loss_diff")
        ds = "—" if d is None else f"{r['loss_diff_step1']:.1e} / {d:.1e}"
        steps = " · ".join(" ".join(f"{x:.0f}" for x in rd) for rd in r["step_ms_per_round"])
        loads = " · ".join(f"{x:.1f}" for x in r["load_per_round"])
        if r.get("round_error"):
            steps += f" (failed: {r['round_error'].replace('|', '/')[:120]})"
        lines.append(f"| {r['name']} | {r['ranks']} | {steps} | {r['median_ms']:.0f} | {r['tokens_per_s']:.0f} | "
                     f"{r['first_step_ms']:.0f} | {pss} ({rss}) | {ds} | {loads} |")
    return "\n".join(lines)


def write_doc(res, table, doc):
    a = res["settings"]
    m = res["machine"]
    yard = res.get("sz_yardsticks", {})
    ys = ""
    if yard:
        ys = (f" In sz-bench's first run: FMA peak {yard.get('fma_peak_gflops', 0):.0f} GFLOP/s, oneDNN f32 2048³ "
              f"{yard.get('f32_matmul_gflops', 0):.0f}, bf16 {yard.get('bf16_matmul_gflops', 0):.0f} "
              f"(`{yard.get('bf16_matmul_impl', '?')}`), `amx` {str(yard.get('amx', '?')).lower()}.")
    if res.get("sz_bf16_path"):
        ys += f" StarZeRO's bf16 rows ran its `{res['sz_bf16_path']}` bf16 path (`bf16_path`)."
    sec = f"""{BEGIN}
## StarZeRO against PyTorch on CPU (`scripts/peer-bench.sh`)

`{res['command']}` — {res['date']}, {m['cpu']} ({m['cpus']} CPUs; AMX: {'yes' if m['amx'] else 'no'}, AVX512_BF16:
{'yes' if m['avx512_bf16'] else 'no'}), PyTorch {res.get('torch', '?')}, load average at the start {m['loadavg']}.
GPT-2 `{a['model']}`, batch {a['batch']} × seq {a['seq']} per rank, AdamW (lr 3e-4, betas 0.9/0.999, eps 1e-8,
no weight decay, no clipping), the same llm.c checkpoint (random init, `sz-train --seed 1`) and sz-bench's
synthetic batch in every run; {a['warmup']} warm-up and {a['steps']} timed steps per run, {a['rounds']} round(s) of
every system in turn (StarZeRO's run next to each PyTorch one). One process: {a['threads']} threads (StarPU
workers; `torch.set_num_threads`). Two ranks: one thread per process, each on its own core (Open MPI's
binding for sz-bench; `sched_setaffinity` for PyTorch), PyTorch over gloo (FSDP: FULL_SHARD, one unit per
block, `device_id=cpu`). PyTorch's AdamW is `fused=True`; torch.compile compiles the model (forward and
backward), not the optimizer; bf16 is `torch.autocast('cpu', bfloat16)` on fp32 parameters, StarZeRO's is
`--precision bf16` (bf16 parameters and gradients, fp32 master). Memory: the peak of PSS per process
(`/proc/PID/smaps_rollup`, sampled every 0.2 s from the end of the first step on; RSS in parentheses, which counts a shared page in every
process that maps it). First step: the slowest first (warm-up) step over the rounds; torch.compile
compiles in it. Δ loss: the difference of the run's losses from the StarZeRO run of the same precision and
ranks (round 1), at step 1 (the same init and batch: the same forward) and the largest over all steps
(sz-bench prints 4 decimals; every step repeats one batch at lr 3e-4, where the loss swings by ±1 from
step to step and rounding differences grow, so later fp32 steps may differ by a few 1e-4; bf16 rows are
informational: the two bf16 schemes round differently). Load average: the 1-minute load when each
round's run started.{ys}
**The machine is shared** (2 cores, other jobs building and testing during the run): single steps vary by
tens of percent; compare medians of neighbouring rows, not single figures.

{table}
{END}"""
    text = open(doc).read() if os.path.exists(doc) else ""
    if BEGIN.split(" (")[0] in text and END in text:
        i = text.index(BEGIN.split(" (")[0])
        j = text.index(END) + len(END)
        text = text[:i] + sec + text[j:]
    else:
        text = text.rstrip("\n") + "\n\n" + sec + "\n"
    with open(doc, "w") as f:
        f.write(text)


def driver(a):
    os.makedirs(a.work_dir, exist_ok=True)
    logpath = os.path.join(a.work_dir, "commands.log")
    log = open(logpath, "a")
    print(f"# {datetime.datetime.now().isoformat(timespec='seconds')}", file=log, flush=True)
    tok, ckpt = prepare(a, log)
    lc = loss_check(a, tok, ckpt, log)
    if not lc["ok"]:
        print(f"peer-bench: the losses differ by {lc['max_diff']:.2e} > {a.tol:g}: PyTorch and StarZeRO do not "
              "compute the same thing here; stopping (nothing timed, nothing written)", file=sys.stderr)
        return 1
    print(f"peer-bench: losses agree (largest difference {lc['max_diff']:.1e} <= {a.tol:g})", flush=True)
    if a.check_only:
        return 0
    name, amx, bf16 = cpu_model()
    res = {"command": a.command_line, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "machine": {"cpu": name, "amx": amx, "avx512_bf16": bf16, "cpus": os.cpu_count(),
                       "loadavg": open("/proc/loadavg").read().split()[0]},
           "settings": {k: getattr(a, k) for k in ("model", "batch", "seq", "steps", "warmup", "threads", "rounds")},
           "loss_check": lc, "rows": []}
    plan = []  # (key, label, kind, args)
    want = set(a.systems.split(","))
    for prec in ("fp32", "bf16"):
        if f"sz-{prec}" in want:
            plan.append((f"sz-{prec}", f"StarZeRO sz-bench {prec}", "sz", (prec, 1, 0)))
        for mode in ("eager", "compile"):
            if f"torch-{mode}-{prec}" in want:
                plan.append((f"torch-{mode}-{prec}", f"PyTorch {mode} {prec}" + (" autocast" if prec == "bf16" else ""),
                             "torch", (mode, prec, 1, None)))
    for stage, dist in ((0, "ddp"), (3, "fsdp")):
        if f"sz-np2-s{stage}" in want:
            plan.append((f"sz-np2-s{stage}", f"StarZeRO sz-bench fp32, ZeRO stage {stage}", "sz", ("fp32", 2, stage)))
        if f"torch-{dist}" in want:
            plan.append((f"torch-{dist}", f"PyTorch {dist.upper()} fp32" + (" FULL_SHARD" if dist == "fsdp" else ""),
                         "torch", ("eager", "fp32", 2, dist)))
    acc = {}
    for rnd in range(a.rounds):
        for key, label, kind, args in plan:
            load = float(open("/proc/loadavg").read().split()[0])
            print(f"peer-bench: round {rnd + 1}/{a.rounds}: {label} (load average {load:.1f})", flush=True)
            if kind == "sz":
                recs, mem, info, err = run_sz_bench(a, args[0], args[1], args[2], a.steps, a.warmup, log)
                if info and args[0] == "bf16" and "bf16_path" in info:
                    res["sz_bf16_path"] = info["bf16_path"]
                if info and "sz_yardsticks" not in res:
                    res["sz_yardsticks"] = {k: info.get(k) for k in ("fma_peak_gflops", "f32_matmul_gflops",
                                                                      "bf16_matmul_gflops", "bf16_matmul_impl", "amx",
                                                                      "sgemm_gflops", "stream_gbps")}
            else:
                mode, prec, nr, dist = args
                recs, mem, info, err = run_torch(a, mode, prec, ckpt, a.steps, a.warmup, nranks=nr, dist=dist, log=log)
                if info:
                    res["torch"] = info.get("torch")
            e = acc.setdefault(key, {"label": label, "kind": kind, "ranks": args[1] if kind == "sz" else args[2],
                                     "recs": [], "mem": {"pss_mb_per_rank": [], "rss_mb_per_rank": []}, "err": None,
                                     "first": [], "rounds": [], "loads": [], "precision": args[0] if kind == "sz" else args[1]})
            if err:
                e["err"] = f"round {rnd + 1}: {err}"
                print(f"  not run: {err}", flush=True)
                continue
            timed = [r["ms"] for r in recs if r["timed"]]
            losses = " ".join(f"{r['loss']:.4f}" for r in recs)
            print(f"  ms per timed step: {' '.join(f'{x:.0f}' for x in timed)}; losses {losses}", flush=True)
            e["recs"] += recs
            e["rounds"].append(timed)
            e["loads"].append(load)
            e["first"].append(recs[0]["ms"] if recs else 0)
            for k in ("pss_mb_per_rank", "rss_mb_per_rank"):
                old = e["mem"][k]
                new = (mem or {}).get(k, [])
                e["mem"][k] = [max(x, y) for x, y in zip(old, new)] if old else new
    ref = {}
    for key, e in acc.items():
        if e["kind"] == "sz" and not e["err"]:
            ref[(e["precision"], e["ranks"])] = [r["loss"] for r in e["recs"]][:a.warmup + a.steps]  # round 1
    for key, label, kind, args in plan:
        e = acc[key]
        if e["err"] and not e["recs"]:
            res["rows"].append(summarize(label, key, None, None, None, e["err"], e["ranks"], a))
            continue
        row = summarize(label, key, e["recs"], e["mem"], None, None, e["ranks"], a,
                        {"first_step_ms": max(e["first"]), "step_ms_per_round": e["rounds"],
                         "load_per_round": e["loads"]})
        r0 = ref.get((e["precision"], e["ranks"]))
        mine = [r["loss"] for r in e["recs"]][:a.warmup + a.steps]
        if r0 and kind == "torch":
            row["loss_diff_step1"] = abs(r0[0] - mine[0])
            row["loss_diff"] = max(abs(x - y) for x, y in zip(r0, mine))
        if e["err"]:
            row["round_error"] = e["err"]
        res["rows"].append(row)
    table = markdown(res)
    print("\n" + table + "\n")
    with open(a.json_out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"peer-bench: wrote {a.json_out}")
    if a.doc:
        write_doc(res, table, a.doc)
        print(f"peer-bench: replaced the peer-bench section of {a.doc}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--mode", default="eager", choices=["eager", "compile"], help=argparse.SUPPRESS)
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"], help=argparse.SUPPRESS)
    p.add_argument("--ckpt", help=argparse.SUPPRESS)
    p.add_argument("--tokens", help=argparse.SUPPRESS)
    p.add_argument("--dist", choices=["ddp", "fsdp"], help=argparse.SUPPRESS)
    p.add_argument("--pin", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", default="d12", help="GPT-2 shape for sz-train --config / sz-bench --model (d12)")
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--batch", type=int, default=4, help="rows per rank (4)")
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--steps", type=int, default=5, help="timed steps per run (5)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (2; torch.compile compiles in the first)")
    p.add_argument("--rounds", type=int, default=1, help="run every system this many times, in turn (1)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads of a one-process run (all CPUs)")
    p.add_argument("--systems", default="sz-fp32,torch-eager-fp32,torch-compile-fp32,sz-bf16,torch-eager-bf16,"
                   "torch-compile-bf16,sz-np2-s0,torch-ddp,sz-np2-s3,torch-fsdp",
                   help="comma-separated subset of the default list, which is also the order")
    p.add_argument("--check-only", action="store_true", help="only the loss check")
    p.add_argument("--check-steps", type=int, default=3)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--fresh", action="store_true", help="rewrite the checkpoint even if it exists")
    p.add_argument("--timeout", type=int, default=900, help="seconds per run before it is killed")
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--work-dir", default=None, help="checkpoint, tokens, logs (BUILD/peer-bench)")
    p.add_argument("--json-out", default=None, help="BUILD/peer-bench/peer-bench.json")
    p.add_argument("--doc", default=None, help="markdown file whose peer-bench section is replaced "
                   "(docs/BENCHMARKS.md; --no-doc: none)")
    p.add_argument("--no-doc", action="store_true")
    p.add_argument("--command-line", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        worker(a)
        return 0
    a.work_dir = a.work_dir or os.path.join(a.build_dir, "peer-bench")
    a.json_out = a.json_out or os.path.join(a.work_dir, "peer-bench.json")
    a.doc = None if a.no_doc else (a.doc or os.path.join(ROOT, "docs", "BENCHMARKS.md"))
    a.command_line = a.command_line or "scripts/peer_bench.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    return driver(a)


if __name__ == "__main__":
    sys.exit(main())
