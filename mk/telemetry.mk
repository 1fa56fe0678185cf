# telemetry: live view (WebRTC + overlay), metrics, GPU stats.
#
# The browser end-to-end test (telemetry/browsertest) runs inside
# `go test ./...` (make test-go); it fails there when CI is set and
# Chromium, Node or playwright-core is missing, and skips locally.
#
#   make telemetry-test    the telemetry packages alone, with -race
#   make telemetry-e2e     only the browser test, verbose
#   make telemetry-bench   encode time per frame; CPU with 1 and 4 viewers and
#                          glass-to-glass delay at 640x480, 15 fps (Chromium)

.PHONY: telemetry-test telemetry-e2e telemetry-bench

telemetry-test:
	$(GO) test -race -count=1 ./telemetry/...

telemetry-e2e:
	$(GO) test -count=1 -run TestBrowserEndToEnd -v ./telemetry/browsertest/

telemetry-bench:
	$(GO) test -run '^$$' -bench 'BenchmarkEncode640x480' -benchtime 300x -count 3 ./telemetry/vpx/
	EF_BENCH=1 $(GO) test -count=1 -run TestBrowserBenchmark -v -timeout 5m ./telemetry/browsertest/

EXTRA_BENCH += telemetry-bench
