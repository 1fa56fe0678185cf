package telemetry

import (
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the Prometheus collectors of the robot, in a registry of its
// own (the global default registry is never used). The runtime observes
// through the methods below; all are safe for concurrent use and cheap
// enough for the control loop.
type Metrics struct {
	reg *prometheus.Registry

	tickDuration  prometheus.Histogram
	tickJitter    prometheus.Histogram
	tickOverruns  prometheus.Counter
	inference     prometheus.Histogram
	stageLatency  *prometheus.HistogramVec
	planLateP90   prometheus.Gauge
	planLateLimit prometheus.Gauge
	plansLate     prometheus.Gauge
	lateSpells    prometheus.Counter
	wasLate       atomic.Bool
	energy        prometheus.Gauge
	threshold     prometheus.Gauge
	energyDist    prometheus.Histogram
	trips         *prometheus.CounterVec
	recovering    prometheus.Gauge
	recoveries    *prometheus.CounterVec
	modbusRTT     *prometheus.HistogramVec
	modbusErrors  *prometheus.CounterVec

	framesCaptured prometheus.Counter
	framesEncoded  prometheus.Counter
	framesDropped  *prometheus.CounterVec
	dropBusy       prometheus.Counter
	dropRate       prometheus.Counter
	dropInvalid    prometheus.Counter
	encodeDuration prometheus.Histogram
	sendDelay      prometheus.Histogram
	keyframes      prometheus.Counter
	viewers        prometheus.Gauge
	dcDropped      prometheus.Counter
	authFailures   prometheus.Counter
}

// Metric name prefix.
const ns = "energyflow"

// MetricsOptions tunes the collectors to what they will measure.
type MetricsOptions struct {
	// EnergyBuckets are the upper bounds of energy_score_distribution's
	// buckets, increasing; nil: DefaultEnergyBuckets. Energies scale with
	// the bundle (hundreds for the shipped ones), so the runtime derives
	// them from the bundle's calibration.
	EnergyBuckets []float64
}

// DefaultEnergyBuckets are the energy histogram's bounds when nothing says
// what energies to expect: −10 … 20 in steps of 1.
func DefaultEnergyBuckets() []float64 { return prometheus.LinearBuckets(-10, 1, 31) }

// NewMetrics builds the collectors with the default options.
func NewMetrics() *Metrics { return NewMetricsWith(MetricsOptions{}) }

// NewMetricsWith builds the collectors in a fresh registry, together with
// the Go runtime and process collectors.
func NewMetricsWith(o MetricsOptions) *Metrics {
	eb := o.EnergyBuckets
	if len(eb) == 0 {
		eb = DefaultEnergyBuckets()
	}
	ms := func(lo float64, n int) []float64 { return prometheus.ExponentialBuckets(lo, 2, n) }
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		tickDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "tick_duration_seconds",
			Help: "Time spent in one control tick.", Buckets: ms(0.0005, 12)}),
		tickJitter: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "tick_jitter_seconds",
			Help: "Absolute lateness of a tick start against its deadline.", Buckets: ms(0.0001, 12)}),
		tickOverruns: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "tick_overruns_total",
			Help: "Ticks that ended after the next tick's deadline."}),
		inference: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "inference_latency_seconds",
			Help: "Policy inference latency (all sampler steps of one action chunk).", Buckets: ms(0.001, 12)}),
		stageLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "stage_latency_seconds",
			Help:    "Latency of one stage of the control path: camera_decode, preprocess, encoder (per camera frame), sample, sample_step (per plan), rescore, state_term, command_write, arm_read (per tick).",
			Buckets: ms(0.00005, 16)}, []string{"stage"}),
		planLateP90: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "plan_late_p90_periods",
			Help: "p90 of the recent plans' inference latency, in control periods (NaN until ten plans have finished)."}),
		planLateLimit: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "plan_late_limit_periods",
			Help: "p90 lateness past which the loop warns that the energy stop's calibration does not hold (NaN: no limit)."}),
		plansLate: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "plans_late",
			Help: "1 while the recent plans' p90 is past plan_late_limit_periods (the loop has warned), else 0."}),
		lateSpells: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "plan_late_spells_total",
			Help: "Times the recent plans' p90 passed plan_late_limit_periods."}),
		energy: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "energy_score",
			Help: "Latest energy score the safety monitor compares with the threshold (NaN: none, e.g. a policy without an energy)."}),
		threshold: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "energy_threshold",
			Help: "Energy score at which the safety monitor stops the arm (NaN: no energy stop)."}),
		energyDist: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "energy_score_distribution",
			Help: "Distribution of energy scores.", Buckets: eb}),
		trips: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "safety_trips_total",
			Help: "Safety stops by reason (a small fixed set of reasons)."}, []string{"reason"}),
		recovering: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "recovery_active",
			Help: "1 while the safety gate is in recovery mode (the operator drives the arm out of an energy stop), else 0."}),
		recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "recoveries_total",
			Help: "Recoveries by how they ended: rearmed (scores back under the threshold), timeout, stopped (operator), fault."}, []string{"end"}),
		modbusRTT: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "modbus_round_trip_seconds",
			Help: "Modbus request/response round trips.", Buckets: ms(0.0002, 12)}, []string{"op"}),
		modbusErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "modbus_errors_total",
			Help: "Failed Modbus requests."}, []string{"op"}),
		framesCaptured: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: "telemetry", Name: "frames_captured_total",
			Help: "Frames submitted to the live view."}),
		framesEncoded: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: "telemetry", Name: "frames_encoded_total",
			Help: "Frames encoded and sent to viewers."}),
		framesDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "telemetry", Name: "frames_dropped_total",
			Help: "Frames not encoded: busy (encoder still working), rate (above video.fps), invalid (bad size)."}, []string{"reason"}),
		encodeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: "telemetry", Name: "encode_duration_seconds",
			Help: "Overlay, colour conversion and VP8 encoding of one frame.", Buckets: ms(0.0005, 10)}),
		sendDelay: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: "telemetry", Name: "send_delay_seconds",
			Help:    "From a frame's capture time to its packets handed to a viewer's transport (the server's part of glass-to-glass delay).",
			Buckets: ms(0.002, 10)}),
		keyframes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: "telemetry", Name: "keyframes_total",
			Help: "Keyframes sent (viewer joined, PLI/FIR, or interval)."}),
		viewers: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: "telemetry", Name: "viewers",
			Help: "Connected WebRTC viewers."}),
		dcDropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: "telemetry", Name: "datachannel_dropped_total",
			Help: "Telemetry messages not sent because a viewer's data channel was backed up or the queue was full."}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: "telemetry", Name: "auth_failures_total",
			Help: "Requests refused for a missing or wrong token."}),
	}
	// No energy until one is observed (and never for a policy without an
	// energy, or with the monitor disabled): NaN, not a fake 0.
	m.energy.Set(math.NaN())
	m.threshold.Set(math.NaN())
	m.planLateP90.Set(math.NaN())
	m.planLateLimit.Set(math.NaN())
	m.dropBusy = m.framesDropped.WithLabelValues("busy")
	m.dropRate = m.framesDropped.WithLabelValues("rate")
	m.dropInvalid = m.framesDropped.WithLabelValues("invalid")
	for _, end := range recoveryEnds {
		m.recoveries.WithLabelValues(end) // present at 0 from the start, for alerts
	}
	m.reg.MustRegister(m.tickDuration, m.tickJitter, m.tickOverruns, m.inference, m.stageLatency,
		m.planLateP90, m.planLateLimit, m.plansLate, m.lateSpells, m.energy, m.threshold, m.energyDist,
		m.trips, m.recovering, m.recoveries, m.modbusRTT, m.modbusErrors, m.framesCaptured, m.framesEncoded, m.framesDropped, m.encodeDuration,
		m.sendDelay, m.keyframes, m.viewers, m.dcDropped, m.authFailures,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry, for adding collectors of other packages.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, MaxRequestsInFlight: 4, Timeout: 5 * time.Second})
}

