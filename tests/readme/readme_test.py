#!/usr/bin/env python3
"""Runs every command a Markdown file shows with its output, and compares (cram/trycmd style).

A ```text block whose first line starts with "$ ffn-trace" is a session: each "$ " line is a
command, run by bash in one scratch folder per file holding a link to data/, with the built
ffn-trace first on PATH, in the order the file shows them; the lines after it, up to the next
"$ ", are what it prints (stdout and stderr together, as a terminal shows them). In the expected
lines,
  ...      (a line of its own, indented or not) stands for any number of lines left out;
  [..]     stands for any text within a line.

  readme_test.py FILE... BIN_DIR DATA_DIR           compare; print a diff for each difference
  readme_test.py FILE... BIN_DIR DATA_DIR --update  rewrite each file's outputs with what the
                                                    program prints now, keeping every "..." and
                                                    the lines around it; read `git diff` after
Each FILE must show at least one session (README.md, docs/guide.md, docs/commands/run.md, ...).
"""
import difflib
import os
import re
import subprocess
import sys
import tempfile


def sessions(lines):
    """(first line index, last line index) of every session block's body."""
    found, i = [], 0
    while i < len(lines):
        if lines[i].rstrip() == "```text" and i + 1 < len(lines) and lines[i + 1].startswith("$ ffn-trace"):
            j = i + 1
            while lines[j].rstrip() != "```":
                j += 1
            found.append((i + 1, j))
            i = j
        i += 1
    return found


def commands(body):
    """[(command, expected lines)] of one block."""
    out = []
    for line in body:
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            out[-1][1].append(line)
    return out


def line_matches(expected, actual):
    pattern = "".join(".*" if part == "[..]" else re.escape(part) for part in re.split(r"(\[\.\.\])", expected))
    return re.fullmatch(pattern, actual) is not None


def is_gap(line):
    return line.strip() == "..."


def matches(expected, actual):
    """Whether actual fits expected, "..." taking any number of lines."""
    if not expected:
        return not actual
    if is_gap(expected[0]):
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and line_matches(expected[0], actual[0]) and matches(expected[1:], actual[1:])


def kept(expected_line, actual_line):
    """The expected line where it still fits (it may hold [..]), else the printed one."""
    return expected_line if line_matches(expected_line, actual_line) else actual_line


def segments(expected):
    """The runs of lines between the "..." lines: one more run than there are gaps."""
    runs = [[]]
    for line in expected:
        if is_gap(line):
            runs.append([])
        else:
            runs[-1].append(line)
    return runs


def anchor(run_lines, actual, start, end):
    """Where in actual[start:end] the run fits best: the most of its lines that still match,
    the earliest on a tie; start when none does."""
    best, best_at = 0, start
    for at in range(start, end - len(run_lines) + 1):
        score = sum(line_matches(e, a) for e, a in zip(run_lines, actual[at:]))
        if score > best:
            best, best_at = score, at
    return best_at


def refreshed(expected, actual):
    """The expected lines rewritten from actual, keeping each "..." with as many lines around it:
    the run before the first "..." is the output's start, the run after the last its end, and each
    run between is put where most of its lines still match."""
    if matches(expected, actual):
        return expected
    runs = segments(expected)
    if len(runs) == 1:  # no "...": each line as printed, a line with [..] that still fits as written
        return [kept(e, a) for e, a in zip(expected + [""] * len(actual), actual)]
    head, *middle, tail = runs
    tail_at = max(len(head), len(actual) - len(tail))
    out, at = [kept(e, a) for e, a in zip(head, actual)], len(head)
    for run_lines in middle:
        at = anchor(run_lines, actual, at, tail_at)
        out += ["..."] + [kept(e, a) for e, a in zip(run_lines, actual[at:tail_at])]
        at += len(run_lines)
    out += ["..."] + [kept(e, a) for e, a in zip(tail, actual[tail_at:])]
    gap_lines = iter(line for line in expected if is_gap(line))  # each "..." keeps its indentation
    out = [next(gap_lines) if line == "..." else line for line in out]
    return out if matches(out, actual) else actual  # runs that no longer fit: the whole output


def run(command, folder, bin_dir):
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""), COLUMNS="80", LC_ALL="C.UTF-8")
    env.pop("NO_COLOR", None)
    # A hang is caught after a minute; the sanitizer tree allows more (its instrumented transcoder
    # training takes longer than that).
    timeout = float(os.environ.get("FFN_TRACE_DOC_TIMEOUT", "60"))
    done = subprocess.run(["bash", "-c", command], cwd=folder, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=timeout)
    return done.stdout.decode("utf-8", "replace").splitlines()


def check_file(path, bin_dir, data_dir, update):
    """(commands run, commands that differ) of one file; with update, the file rewritten."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    failures, count, bodies = 0, 0, []
    with tempfile.TemporaryDirectory() as folder:
        os.symlink(data_dir, os.path.join(folder, "data"))
        for start, end in sessions(lines):  # in order: a later session may read what an earlier wrote
            new_body = []
            for command, expected in commands(lines[start:end]):
                count += 1
                actual = run(command, folder, bin_dir)
                now = refreshed(expected, actual)
                new_body += ["$ " + command] + now
                if not matches(expected, actual):  # the diff is of the lines shown, refreshed
                    failures += 1
                    print(f"{path}:{start + 1}: $ {command}")
                    sys.stdout.writelines(difflib.unified_diff([l + "\n" for l in expected], [l + "\n" for l in now],
                                                               f"{path} (expected)", "ffn-trace (printed)"))
            bodies.append((start, end, new_body))
    if update and count:
        for start, end, new_body in reversed(bodies):
            lines[start:end] = new_body
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
    return count, failures


def main():
    update = "--update" in sys.argv[1:]
    args = [a for a in sys.argv[1:] if a != "--update"]
    if len(args) < 3:
        print(__doc__)
        return 2
    *files, bin_dir, data_dir = args
    failures, empty = 0, []
    for path in files:
        count, differ = check_file(path, bin_dir, data_dir, update)
        failures += differ
        if count == 0:
            empty.append(path)
        elif update:
            print(f"{path}: {count} commands run; rewritten with their output: read `git diff {path}`")
        else:
            print(f"{path}: {count} commands run, {differ} differ")
    for path in empty:
        print(f"no session blocks found in {path}: nothing was tested")
    if failures and not update:
        print("refresh: scripts/update-readme.sh, then read the diff")
    return 1 if empty or (failures and not update) else 0

if __name__ == "__main__":
    sys.exit(main())
