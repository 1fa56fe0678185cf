package telemetry_test

import (
	"context"
	"log/slog"
	"time"

	"github.com/energyflow/edge/telemetry"
	"github.com/energyflow/edge/telemetry/gpu"
	"github.com/energyflow/edge/telemetry/telemetrytest"
)

// The runtime builds the server once, feeds it from the control loop and the
// camera pipeline, and serves it until shutdown.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.Default()

	cfg := telemetry.DefaultConfig() // normally read from the YAML config
	cfg.Auth.TokenFile = "/var/lib/energyflow/telemetry-tokens.yaml"
	g := gpu.Open("/", log) // NVML, Jetson sysfs, or "no GPU"
	defer g.Close()

	var safety telemetry.Controller = &telemetrytest.FakeController{} // the runtime's safety adapter
	srv, err := telemetry.New(cfg, telemetry.Options{Controller: safety, GPU: g, Logger: log.With("part", "telemetry")})
	if err != nil {
		log.Error("telemetry", "err", err)
		return
	}
	defer srv.Close()
	go srv.ListenAndServe(ctx)

	// In the control loop, once per tick:
	m := srv.Metrics()
	m.ObserveTick(4*time.Millisecond, 150*time.Microsecond)
	m.ObserveInference(60 * time.Millisecond)
	m.ObserveEnergy(0.8, 2.0)
	srv.Publish(telemetry.Sample{Tick: 1, Time: time.Now(), Energy: 0.8, Threshold: 2.0, State: telemetry.StateRunning,
		LoopRateHz: 10, InferenceLatency: 60 * time.Millisecond})

	// In the camera pipeline, per frame (never blocks):
	frame := make([]byte, 640*480*3)
	srv.SubmitFrame(frame, 640, 480, time.Now())

	// When the safety layer trips:
	m.SafetyTrip("energy")
	srv.PublishEvent(telemetry.Event{Kind: "trip", Reason: "energy above threshold", Actor: "safety",
		Energy: 2.3, Threshold: 2.0, Trace: []float64{1.1, 1.6, 2.3}})
}
