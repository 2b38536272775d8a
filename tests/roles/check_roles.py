#!/usr/bin/env python3
"""The model is the only door to the weights: names stay in the readers.

The readers (src/core/checkpoint: the family table, config.json's and GGUF's metadata, the tensor
files) resolve each tensor and configuration value by its role once; the model (src/core/forward)
holds what they resolved. Everything else (analyses, views, exercises, tools, the front end) asks
the model or the checkpoint for a role, and is counted here, comments left out:

1. Raw weight look-ups: the tensor source (`tensors()`, a `tensor_source&` handed on), a name
   resolved (`.resolve(`), a tensor's name asked for (`embedding_name()`, `unembedding_name()`),
   a role spelled (`.name_of(`, `.pattern(`): at most LOOKUP_LIMIT.
2. Family readers: the family row read again (`.family`, `family->`, `const family&`,
   `find_family(`): none.
3. Configuration keys: string literals that config.json or a GGUF file's metadata spells, as the
   family table spells them (every literal with an underscore or a dot in its tables of keys and
   words, KEY_TABLES of family.cpp): at most KEY_LIMIT. Not counted: the tokenizer's reader of a
   GGUF vocabulary (tokenizer/), and the names of other vocabularies that share a key's spelling
   (OTHER_VOCABULARIES).
4. The same literals in the readers of config.json and GGUF's metadata (KEY_READERS), which read
   by the table's names (config_key::hidden_size), not by spelling: at most KEY_LIMIT_IN_READERS.

Exits 1 when a count is over its limit. Usage: check_roles.py SOURCE_DIR; with --self-test,
checks that each count fails on a small tree that breaks it, and passes on one that keeps it.
"""
import pathlib
import re
import sys

LOOKUP_LIMIT = 0
KEY_LIMIT = 0
KEY_LIMIT_IN_READERS = 5

# The readers and the model, which alone spell names.
READERS = ("src/core/checkpoint/", "src/core/forward/", "src/core/tokenizer/")
# The family table spells every key once, in the tables named *_spelled (config.json's keys, the
# words it writes as values, GGUF's keys): every literal there with an underscore or a dot is a
# key (or a value config.json spells, such as "gelu_new").
FAMILY_TABLE = "src/core/checkpoint/family.cpp"
KEY_TABLES = re.compile(r"^constexpr std::pair<\w+, std::string_view> \w+_spelled\[\] = \{$(.*?)^\};$", re.M | re.S)
KEY_READERS = ("src/core/checkpoint/config.cpp", "src/core/checkpoint/gguf_config.cpp")
# Files whose literals spell another vocabulary that shares a key's spelling, with the reason.
OTHER_VOCABULARIES = {
    "src/core/tools/params.cpp": "params's own parameters (\"head_dim\" is its option's name)",
}
# The edit's writer finds the file that holds the tensor it rewrites, by the name the checkpoint
# gave the edit (checkpoint::tensor_of).
LOOKUP_ALLOWED = {"src/core/analysis/edit_checkpoint.cpp"}

LOOKUP = re.compile(r'\btensors\(\)|\btensor_source\s*[&*]|[.>]resolve\(|\b(?:un)?embedding_name\(|[.>](?:name_of|pattern)\(')
FAMILY = re.compile(r'\.family\b|\bfamily\s*->|\bconst\s+(?:ffn_trace::)?family\s*&|\bfind_(?:gguf_)?family\(|\bfamilies\(\)')
LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "names"))
from check_names import code_of  # noqa: E402  (comments blanked, literals and line numbers kept)
from checker_self_test import run_cases  # noqa: E402


def config_keys(root: pathlib.Path) -> set:
    keys = set()
    for table in KEY_TABLES.findall(code_of((root / FAMILY_TABLE).read_text())):
        for text in LITERAL.findall(table):
            if re.fullmatch(r"[a-z][a-z0-9_.]*", text) and ("_" in text or "." in text):
                keys.add(text)
    return keys


def literals_of(rel: str, code: str, keys: set) -> list:
    return [f"{rel}:{line_no}: \"{t}\"" for line_no, line in enumerate(code.split("\n"), 1)
            for t in LITERAL.findall(line) if t in keys]


def sources(root: pathlib.Path):
    for p in sorted((root / "src").rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.suffix in {".cpp", ".hpp"} and not rel.startswith(READERS):
            yield rel, code_of(p.read_text())


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    keys = config_keys(root)
    if len(keys) < 20:
        print(f"could not read the configuration keys ({len(keys)})")
        return 1
    lookups, families, literals = [], [], []
    for rel, code in sources(root):
        for line_no, line in enumerate(code.split("\n"), 1):
            bare = LITERAL.sub('""', line)  # code only: a message may say "tensors()"
            if rel not in LOOKUP_ALLOWED:
                lookups += [f"{rel}:{line_no}: {m.group(0)}" for m in LOOKUP.finditer(bare)]
            families += [f"{rel}:{line_no}: {m.group(0)}" for m in FAMILY.finditer(bare)]
        if rel not in OTHER_VOCABULARIES:
            literals += literals_of(rel, code, keys)
    in_readers = [hit for rel in KEY_READERS for hit in literals_of(rel, code_of((root / rel).read_text()), keys)]
    ok = True
    for title, found, limit in (("raw weight look-ups outside the model and its readers", lookups, LOOKUP_LIMIT),
                                ("family readers outside the model and its readers", families, 0),
                                ("config.json and GGUF key literals outside the readers", literals, KEY_LIMIT),
                                ("config.json and GGUF key literals in the readers, outside the family table", in_readers,
                                 KEY_LIMIT_IN_READERS)):
        print(f"{title}: {len(found)} (at most {limit})")
        for f in found:
            print(f"  {f}")
        ok = ok and len(found) <= limit
    return 0 if ok else 1


def self_test(root: pathlib.Path) -> int:
    """A copy of the family table and the readers, then one file that breaks one count at a time:
    a made-up analysis, then a made-up config.cpp in place of the reader's."""
    copied = (FAMILY_TABLE, *KEY_READERS)
    breaking = {
        "look-ups": "\n".join(f"auto u{i} = ck.tensors().find(ck.unembedding_name());" for i in range(LOOKUP_LIMIT + 1)),
        "families": "bool c = ck.config().family->causal;",
        "keys": "\n".join(f'auto e{i} = m.origin.at("num_attention_heads", "");' for i in range(KEY_LIMIT + 1)),
    }
    keeping = "\n".join([f"auto u{i} = ck.unembedding();  // not ck.tensors()" for i in range(LOOKUP_LIMIT + 1)] +
                        ['auto e = error{"", "", "the family->causal flag";', "bool c = ck.causal();"])
    outside = run_cases(__file__, root, copied, "src/core/analysis/made_up.cpp", breaking, keeping, "look-up")

    def spelled(n: int) -> str:  # n keys spelled in a reader, and one that only a comment names
        return "\n".join([f'auto n{i} = config_count(c, from, "hidden_size", 0);' for i in range(n)] +
                         ['// "rope.freq_base" and "gelu_new" in a comment', 'auto k = key_name(config_key::hidden_size);'])
    in_readers = run_cases(__file__, root, copied, KEY_READERS[0], {"keys in readers": spelled(KEY_LIMIT_IN_READERS + 1)},
                           spelled(KEY_LIMIT_IN_READERS), "key spelled")
    return outside or in_readers


if __name__ == "__main__":
    if sys.argv[1] == "--self-test":
        sys.exit(self_test(pathlib.Path(sys.argv[2])))
    sys.exit(main())
