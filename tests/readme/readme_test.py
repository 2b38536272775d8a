#!/usr/bin/env python3
"""Runs every command README.md shows with its output, and compares (cram/trycmd style).

A ```text block whose first line starts with "$ ffn-trace" is a session: each "$ " line is a
command, run by bash in one scratch folder holding a link to data/, with the built ffn-trace
first on PATH; the lines after it, up to the next "$ ", are what it prints (stdout and stderr
together, as a terminal shows them). In the expected lines,
  ...      (a line of its own, indented or not) stands for any number of lines left out;
  [..]     stands for any text within a line.

  readme_test.py README BIN_DIR DATA_DIR            compare; print a diff for each difference
  readme_test.py README BIN_DIR DATA_DIR --update   rewrite the README's outputs with what the
                                                    program prints now, keeping every "..." and
                                                    the lines around it; read `git diff` after
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


def refreshed(expected, actual):
    """The expected lines rewritten from actual, keeping "..." with as many lines around it."""
    if matches(expected, actual):
        return expected
    gaps = [k for k, line in enumerate(expected) if is_gap(line)]
    if not gaps:  # each line as printed, but a line with [..] that still fits stays as written
        return [e if k < len(expected) and line_matches(e, a) else a
                for k, (e, a) in enumerate(zip(expected + [""] * len(actual), actual))]
    head = gaps[0]
    tail = len(expected) - head - 1
    rest = refreshed(expected[head + 1:], actual[head:]) if tail else []
    return actual[:head] + [expected[head]] + (rest[-tail:] if tail else [])


def run(command, folder, bin_dir):
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""), COLUMNS="80", LC_ALL="C.UTF-8")
    env.pop("NO_COLOR", None)
    done = subprocess.run(["bash", "-c", command], cwd=folder, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=60)
    return done.stdout.decode("utf-8", "replace").splitlines()


def main():
    readme, bin_dir, data_dir, *flags = sys.argv[1:]
    update = flags == ["--update"]
    with open(readme, encoding="utf-8") as f:
        lines = f.read().split("\n")
    failures, count = 0, 0
    with tempfile.TemporaryDirectory() as folder:
        os.symlink(data_dir, os.path.join(folder, "data"))
        for start, end in reversed(sessions(lines)):
            new_body = []
            for command, expected in commands(lines[start:end]):
                count += 1
                actual = run(command, folder, bin_dir)
                new_body += ["$ " + command] + refreshed(expected, actual)
                if not matches(expected, actual):
                    failures += 1
                    print(f"README.md:{start + 1}: $ {command}")
                    sys.stdout.writelines(difflib.unified_diff([l + "\n" for l in expected], [l + "\n" for l in actual],
                                                               "README (expected)", "ffn-trace (printed)"))
            lines[start:end] = new_body
    if count == 0:
        print("no session blocks found in the README: nothing was tested")
        return 1
    if update:
        with open(readme, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        print(f"{count} commands run; README rewritten with their output: read `git diff README.md`")
        return 0
    print(f"{count} commands run, {failures} differ" + (" (refresh: scripts/update-readme.sh, then read the diff)" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
