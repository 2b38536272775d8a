# The two commands of the quick start: `make demo` and `make test`.
# Both install the missing Debian packages first, then configure and build.

.PHONY: deps build demo test clean

deps:
	@bash scripts/install-deps.sh

build: deps
	cmake --preset default
	cmake --build --preset default

demo: build
	./build/ffn-trace run data/walkthrough.json

test: build
	ctest --preset default

clean:
	rm -rf build
