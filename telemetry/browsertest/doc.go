// Package browsertest holds the end-to-end browser test of the live view:
// e2e.mjs (playwright-core driving Debian's /usr/bin/chromium) and the Go
// test that starts a telemetry server on loopback with a synthetic camera
// and a fake controller and runs it. `npm install` here (scripts/deps.sh
// does it) fetches playwright-core; no browser is ever downloaded.
//
// The test runs in `go test ./telemetry/...`. Without Chromium, Node or
// node_modules it is skipped, unless CI is set, where it fails instead.
// With EF_BENCH=1, TestBrowserBenchmark measures encode time, CPU with one
// and four viewers, and glass-to-glass delay (see docs/telemetry.md).
package browsertest
