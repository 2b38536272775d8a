"""The self-test that the source checkers share (tests/names/check_names.py,
tests/roles/check_roles.py): each case is a tree holding copies of the files the checker reads for
its tables and one made-up source file; the checker must fail on every breaking case and pass on
the one that keeps the rules."""
import pathlib
import subprocess
import sys
import tempfile


def run_cases(checker: str, root: pathlib.Path, copied: list, made_up: str, breaking: dict, keeping: str, what: str) -> int:
    """checker: the script's path; copied: paths relative to root; made_up: where the made-up
    file goes, relative to the tree; breaking: case name -> source text; what: what breaks, in the
    last line ("look-up", "name")."""
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for case, text in [*breaking.items(), ("nothing", keeping)]:
            tree = pathlib.Path(tmp) / case
            for rel in copied:
                (tree / rel).parent.mkdir(parents=True, exist_ok=True)
                (tree / rel).write_text((root / rel).read_text())
            (tree / made_up).parent.mkdir(parents=True, exist_ok=True)
            (tree / made_up).write_text(text + "\n")
            rc = subprocess.run([sys.executable, checker, str(tree)], capture_output=True).returncode
            if rc != (0 if case == "nothing" else 1):
                problems.append(f"{case}: exit {rc}")
    for p in problems:
        print(p)
    print("self-test:", "failed" if problems else f"the check fails on each kind of {what} and passes without them")
    return 1 if problems else 0
