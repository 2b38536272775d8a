#!/usr/bin/python3
"""The table of a PyTorch comparison (scripts/bench_locate.sh, bench_units.sh, bench_grad.sh).

    bench_table.py KIND FFN_TIME TORCH_TIME TORCH_OUT CONFIG CASE

FFN_TIME and TORCH_TIME are /usr/bin/time -v reports of the two processes; TORCH_OUT the
reference's JSON line (import_seconds, setup_seconds, work_seconds, max_difference); CONFIG the
checkpoint's config.json; CASE what was run, in words. Prints a Markdown table of both routes'
wall and CPU seconds and peak RSS, the ratios, and whether the two agree (to 1e-9).
"""
import json
import re
import sys


def report(path):
    text = open(path).read()
    field = lambda name: re.search(re.escape(name) + r":\s*(\S+)", text).group(1)
    clock = [float(p) for p in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")]
    wall = sum(v * 60 ** i for i, v in enumerate(reversed(clock)))
    cpu = float(field("User time (seconds)")) + float(field("System time (seconds)"))
    return wall, cpu, int(field("Maximum resident set size (kbytes)")) / 1024


kind, ft_time, torch_time, torch_out, config, case = sys.argv[1:7]
fw, fc, fm = report(ft_time)
tw, tc, tm = report(torch_time)
t = json.load(open(torch_out))
c = json.load(open(config))
work = t["work_seconds"]
print(f"GPT-2 of {c['n_layer']} layers of {c['n_embd']} (F32, a tied {c['vocab_size']} × {c['n_embd']} head), {case}:")
print()
print("| route | wall (s) | CPU (s) | peak RSS (MB) | ffn-trace ÷ this (wall, CPU, RSS) |")
print("| --- | ---: | ---: | ---: | --- |")
print(f"| ffn-trace {kind} | {fw:.2f} | {fc:.2f} | {fm:,.0f} | |")
print(f"| PyTorch float64, the process | {tw:.2f} | {tc:.2f} | {tm:,.0f} | {fw / tw:.2f}×, {fc / tc:.2f}×, {fm / tm:.2f}× |")
print(f"| PyTorch float64, the work alone | {work:.2f} | | | {fw / work:.2f}× |")
print()
print(f"PyTorch's import took {t['import_seconds']:.2f} s and reading the weights {t['setup_seconds']:.2f} s, both left out of"
      f" \"the work alone\" (ffn-trace's process includes its own reading).", end=" ")
if "mse" in t:  # a training run from other random weights: the last epochs' MSE side by side, not equal
    print(f"The last epoch's MSE: PyTorch {t['mse']:.4g}, ffn-trace {t['ft_mse']:.4g} (each from its own random start).")
else:
    print(f"Largest difference between the two routes: {t['max_difference']:.2g}"
          f" ({'agree' if t['max_difference'] < 1e-9 else 'DISAGREE'} to 1e-9).")
