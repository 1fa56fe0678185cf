package telemetry

import (
	"os"
	"path/filepath"
	"testing"
)

func writeProc(t *testing.T, root, name, content string) {
	t.Helper()
	p := filepath.Join(root, "proc", name)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCPUSampler(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, "stat", "cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3\n")
	writeProc(t, root, "self/stat", "42 (energy flow) S 1 1 1 0 -1 0 0 0 0 0 50 50 0 0\n")
	writeProc(t, root, "loadavg", "1.50 1.00 0.50 2/300 42\n")
	writeProc(t, root, "meminfo", "MemTotal: 1000 kB\nMemAvailable: 250 kB\n")
	c := cpuSampler{root: root}
	if _, err := c.read(); err != nil {
		t.Fatal(err)
	}
	// 1000 more jiffies, 500 of them busy.
	writeProc(t, root, "stat", "cpu  400 0 300 1100 200 0 0 0 0 0\n")
	s, err := c.read()
	if err != nil {
		t.Fatal(err)
	}
	if s.TotalPct != 50 || s.Load1 != 1.5 || s.MemTotalBytes != 1000*1024 || s.MemUsedBytes != 750*1024 {
		t.Fatalf("%+v", s)
	}
	writeProc(t, root, "stat", "intr 1 2 3\n")
	if _, err := c.read(); err == nil {
		t.Fatal("bad /proc/stat accepted")
	}
}

func TestNewAPIModes(t *testing.T) {
	for _, c := range []ICEConfig{
		{Mode: ICELoopback},
		{Mode: ICELAN},
		{Mode: ICELAN, Interfaces: []string{"eth0"}, UDPPortMin: 50000, UDPPortMax: 50010, NAT1To1IPs: []string{"192.0.2.10"}},
	} {
		if _, err := newAPI(c); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
