# Evaluation (docs/evaluation.md): the closed-loop grid and its report.
#
#   make eval              the grid of docs/evaluation.md (about an hour on 2 cores; keeps finished cells)
#   make test-eval-quick   2 short episodes per policy + one fault episode through
#                          the real runtime and the report script: checks the
#                          pipeline, not the numbers (CI)

.PHONY: eval test-eval-quick

eval: build
	./scripts/evaluate.sh --preset cpu10 --publish

test-eval-quick: build
	rm -rf build/eval-quick
	./scripts/evaluate.sh --quick
	test -s build/eval-quick/report.md
	grep -q "fault object" build/eval-quick/report.md

EXTRA_TESTS += test-eval-quick
