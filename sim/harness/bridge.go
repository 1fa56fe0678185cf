package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Bridge is a running Meta-World bridge process (sim/bridge.py): a Modbus TCP
// arm and an MJPEG camera on loopback, plus an episode-control HTTP API used
// only by harnesses (never by the runtime). Close stops it.
type Bridge struct {
	cmd    *exec.Cmd
	Modbus string `json:"modbus"` // host:port of the Modbus TCP server
	HTTP   string `json:"http"`   // host:port of the camera and episode API
	View   string `json:"view"`   // the display view's MJPEG URL; empty without BridgeOptions.View
	Watch  string `json:"watch"`  // the watch camera's MJPEG URL; empty without BridgeOptions.Watch
	done   chan error
	client *http.Client
}

// MetaWorldMaxSteps is Meta-World's episode length limit (max_path_length),
// the bridge's when it is given none and the official evaluation's.
const MetaWorldMaxSteps = 500

// BridgeOptions say how StartBridge starts the bridge.
type BridgeOptions struct {
	Root     string // repository root (for .venv and sim/)
	Task     string
	Level    string
	Seed     int
	MapFile  string // the arm's register map (MapFile under Root)
	Lockstep bool   // one physics step per received command; else real time at RateHz
	MaxSteps int    // episode length limit; 0: Meta-World's (MetaWorldMaxSteps)
	RateHz   float64
	Camera   string    // "WxH"
	CamName  string    // the MuJoCo camera (sim/bridge.py --camera); "": the bridge's default
	View     string    // "WxH" of the display view at /view (live view); empty: none
	Watch    string    // the watch camera rendered at /watch (sim/bridge.py --watch-camera); empty: none
	Log      io.Writer // the bridge's log lines; nil: discarded
}

// StartBridge launches the bridge and waits for its ready line (one JSON
// object with the bound addresses) on stdout. The caller closes it.
func StartBridge(ctx context.Context, o BridgeOptions) (*Bridge, error) {
	py := filepath.Join(o.Root, ".venv", "bin", "python")
	if !fileExists(py) {
		return nil, fmt.Errorf("sim: %s not found: run 'make deps' first (it creates the Python environment)", py)
	}
	args := []string{"-m", "sim.bridge", "--task", o.Task, "--modbus", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--map", o.MapFile, "--level", o.Level, "--seed", fmt.Sprint(o.Seed)}
	if o.Camera != "" {
		args = append(args, "--camera-size", o.Camera)
	}
	if o.CamName != "" {
		args = append(args, "--camera", o.CamName)
	}
	if o.View != "" {
		args = append(args, "--view-size", o.View)
	}
	if o.Watch != "" {
		args = append(args, "--watch-camera", o.Watch)
	}
	if o.MaxSteps > 0 {
		args = append(args, "--max-steps", fmt.Sprint(o.MaxSteps))
	}
	if o.Lockstep {
		args = append(args, "--lockstep")
	} else if o.RateHz > 0 {
		args = append(args, "--rate", fmt.Sprint(o.RateHz))
	}
	cmd := exec.Command(py, args...)
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	if os.Getenv("MUJOCO_GL") == "" {
		cmd.Env = append(cmd.Env, "MUJOCO_GL=osmesa", "PYOPENGL_PLATFORM=osmesa")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	cmd.Stderr = logw
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sim: start bridge: %w", err)
	}
	b := &Bridge{cmd: cmd, done: make(chan error, 1), client: &http.Client{Timeout: 30 * time.Second}}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		got := false
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if !got && strings.HasPrefix(line, "{") {
				err := json.Unmarshal([]byte(line), b)
				if err == nil && (b.Modbus == "" || b.HTTP == "") {
					err = fmt.Errorf("ready line lacks addresses: %s", line)
				}
				got = true
				ready <- err
				continue
			}
			fmt.Fprintln(logw, line)
		}
		if !got {
			ready <- errors.New("bridge exited before it was ready (see its log above)")
		}
	}()
	go func() { b.done <- cmd.Wait() }()
	select {
	case err := <-ready:
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("sim: bridge: %w", err)
		}
		return b, nil
	case <-time.After(120 * time.Second):
		b.Close()
		return nil, errors.New("sim: bridge not ready after 120 s")
	case <-ctx.Done():
		b.Close()
		return nil, ctx.Err()
	}
}

// Close stops the bridge (SIGTERM to its process group, SIGKILL after 5 s).
func (b *Bridge) Close() {
	if b.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
	}
}

// Episode is the bridge's episode status.
type Episode struct {
	Task         string  `json:"task"`
	Level        string  `json:"level"`
	PendingLevel string  `json:"pending_level"` // level of the next reset ("": the current one)
	Seed         int     `json:"seed"`
	Episode      int     `json:"episode"` // episodes since the bridge started, from 1
	Step         int     `json:"step"`
	Success      bool    `json:"success"`
	SuccessStep  *int    `json:"success_step"` // step of the first success; nil: none yet
	Return       float64 `json:"return"`
	Done         bool    `json:"done"` // success or truncated at the step limit
}

func (b *Bridge) do(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		buf, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+b.HTTP+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return fmt.Errorf("sim: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("sim: %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// Reset starts a new episode. An empty task or level keeps the current
// task, and takes the pending level (SetLevel) or else the current one;
// fault ("" for none, or one of simFaults) is injected from environment
// step faultStep.
func (b *Bridge) Reset(ctx context.Context, task, level string, seed int, fault string, faultStep int) (Episode, error) {
	var ep Episode
	req := map[string]any{"seed": seed}
	if task != "" {
		req["task"] = task
	}
	if level != "" {
		req["level"] = level
	}
	if fault != "" {
		req["fault"], req["fault_step"] = fault, faultStep
	}
	err := b.do(ctx, http.MethodPost, "/episode/reset", req, &ep)
	return ep, err
}

// SetLevel sets the OOD level of the next reset, or with now resets at
// once at that level with the next seed (POST /episode/level, docs/sim.md).
func (b *Bridge) SetLevel(ctx context.Context, level string, now bool) (Episode, error) {
	var ep Episode
	err := b.do(ctx, http.MethodPost, "/episode/level", map[string]any{"level": level, "now": now}, &ep)
	return ep, err
}

// Episode reads the current episode status.
func (b *Bridge) Episode(ctx context.Context) (Episode, error) {
	var ep Episode
	err := b.do(ctx, http.MethodGet, "/episode", nil, &ep)
	return ep, err
}

// StreamURL is the bridge camera's MJPEG stream.
func (b *Bridge) StreamURL() string { return "http://" + b.HTTP + "/stream" }
