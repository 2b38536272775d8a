# The two commands of the quick start: `make demo` and `make test`.
# Both install the missing Debian packages first, then configure and build: `make demo` only
# what building the binary needs, and only the binary; `make test` the rest, and everything.
# `make install` builds a Release binary and installs it, stripped, with the man page, the
# completions and the examples under PREFIX (/usr/local by default; DESTDIR for staging);
# `make package` builds ffn-trace_<version>_amd64.deb with CPack, for /usr.
# `make sanitize` runs every test but the browser's under ASan and UBSan; `make fuzz` fuzzes the example loader (with
# the engine and the views) and every checkpoint reader, FUZZ_SECONDS in all (60 by default).

FUZZ_SECONDS ?= 60
PREFIX ?= /usr/local

.PHONY: deps build-deps build binary demo test sanitize fuzz clean install package

deps:
	@bash scripts/install-deps.sh

build-deps:
	@bash scripts/install-deps.sh build

build: deps
	cmake --preset default
	cmake --build --preset default

binary: build-deps
	cmake --preset default
	cmake --build --preset default --target ffn-trace

demo: binary
	./build/ffn-trace run data/walkthrough.json
	./build/ffn-trace run --checkpoint data/models/capitals --layer 0 --prompt "The capital of France is" \
	  --detail summary --ablate 172,84,28,168,203

test: build
	ctest --preset default

install: deps
	cmake --preset release -DCMAKE_INSTALL_PREFIX=$(PREFIX)
	cmake --build --preset release
	cmake --install build-release

package: deps
	cmake --preset package
	cmake --build --preset package
	cd build-package && cpack -G DEB
	cp build-package/ffn-trace_*.deb .
	@ls ffn-trace_*.deb

sanitize: deps
	cmake --preset sanitize
	cmake --build --preset sanitize
	ctest --preset sanitize

fuzz:
	@bash scripts/install-deps.sh fuzz
	cmake --preset fuzz
	cmake --build --preset fuzz
	bash scripts/fuzz.sh $(FUZZ_SECONDS)

clean:
	rm -rf build build-sanitize build-fuzz build-release build-package ffn-trace_*.deb

# `make nations-transcoder`: the transcoder shipped beside data/models/nations, of layer 2's FFN
# (where the model recalls a fact at the subject), trained again from its seed: training is
# deterministic whatever the thread count, so it writes the shipped bytes; training.json is the
# report as trained (each epoch, and the loss recovered spliced in). It is trained outside the
# checkpoint's folder, which -o refuses, then moved in.
.PHONY: nations-transcoder
nations-transcoder: binary
	rm -rf build/transcoder-layer2 data/models/nations/transcoder-layer2
	./build/ffn-trace transcoder train --checkpoint data/models/nations --layer 2 --features 256 --k 8 \
	  --epochs 20 --seed 0 -o build/transcoder-layer2 --format json > build/nations-transcoder.json
	mv build/nations-transcoder.json build/transcoder-layer2/training.json
	mv build/transcoder-layer2 data/models/nations/

# `make bench`: ffn-trace against a NumPy float64 route on GPT-2, Llama-2-7B and Mixtral layers
# of real shape with random weights (checkpoints made once into build/bench/cache, about 3.3 GB),
# then a Llama-2-7B layer read from a Q4_K_M GGUF file against the same layer in BF16 safetensors
# (0.36 GB more), the forward pass against PyTorch float64 on GPT-2 small and a 2-layer
# Llama-2-7B (1.8 GB more), and locate, units and grad --prompt against the same work in PyTorch
# float64 on GPT-2 small, transcoder train against the same epochs in PyTorch float64, MEMIT
# against the same algorithm in PyTorch float64, and serve's answers on the loopback.
.PHONY: bench
bench: build
	bash scripts/bench.sh
	bash scripts/bench_gguf.sh
	bash scripts/bench_forward.sh
	bash scripts/bench_locate.sh
	bash scripts/bench_units.sh
	bash scripts/bench_grad.sh
	bash scripts/bench_transcoder.sh
	bash scripts/bench_edit.sh
	bash scripts/bench_serve.sh
	bash scripts/bench-scale.sh
	bash scripts/bench-parse.sh

# `make bench-scale`: grad and run --detail summary against run --format json on layers of
# growing size (example files made on the fly), and every reader on files of 10× the entries
# (scripts/bench-parse.sh); `make bench` ends with both.
.PHONY: bench-scale
bench-scale: build
	bash scripts/bench-scale.sh
	bash scripts/bench-parse.sh

# `make bench-7b`: a whole Llama-2-7B of real shape (32 layers, BF16, random weights in two
# shards, 13.5 GB made once into build/bench/cache/llama-7b) through `run --prompt` on 32 tokens
# at layer 16, against NumPy float64 streaming the same shards (scripts/bench_7b.sh).
.PHONY: bench-7b
bench-7b: binary
	bash scripts/bench_7b.sh
