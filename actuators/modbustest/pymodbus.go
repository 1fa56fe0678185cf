package modbustest

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

//go:embed pymodbus_server.py
var pymodbusServer []byte

// Root returns the repository root: $ENERGYFLOW_ROOT when set, else the
// nearest directory above the working directory holding go.mod.
func Root() (string, error) {
	if r := os.Getenv("ENERGYFLOW_ROOT"); r != "" {
		return r, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("modbustest: no go.mod above the working directory; set ENERGYFLOW_ROOT")
		}
		dir = parent
	}
}

// Python returns the project's virtual-environment Python that has
// pymodbus. When it is missing the test fails under CI=true (make deps
// creates it there) and is skipped otherwise, saying how to get it.
func Python(t testing.TB) string {
	t.Helper()
	root, err := Root()
	if err == nil {
		py := filepath.Join(root, ".venv", "bin", "python")
		if _, err = os.Stat(py); err == nil {
			if out, err2 := exec.Command(py, "-c", "import pymodbus").CombinedOutput(); err2 == nil {
				return py
			} else {
				err = fmt.Errorf("%s cannot import pymodbus: %v: %s", py, err2, out)
			}
		}
	}
	msg := fmt.Sprintf("pymodbus peer unavailable (%v); run `make deps` to create .venv", err)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Pymodbus is a pymodbus TCP server running as a subprocess: plain
// register storage, an independent peer for the client.
type Pymodbus struct {
	Addr   string
	py     string
	script string
	args   []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	stderr *bytes.Buffer
}

// StartPymodbus starts a pymodbus server for unit, with input registers
// preloaded from address 0 with ir. It is killed when the test ends.
func StartPymodbus(t testing.TB, unit byte, ir []uint16) *Pymodbus {
	t.Helper()
	py := Python(t)
	script := filepath.Join(t.TempDir(), "pymodbus_server.py")
	if err := os.WriteFile(script, pymodbusServer, 0o644); err != nil {
		t.Fatal(err)
	}
	port := FreePort(t)
	vals := make([]string, len(ir))
	for i, v := range ir {
		vals[i] = strconv.Itoa(int(v))
	}
	p := &Pymodbus{
		Addr: fmt.Sprintf("127.0.0.1:%d", port), py: py, script: script,
		args: []string{"--port", strconv.Itoa(port), "--unit", strconv.Itoa(int(unit)), "--ir", strings.Join(vals, ",")},
	}
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

// Restart starts the server again on the same address (after Kill).
func (p *Pymodbus) Restart() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return nil
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // the port may linger briefly
		cmd := exec.Command(p.py, append([]string{p.script}, p.args...)...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		p.stderr = &bytes.Buffer{}
		cmd.Stderr = p.stderr
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("modbustest: start pymodbus: %w", err)
		}
		ready := make(chan error, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "READY") {
					ready <- nil
					// keep draining
				}
			}
			ready <- fmt.Errorf("exited before ready")
		}()
		select {
		case err = <-ready:
		case <-time.After(90 * time.Second):
			err = fmt.Errorf("not ready after 90s")
		}
		if err == nil {
			p.cmd = cmd
			return nil
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		lastErr = fmt.Errorf("modbustest: pymodbus on %s: %v: %s", p.Addr, err, p.stderr.String())
		time.Sleep(200 * time.Millisecond)
	}
	return lastErr
}

// Kill kills the server process (SIGKILL): its connections drop at once.
func (p *Pymodbus) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}
