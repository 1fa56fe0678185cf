# EnergyFlow Edge — build, test and demo entry points.
#
#   make demo       run the simulated robot demo: ButtonPress acted from the camera
#                   (DEMO_BUNDLE; the state bundle: DEMO_BUNDLE=bundles/metaworld-button-press)
#   make test       everything CI runs (Go with -race, Python, browser, fakes),
#                   then the research/ tests (make test-research) last
#   make deps-demo  install what the demo needs (simulator, no torch; called by demo)
#   make deps       install everything: deps-demo + training toolkit and test
#                   tools (called by test and bench)
#   make bench      the benchmarks that print tables
#
# Package-specific targets live in mk/*.mk; each adds itself to
# EXTRA_TESTS or EXTRA_BENCH.

SHELL := /bin/bash
GO ?= go
PY := .venv/bin/python
EXTRA_TESTS :=
EXTRA_BENCH :=
export ENERGYFLOW_ROOT := $(CURDIR)
# The demo's policy: ButtonPress from the hand, the gripper and a top-view
# camera (docs/camera-policy.md). scripts/watch_demo.sh watches the same one.
DEMO_BUNDLE ?= bundles/metaworld-button-press-camera

-include mk/*.mk

.PHONY: deps deps-demo demo print-demo-bundle test test-go test-py test-research lint build bench baselines
deps:
	./scripts/deps.sh

deps-demo:
	./scripts/deps.sh demo

build:
	$(GO) build -o bin/energyflow ./cmd/energyflow

# the Diffusion Policy baselines and the superseded image bundle, from the branch `baselines`
baselines:
	./scripts/baselines.sh

demo: deps-demo build
	./bin/energyflow sim --bundle $(DEMO_BUNDLE)

# the demo's bundle, for scripts that run the demo as make demo does
print-demo-bundle:
	@echo $(DEMO_BUNDLE)

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' ; git ls-files --others --exclude-standard '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test-go:
	$(GO) test -race -count=1 ./...

test-py:
	$(PY) -m pytest -q training sim

# The analyses in research/ (research/README.md): their own step, after every
# product suite, so a broken experiment never hides a product failure.
test-research:
	$(PY) -m pytest -q research

test: deps lint test-go test-py $(EXTRA_TESTS) test-research
	@echo "make test: all suites passed"

bench: deps $(EXTRA_BENCH)
