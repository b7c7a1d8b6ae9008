#!/usr/bin/env python3
"""scripts/sched_rank.py — ranks scripts/gpu-check.sh's scheduler rows (issue 15, item 7): the
`zero` policy against StarPU's dmdas, prio and lws on the same GPU run, by three criteria:

  step         the fastest step (step_ms; the lowest wins, a tie counts for zero)
  device_peak  the lowest device peak: device_measured_peak_bytes (StarPU's allocations on the
               GPU at their most) where every ranked row has it, else device_peak_bytes (the
               engine's count)
  overlap      overlap >= 0.8 where communication is shorter than compute (zero's row:
               comm_task_s < compute_task_s; only the zero policy measures overlap); null where
               communication is not shorter, so the criterion does not apply

Input: a file of JSON lines ("#" lines are comments), one per row, as gpu-check.sh builds them ("part", "result",
"policy", "step_ms", ...). Only rows with "result": "pass" (the run succeeded on the GPU) are
ranked. Output, one JSON line each: every row again with "zero_wins" added (the zero row: whether
zero beats every ranked policy on step and device_peak, and the overlap verdict; another policy's
row: whether zero beats that one on step and device_peak; null on a row not ranked), then a
summary {"part": SUMMARY, "result": "pass" when zero ran and wins every criterion that applies,
else "fail", "fastest", "lowest_device_peak", ...}. The ranking is a target that is measured, not
a correctness check: gpu-check.sh does not count it toward its total.

Usage: sched_rank.py ROWS.jsonl [--prefix P] [--summary PART] [--canned]
  --prefix P      prepend P to every row's "part" (the dry run's canned rows: "canned_")
  --summary PART  the summary's part name (default sched_ranking)
  --canned        mark the summary "canned": true (rows made up to test this ranking)
"""
import json
import sys


def num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def rank(rows):
    """(rows with "zero_wins", summary dict without part/result/canned)."""
    ranked = [r for r in rows if r.get("result") == "pass" and num(r.get("step_ms")) is not None]
    measured = all(num(r.get("device_measured_peak_bytes")) is not None and r["device_measured_peak_bytes"] >= 0
                   for r in ranked)
    peak_key = "device_measured_peak_bytes" if measured else "device_peak_bytes"
    ranked = [r for r in ranked if num(r.get(peak_key)) is not None]
    zero = next((r for r in ranked if r.get("policy") == "zero"), None)
    others = [r for r in ranked if r is not zero]
    overlap = None
    if zero is not None:
        comm, comp, ov = num(zero.get("comm_task_s")), num(zero.get("compute_task_s")), num(zero.get("overlap"))
        if comm is not None and comp is not None and comm < comp:
            overlap = ov is not None and ov >= 0.8
    ids = {id(r) for r in ranked}
    out = []
    for r0 in rows:
        r = dict(r0)
        if zero is None or id(r0) not in ids:
            r["zero_wins"] = None
        elif r0 is zero:
            r["zero_wins"] = {"step": all(zero["step_ms"] <= o["step_ms"] for o in others),
                              "device_peak": all(zero[peak_key] <= o[peak_key] for o in others),
                              "overlap": overlap}
        else:
            r["zero_wins"] = {"step": zero["step_ms"] <= r0["step_ms"], "device_peak": zero[peak_key] <= r0[peak_key]}
        out.append(r)
    summary = {"ranked": [r.get("policy") for r in ranked], "peak_from": peak_key}
    if ranked:
        summary["fastest"] = min(ranked, key=lambda r: (r["step_ms"], r.get("policy") != "zero"))["policy"]
        summary["lowest_device_peak"] = min(ranked, key=lambda r: (r[peak_key], r.get("policy") != "zero"))["policy"]
    if zero is None:
        summary["reason"] = "the zero row did not run on the GPU: nothing to rank"
        summary["zero_wins_all"] = False
    else:
        zw = out[[id(r) for r in rows].index(id(zero))]["zero_wins"]
        summary["zero_overlap"] = num(zero.get("overlap"))
        summary["overlap_applies"] = overlap is not None
        summary["zero_wins_all"] = bool(others) and zw["step"] and zw["device_peak"] and overlap is not False
        if not others:
            summary["reason"] = "no other policy's row ran on the GPU: nothing to rank against"
    return out, summary


def main(argv):
    args = argv[1:]
    if not args or args[0].startswith("-"):
        sys.stderr.write(__doc__)
        return 2
    path, prefix, part, canned = args[0], "", "sched_ranking", False
    i = 1
    while i < len(args):
        if args[i] == "--prefix" and i + 1 < len(args):
            prefix, i = args[i + 1], i + 2
        elif args[i] == "--summary" and i + 1 < len(args):
            part, i = args[i + 1], i + 2
        elif args[i] == "--canned":
            canned, i = True, i + 1
        else:
            sys.stderr.write("sched_rank.py: unknown argument %s\n" % args[i])
            return 2
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                rows.append(json.loads(line))
            except ValueError as e:
                sys.stderr.write("sched_rank.py: %s line %d is not JSON (%s)\n" % (path, n, e))
                return 2
    out, summary = rank(rows)
    for r in out:
        r["part"] = prefix + str(r.get("part", ""))
        print(json.dumps(r))
    head = {"part": part, "result": "pass" if summary["zero_wins_all"] else "fail"}
    if canned:
        head["canned"] = True
    head["counts_toward_total"] = False
    head.update(summary)
    print(json.dumps(head))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