// ObserveTick records one control tick: how long it took and how late it
// started against its deadline (jitter, sign ignored).
func (m *Metrics) ObserveTick(duration, jitter time.Duration) {
	if jitter < 0 {
		jitter = -jitter
	}
	m.tickDuration.Observe(duration.Seconds())
	m.tickJitter.Observe(jitter.Seconds())
}

// TickOverrun counts a tick that ran past the next deadline.
func (m *Metrics) TickOverrun() { m.tickOverruns.Inc() }

// ObserveInference records the latency of one policy inference.
func (m *Metrics) ObserveInference(d time.Duration) { m.inference.Observe(d.Seconds()) }

// ObserveStage records one run of a stage of the control path; stage is
// a label from a small fixed set ("sample", "encoder", … as the runtime's
// Stage names them). It allocates nothing.
func (m *Metrics) ObserveStage(stage string, d time.Duration) {
	m.stageLatency.WithLabelValues(stage).Observe(d.Seconds())
}

// ObservePlanLateness records, after a finished plan, the p90 of the
// recent plans' latency in control periods (NaN: too few yet), the limit
// past which the loop warns (NaN or 0: none), and whether the p90 is past
// it; a change from in time to late counts a late spell.
func (m *Metrics) ObservePlanLateness(p90, limit float64, late bool) {
	if limit <= 0 {
		limit = math.NaN()
	}
	m.planLateP90.Set(p90)
	m.planLateLimit.Set(limit)
	if late {
		m.plansLate.Set(1)
	} else {
		m.plansLate.Set(0)
	}
	if was := m.wasLate.Swap(late); late && !was {
		m.lateSpells.Inc()
	}
}

// ObserveEnergy records the latest energy score and the threshold in force.
func (m *Metrics) ObserveEnergy(score, threshold float64) {
	m.energy.Set(score)
	m.threshold.Set(threshold)
	m.energyDist.Observe(score)
}

// SafetyTrip counts a safety stop. reason must come from a small fixed set
// ("energy", "limits", "watchdog", "operator", …): it is a label.
func (m *Metrics) SafetyTrip(reason string) { m.trips.WithLabelValues(reason).Inc() }

// recoveryEnds are the values of recoveries_total's "end" label.
var recoveryEnds = [...]string{"rearmed", "timeout", "stopped", "fault"}

// RecoveryStarted sets recovery_active: the gate entered recovery mode.
func (m *Metrics) RecoveryStarted() { m.recovering.Set(1) }

// RecoveryEnded clears recovery_active and counts the recovery under end,
// one of "rearmed", "timeout", "stopped" or "fault".
func (m *Metrics) RecoveryEnded(end string) {
	m.recovering.Set(0)
	m.recoveries.WithLabelValues(end).Inc()
}

// ObserveModbus records one Modbus round trip; op is a small fixed label
// ("read", "write"); a non-nil err counts an error.
func (m *Metrics) ObserveModbus(op string, d time.Duration, err error) {
	if err != nil {
		m.modbusErrors.WithLabelValues(op).Inc()
		return
	}
	m.modbusRTT.WithLabelValues(op).Observe(d.Seconds())
}
