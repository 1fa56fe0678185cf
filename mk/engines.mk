# engines/: the paper-size benchmark bundle, the Go-vs-torch benchmark table,
# and the CLI check on the committed parity fixture bundle.
#
#   make bench-engines-bundle   export a random-init paper-size bundle (seconds)
#   make bench-engines          Go (ONNX Runtime) vs torch table, docs/engines.md
#   make test-engines-cli       energyflow bundle verify on the parity bundle

ENGINES_BENCH_BUNDLE := build/bundles/papersize

.PHONY: bench-engines bench-engines-bundle test-engines-cli

bench-engines-bundle: $(ENGINES_BENCH_BUNDLE)/manifest.json

$(ENGINES_BENCH_BUNDLE)/manifest.json:
	cd training && ../$(PY) -m energyflow export --random-init --paper-size --energy-head pooled --out ../$(ENGINES_BENCH_BUNDLE)

bench-engines: bench-engines-bundle
	./scripts/bench-engines.sh $(ENGINES_BENCH_BUNDLE)

test-engines-cli:
	$(GO) run ./cmd/energyflow bundle verify engines/testdata/parity/bundle

EXTRA_BENCH += bench-engines
EXTRA_TESTS += test-engines-cli
