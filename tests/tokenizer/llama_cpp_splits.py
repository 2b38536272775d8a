#!/usr/bin/env python3
"""The pieces llama.cpp's pre-tokenizers cut awkward texts into, derived with Python's `regex`
module from llama.cpp's own source, sharing nothing with ffn-trace: the regexes and the names that
choose them are parsed out of src/llama-vocab.cpp (llm_tokenizer_bpe's switch and the
tokenizer_pre chain), and the text is split as unicode_regex_split does: each regex in turn cuts
every piece the one before left, the text between its matches kept as pieces of its own.

    llama_cpp_splits.py LLAMA_VOCAB_CPP > tests/inputs/pre_tokenizers/llama_cpp_splits.json

LLAMA_VOCAB_CPP: `git show HEAD:src/llama-vocab.cpp` of llama.cpp. GPT-4o's regex and the
default's four came after the snapshot this was first run on (c392e50, February 2025); they are
given below as llama.cpp's newer source spells them.
"""
import json
import re
import sys

import regex

NEWER = {
    # llama.cpp since 2025: LLAMA_VOCAB_PRE_TYPE_GPT4O for "gpt-4o" and "llama4"
    "GPT4O": (["gpt-4o", "llama4"], [
        r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
        r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
        r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"]),
    "DEFAULT": (["default"], [r"[\p{P}\$\+<=>\^~\|]+", r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
                              r"\p{N}+", r"[0-9][0-9][0-9]"]),
}

TEXTS = [
    "Hello, wörld! It's naïve café — ÀÉÎ über",
    "I'M  HERE'S   they'LL we'Ve don't\n\n  x",
    "1 12 123 1234 12345 1234567",
    "日本語のテキスト、中文。한국어 テスト",
    "emoji 🎉🎉 👍🏽 ok!!",
    "   leading and trailing   ",
    "tabs\tand\r\nCRLF\n\n\nend \n",
    "e\u0301 CamelCaseWord HTTPServer ǅx path/to/file.txt\n//c a\u3000b",
]


def c_string(literal):
    """The value of a C string literal's body."""
    out, i = [], 0
    escapes = {"\\": "\\", '"': '"', "n": "\n", "r": "\r", "t": "\t"}
    while i < len(literal):
        if literal[i] == "\\":
            if literal[i + 1] == "U":
                out.append(chr(int(literal[i + 2:i + 10], 16)))
                i += 10
                continue
            out.append(escapes[literal[i + 1]])
            i += 2
        else:
            out.append(literal[i])
            i += 1
    return "".join(out)


def regexes_by_type(source):
    body = source[source.index("struct llm_tokenizer_bpe : llm_tokenizer"):]
    body = body[:body.index("std::vector<std::string> regex_exprs;")]
    table, pending, collecting = {}, [], None
    for line in body.splitlines():
        s = line.strip()
        m = re.match(r"case LLAMA_VOCAB_PRE_TYPE_(\w+):", s)
        if m:
            pending.append(m.group(1))
        elif s == "default:":
            pending.append("DEFAULT")
        elif s.startswith("regex_exprs = {"):
            collecting = []
        elif collecting is not None and s.startswith("};"):
            for t in pending:
                table[t] = collecting
            pending, collecting = [], None
        elif collecting is not None and s.startswith('"'):
            collecting.append(c_string(s[1:s.rindex('"')]))
    return table


def names_by_type(source):
    chain = source[source.index('tokenizer_pre == "default"'):]
    chain = chain[:chain.index("unknown pre-tokenizer type")]
    names, pending = {}, []
    for line in chain.splitlines():
        pending += re.findall(r'tokenizer_pre == "([^"]+)"', line)
        m = re.search(r"pre_type = LLAMA_VOCAB_PRE_TYPE_(\w+);", line)
        if m:
            names.setdefault(m.group(1), []).extend(pending)
            pending = []
    return names


def split(text, patterns):
    pieces = [text]
    for p in patterns:
        compiled = regex.compile(p)
        cut = []
        for piece in pieces:
            last = 0
            for m in compiled.finditer(piece):
                if m.end() == m.start():
                    continue
                if m.start() > last:
                    cut.append(piece[last:m.start()])
                cut.append(m.group(0))
                last = m.end()
            if last < len(piece):
                cut.append(piece[last:])
        pieces = cut
    return pieces


def main(path):
    source = open(path, encoding="utf-8").read()
    regexes, names = regexes_by_type(source), names_by_type(source)
    kinds = {t: (names.get(t, []), regexes[t]) for t in regexes if t != "DEFAULT" and names.get(t)}
    kinds.update(NEWER)
    out = []
    for t in sorted(kinds):
        pre_names, patterns = kinds[t]
        out.append({"type": t, "names": pre_names, "regexes": patterns,
                    "splits": [{"text": x, "pieces": split(x, patterns)} for x in TEXTS]})
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
