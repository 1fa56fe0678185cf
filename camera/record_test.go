package camera

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRecordThenReplay(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		file string
	}{
		{Config{Replay: ReplayConfig{File: "testdata/clip_160x120.mjpeg"}}, "rec.mjpeg"},
		{Config{Width: 160, Height: 120, Replay: ReplayConfig{File: "testdata/clip_160x120.yuyv"}}, "rec.yuyv"},
	} {
		src, err := Open(c.cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		rec := NewRecorder(src, &buf)
		var f Frame
		for rec.Read(context.Background(), &f) == nil {
		}
		src.Close()
		orig, _ := os.ReadFile(c.cfg.Replay.File)
		if rec.Frames() != 3 || !bytes.Equal(buf.Bytes(), orig) {
			t.Errorf("%s: %d frames, %d bytes recorded; want 3 frames identical to the %d-byte original", c.file, rec.Frames(), buf.Len(), len(orig))
		}
		path := filepath.Join(t.TempDir(), c.file)
		os.WriteFile(path, buf.Bytes(), 0o644)
		c.cfg.Replay.File = path
		back, err := OpenReplay(c.cfg)
		if err != nil || back.Len() != 3 {
			t.Errorf("replaying the recording: %v", err)
		}
	}
}

func TestReplayClock(t *testing.T) {
	t0 := time.Unix(100, 0)
	r := NewReplay("c", []Frame{{Format: FormatRGB24, Width: 1, Height: 1, Data: []byte{1, 2, 3}}}, 0, false, ReplayClock(func() time.Time { return t0 }))
	var f Frame
	if err := r.Read(context.Background(), &f); err != nil || !f.Time.Equal(t0) {
		t.Errorf("time %v, %v", f.Time, err)
	}
	if err := r.Read(context.Background(), &f); err != io.EOF {
		t.Errorf("err %v", err)
	}
}
