package runtime

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNotifierSpeaksSdNotify(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "2000000")
	t.Setenv("WATCHDOG_PID", "")

	n := NewNotifier()
	if n.WatchdogInterval() != time.Second {
		t.Fatalf("watchdog interval %v, want 1s (half of WatchdogSec)", n.WatchdogInterval())
	}
	n.Ready("running")
	t0 := time.Unix(100, 0)
	n.Healthy(t0)
	n.Healthy(t0.Add(100 * time.Millisecond)) // too soon: no second ping
	n.Healthy(t0.Add(1100 * time.Millisecond))
	n.Stopping()

	var got []string
	buf := make([]byte, 512)
	for i := 0; i < 4; i++ {
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		k, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("message %d: %v (got %q)", i, err, got)
		}
		got = append(got, string(buf[:k]))
	}
	want := []string{"READY=1\nSTATUS=running", "WATCHDOG=1", "WATCHDOG=1", "STOPPING=1"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
	_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if k, err := conn.Read(buf); err == nil {
		t.Fatalf("unexpected extra message %q", buf[:k])
	}
}
