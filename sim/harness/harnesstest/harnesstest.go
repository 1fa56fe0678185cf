// Package harnesstest helps the sim harness's tests: the repository, the
// project's Python environment and a bridge started for a test, stopped
// when it ends.
package harnesstest

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/energyflow/edge/sim/harness"
)

// ModuleRoot returns the repository: the first parent of the working
// directory holding go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	d, _ := os.Getwd()
	for ; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	t.Fatal("no go.mod above the test")
	return ""
}

// RequireVenv skips a test that needs the bridge's Python when .venv is
// missing, and fails it in CI, where make deps must have made it.
func RequireVenv(t testing.TB, root string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, ".venv", "bin", "python")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no .venv: make deps creates it")
		}
		t.Skip("no .venv (run make deps)")
	}
}

// CopyDir copies the folder src (relative to the repository, or absolute)
// into a temporary folder named like it and returns the copy's path.
func CopyDir(t testing.TB, src string) string {
	t.Helper()
	if !filepath.IsAbs(src) {
		src = filepath.Join(ModuleRoot(t), src)
	}
	dir := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ShippedBundleCopy copies bundles/<name> into a temporary folder and
// returns the copy's path.
func ShippedBundleCopy(t testing.TB, name string) string {
	t.Helper()
	return CopyDir(t, filepath.Join("bundles", name))
}

// StartBridge starts the Meta-World bridge (lockstep, button-press, level
// 0, seed 3, 96×96 camera) with the options changed by edit (nil: none)
// for a test, and closes it when the test ends. It skips under -short and
// without the Python environment (RequireVenv). It returns the bridge and
// the repository.
func StartBridge(t testing.TB, edit func(*harness.BridgeOptions)) (*harness.Bridge, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the Meta-World bridge")
	}
	root := ModuleRoot(t)
	RequireVenv(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := harness.BridgeOptions{Root: root, Task: "button-press", Level: "0", Seed: 3,
		MapFile: filepath.Join(root, harness.MapFile), Lockstep: true, Camera: "96x96", Log: io.Discard}
	if edit != nil {
		edit(&o)
	}
	b, err := harness.StartBridge(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, root
}
