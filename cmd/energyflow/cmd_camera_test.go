package main

import (
	"bytes"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCamera(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := realMain(append([]string{"camera"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func checkPNG(t *testing.T, path string, w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("%s is %v, want %dx%d", path, b, w, h)
	}
}

func TestCameraSnapshotReplay(t *testing.T) {
	td := filepath.Join("..", "..", "camera", "testdata")
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		w, h int
	}{
		{[]string{"--replay", filepath.Join(td, "frames")}, 160, 120},
		{[]string{"--replay", filepath.Join(td, "clip_160x120.mjpeg"), "--skip", "0"}, 160, 120},
		{[]string{"--replay", filepath.Join(td, "testsrc2_320x240.yuyv"), "--size", "320x240"}, 320, 240},
	} {
		out := filepath.Join(dir, fmt.Sprintf("f%d.png", len(c.args)))
		code, stdout, stderr := runCamera(t, append([]string{"snapshot", "--out", out}, c.args...)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		if !strings.Contains(stdout, "wrote "+out) {
			t.Errorf("stdout %q", stdout)
		}
		checkPNG(t, out, c.w, c.h)
	}
}

func TestCameraSnapshotURL(t *testing.T) {
	jpg, err := os.ReadFile(filepath.Join("..", "..", "camera", "testdata", "testsrc2_320x240.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "multipart/x-mixed-replace; boundary=frame")
		for i := 0; i < 3; i++ {
			fmt.Fprintf(w, "--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\nX-Timestamp: 1763800000.%06d\r\n\r\n", len(jpg), i)
			w.Write(jpg)
			fmt.Fprint(w, "\r\n")
		}
		fmt.Fprint(w, "--frame--\r\n")
	}))
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "snap.png")
	code, _, stderr := runCamera(t, "snapshot", "--url", srv.URL, "--skip", "2", "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	checkPNG(t, out, 320, 240)
}

func TestCameraErrors(t *testing.T) {
	if code, _, stderr := runCamera(t, "snapshot", "--device", "/dev/video-energyflow-missing", "--out", filepath.Join(t.TempDir(), "x.png")); code != exitFailure || !strings.Contains(stderr, "no such device") {
		t.Errorf("missing device: exit %d, %q", code, stderr)
	}
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"snapshot"},
		{"snapshot", "--device", "/dev/video0", "--url", "http://x/"},
		{"snapshot", "--device", "/dev/video0", "--size", "big"},
		{"snapshot", "--device", "/dev/video0", "--out", "x.gif"},
		{"list", "extra"},
	} {
		if code, _, _ := runCamera(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code, stdout, _ := runCamera(t, "list"); code != exitOK || stdout == "" {
		t.Errorf("list: exit %d, %q", code, stdout)
	}
	if code, stdout, _ := runCamera(t, "list", "--json"); code != exitOK || !strings.HasPrefix(strings.TrimSpace(stdout), "[") {
		t.Errorf("list --json: exit %d, %q", code, stdout)
	}
}
