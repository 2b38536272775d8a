#!/usr/bin/env python3
"""Names written once: step names, architecture names and option names in src/.

Three counts over the C++ sources of src/ (comments left out), each printed with its places:

1. String literals that are words of the step vocabulary (model/steps.cpp's table: every step's
   name, and its variable when longer than one letter, such as "hidden" or "normed") outside
   that table: at most 10. Not counted, because they are other vocabularies that share a word:
   the tables listed in OTHER_TABLES, and a parameter's name where an error or the front end's
   mapping of parameters to options names it (error{file, "output", ...}, {"output", "--output"}).
2. Comparisons (== or !=) with a string literal that names an architecture of the family table
   (checkpoint/family.cpp) outside that table: at most 3. Not counted: the values of other
   fields that happen to be spelled like a family, listed in OTHER_SPELLINGS.
3. "--option" text in src/core's string literals: none but ALLOWED_OPTIONS. The library names
   its parameters (an error's path, or `name` in backquotes in its message); the front end maps
   them to its options (with_option_names in src/cli/common.cpp).

Exits 1 when a count is over its limit. Usage: check_names.py SOURCE_DIR; with --self-test,
checks that each count fails on a small tree that breaks it, and passes on one that keeps it.
"""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from checker_self_test import run_cases  # noqa: E402

STEP_LIMIT = 10
ARCH_LIMIT = 3

# Tables of other vocabularies, each written once, whose words are also step words.
OTHER_TABLES = {
    "src/core/model/steps.cpp": "the step vocabulary itself",
    "src/core/example/keys.hpp": "the example file's members (\"input\", \"weights\", \"norm\")",
    "src/core/checkpoint/family.cpp": "tensor names in checkpoint files (Llama's \"norm\", GGUF's \"output\")",
    "src/core/forward/hooks.cpp": "the forward pass's hook points (\"logits\")",
    "src/core/tokenizer/pre_tokenizers.cpp": "tokenizer.json's pre-tokenizer members (Metaspace's \"split\")",
    "src/cli/units_command.cpp": "units' JSON member of --split (\"split\"), the neurons' split, not Phi-3's step",
}

# Fields spelled like a family that are not an architecture, by file.
OTHER_SPELLINGS = {
    "src/core/tokenizer/gguf_vocab.cpp": "tokenizer.ggml.model (\"gpt2\", \"llama\") and tokenizer.ggml.pre "
                                         "(\"qwen2\", \"olmo\", \"falcon\") name tokenizers, not architectures",
}

# src/core files whose literals may write an option, each with its reason.
ALLOWED_OPTIONS = {
    "src/core/document/page/page.css": "CSS custom properties (var(--pos)), not options",
    "src/core/document/page_figures.cpp": "CSS custom properties (var(--pos)), not options",
    "src/core/document/page_html.cpp": "CSS custom properties (--a), not options",
    "src/core/tools/manual.cpp": "the manual page and the completions are of the command line",
    # The views and the exercises tell a reader what to run next; they render for the command
    # line, as its text and pages show them.
    "src/core/views/render_prompt.cpp": "a view's advice: the command to run next",
    "src/core/views/render_edit.cpp": "a view's advice: the command to run next",
    "src/core/views/render_locate.cpp": "a view's advice: the command to run next",
    "src/core/views/render_units.cpp": "a view's advice: the command to run next",
    "src/core/views/render_moe.cpp": "a view's advice: the command to run next",
    "src/core/views/walkthrough_readings.cpp": "a view's advice: the command to run next",
    "src/core/tools/render_params.cpp": "a view's advice: the command to run next",
    "src/core/exercises/quiz.cpp": "an exercise's advice: the command to run next",
    "src/core/exercises/worksheet.cpp": "an exercise's advice: the command to run next",
    "src/core/exercises/prompt_quiz.cpp": "the command that shows the run a quiz asks about",
}

LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def code_of(text: str) -> str:
    """The text with comments blanked, string literals kept (line numbers kept too)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("R\"", i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            delim = text[i + 2:text.index("(", i)]
            end = text.index(")" + delim + '"', i) + len(delim) + 2
            out.append(text[i:end])
            i = end
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            block = text[i:n if j < 0 else j + 2]
            out.append("\n" * block.count("\n"))
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def step_words(root: pathlib.Path) -> set:
    table = (root / "src/core/model/steps.cpp").read_text()
    words = set()
    for name, variable in re.findall(r'^\s*\{"(\w+)", "(\w+)"', table, re.M):
        words.add(name)
        if len(variable) > 1:
            words.add(variable)
    return words


def family_names(root: pathlib.Path) -> set:
    table = (root / "src/core/checkpoint/family.cpp").read_text()
    return set(re.findall(r'\.name = "(\w+)"', table)) | set(re.findall(r'llama_like\("(\w+)"', table))


def sources(root: pathlib.Path):
    for p in sorted((root / "src").rglob("*")):
        if p.suffix in {".cpp", ".hpp", ".in"} or (p.suffix in {".css", ".js"} and "core" in p.parts):
            yield p.relative_to(root).as_posix(), code_of(p.read_text())


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    words, families = step_words(root), family_names(root)
    if len(words) < 14 or len(families) < 5:
        print(f"could not read the step vocabulary ({len(words)} words) or the families ({len(families)})")
        return 1
    steps, archs, options = [], [], []
    for rel, code in sources(root):
        is_cxx = not rel.endswith((".css", ".js"))
        for line_no, line in enumerate(code.split("\n"), 1):
            for m in LITERAL.finditer(line):
                text, before, after = m.group(1), line[:m.start()], line[m.end():]
                if is_cxx and text in words and rel not in OTHER_TABLES:
                    parameter = re.search(r'error\{[^,{}]*,\s*$', before) or re.match(r'\s*,\s*"--', after)
                    if not parameter:
                        steps.append(f"{rel}:{line_no}: \"{text}\"")
                if is_cxx and text in families and rel != "src/core/checkpoint/family.cpp" \
                        and rel not in OTHER_SPELLINGS and (re.search(r'[!=]=\s*$', before) or re.match(r'\s*[!=]=', after)):
                    archs.append(f"{rel}:{line_no}: \"{text}\"")
                if rel.startswith("src/core/") and re.search(r'(^|[\s(])--[a-z]', text) and rel not in ALLOWED_OPTIONS:
                    options.append(f"{rel}:{line_no}: \"{text}\"")
    ok = True
    for title, found, limit in (("step-name literals outside the step vocabulary", steps, STEP_LIMIT),
                                ("architecture-name comparisons outside the family table", archs, ARCH_LIMIT),
                                ("option names in src/core's literals", options, 0)):
        print(f"{title}: {len(found)} (at most {limit})")
        for f in found:
            print(f"  {f}")
        ok = ok and len(found) <= limit
    return 0 if ok else 1


def self_test(root: pathlib.Path) -> int:
    """A copy of the two tables, then one file that breaks one count at a time."""
    breaking = {
        "steps": "\n".join(f'const char* s{i} = "hidden";' for i in range(STEP_LIMIT + 1)),
        "architectures": "\n".join(f'bool a{i}(std::string_view n) {{ return n == "llama"; }}' for i in range(ARCH_LIMIT + 1)),
        "options": 'const char* hint = "give --layer";',
    }
    keeping = "\n".join([f'const char* s{i} = "hidden";  // "{i}"' for i in range(STEP_LIMIT)] +
                         ['// "give --layer"', 'auto e = error{"", "output", "exists"};'])
    return run_cases(__file__, root, ["src/core/model/steps.cpp", "src/core/checkpoint/family.cpp"], "src/core/views/made_up.cpp", breaking, keeping, "name")


if __name__ == "__main__":
    if sys.argv[1] == "--self-test":
        sys.exit(self_test(pathlib.Path(sys.argv[2])))
    sys.exit(main())
