package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/pion/ice/v2"
	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v3"
)

// viewer is one WebRTC peer watching the stream.
type viewer struct {
	id        uint64
	remote    string
	scope     Scope
	pc        *webrtc.PeerConnection
	dc        *webrtc.DataChannel
	dcOpen    atomic.Bool
	connected atomic.Bool
	dropped   atomic.Bool
	sink      *videoSink
}

// newAPI builds the pion API with the ICE settings of the mode.
func newAPI(c ICEConfig) (*webrtc.API, error) {
	var se webrtc.SettingEngine
	se.SetICETimeouts(3*time.Second, 6*time.Second, time.Second)
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4, webrtc.NetworkTypeUDP6})
	switch c.Mode {
	case ICELoopback:
		se.SetIncludeLoopbackCandidate(true)
		se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
		se.SetInterfaceFilter(func(name string) bool { return name == "lo" })
		se.SetIPFilter(func(ip net.IP) bool { return ip.IsLoopback() })
		se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	default:
		// Browsers hide their host addresses behind mDNS names; resolve them.
		se.SetICEMulticastDNSMode(ice.MulticastDNSModeQueryOnly)
		if len(c.Interfaces) > 0 {
			names := slices.Clone(c.Interfaces)
			se.SetInterfaceFilter(func(name string) bool { return slices.Contains(names, name) })
		}
	}
	if c.UDPPortMin != 0 {
		if err := se.SetEphemeralUDPPortRange(c.UDPPortMin, c.UDPPortMax); err != nil {
			return nil, fmt.Errorf("telemetry: ice.udp_port_min/max: %w", err)
		}
	}
	if len(c.NAT1To1IPs) > 0 {
		se.SetNAT1To1IPs(c.NAT1To1IPs, webrtc.ICECandidateTypeHost)
	}
	var me webrtc.MediaEngine
	if err := me.RegisterCodec(webrtc.RTPCodecParameters{
		RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000,
			RTCPFeedback: []webrtc.RTCPFeedback{{Type: "goog-remb"}, {Type: "ccm", Parameter: "fir"}, {Type: "nack"}, {Type: "nack", Parameter: "pli"}}},
		PayloadType: 96,
	}, webrtc.RTPCodecTypeVideo); err != nil {
		return nil, fmt.Errorf("telemetry: register VP8: %w", err)
	}
	ir := &interceptor.Registry{}
	if err := webrtc.RegisterDefaultInterceptors(&me, ir); err != nil {
		return nil, fmt.Errorf("telemetry: interceptors: %w", err)
	}
	return webrtc.NewAPI(webrtc.WithSettingEngine(se), webrtc.WithMediaEngine(&me), webrtc.WithInterceptorRegistry(ir)), nil
}

// offerRequest is the signaling request body: the browser's
// RTCSessionDescription.
type offerRequest struct {
	Type string `json:"type"`
	SDP  string `json:"sdp"`
}

// Signaling errors answered with 400.
var (
	errBadOffer = errors.New("telemetry: bad offer")
	errFull     = errors.New("telemetry: too many viewers")
)

// validateOffer checks an SDP offer before pion sees it: well-formed SDP,
// a bounded number of media sections, a video section that accepts VP8.
func validateOffer(text string) error {
	if text == "" {
		return fmt.Errorf("%w: empty sdp", errBadOffer)
	}
	if !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
		return fmt.Errorf("%w: sdp is not UTF-8 text", errBadOffer)
	}
	if !strings.HasPrefix(text, "v=0") {
		return fmt.Errorf("%w: sdp must start with v=0", errBadOffer)
	}
	var sd sdp.SessionDescription
	if err := sd.Unmarshal([]byte(text)); err != nil {
		return fmt.Errorf("%w: %v", errBadOffer, err)
	}
	if n := len(sd.MediaDescriptions); n == 0 || n > 8 {
		return fmt.Errorf("%w: %d media sections (want 1…8)", errBadOffer, n)
	}
	vp8 := false
	for _, m := range sd.MediaDescriptions {
		if m.MediaName.Media != "video" {
			continue
		}
		for _, a := range m.Attributes {
			if a.Key == "rtpmap" && strings.Contains(strings.ToUpper(a.Value), "VP8/90000") {
				vp8 = true
			}
		}
	}
	if !vp8 {
		return fmt.Errorf("%w: no video section accepting VP8", errBadOffer)
	}
	return nil
}

// parseOffer decodes and validates a signaling request body.
func parseOffer(body []byte) (webrtc.SessionDescription, error) {
	var req offerRequest
	dec := json.NewDecoder(strings.NewReader(string(body)))
	if err := dec.Decode(&req); err != nil {
		return webrtc.SessionDescription{}, fmt.Errorf("%w: JSON: %v", errBadOffer, err)
	}
	if dec.More() {
		return webrtc.SessionDescription{}, fmt.Errorf("%w: trailing data after the JSON object", errBadOffer)
	}
	if req.Type != "offer" {
		return webrtc.SessionDescription{}, fmt.Errorf("%w: type %.20q, want \"offer\"", errBadOffer, req.Type)
	}
	if err := validateOffer(req.SDP); err != nil {
		return webrtc.SessionDescription{}, err
	}
	return webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: req.SDP}, nil
}

// answer creates a viewer for offer and returns the SDP answer (with every
// ICE candidate: non-trickle). Errors wrapping errBadOffer mean the offer
// was refused by pion.
func (s *Server) answer(ctx context.Context, offer webrtc.SessionDescription, remote string, scope Scope) (sd webrtc.SessionDescription, err error) {
	s.vMu.Lock()
	if len(s.viewers) >= s.cfg.MaxViewers {
		s.vMu.Unlock()
		return sd, errFull
	}
	s.nextID++
	v := &viewer{id: s.nextID, remote: remote, scope: scope}
	s.viewers[v.id] = v
	s.vMu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: pion: %v", errBadOffer, r)
		}
		if err != nil {
			s.dropViewer(v)
		}
	}()

	pc, err := s.api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return sd, fmt.Errorf("telemetry: new peer connection: %w", err)
	}
	v.pc = pc
	sink, err := s.video.addSink()
	if err != nil {
		return sd, fmt.Errorf("telemetry: video track: %w", err)
	}
	v.sink = sink
	sender, err := pc.AddTrack(sink)
	if err != nil {
		return sd, fmt.Errorf("telemetry: add track: %w", err)
	}
	go s.readRTCP(sender)
	negotiated, id := true, uint16(0)
	dc, err := pc.CreateDataChannel("telemetry", &webrtc.DataChannelInit{Negotiated: &negotiated, ID: &id})
	if err != nil {
		return sd, fmt.Errorf("telemetry: data channel: %w", err)
	}
	v.dc = dc
	dc.OnOpen(func() {
		v.dcOpen.Store(true)
		if err := dc.SendText(string(s.hello(v.scope))); err != nil {
			s.log.Debug("hello", "err", err)
		}
	})
	dc.OnClose(func() { v.dcOpen.Store(false) })
	pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		s.log.Debug("viewer state", "id", v.id, "remote", v.remote, "state", st.String())
		switch st {
		case webrtc.PeerConnectionStateConnected:
			if !v.connected.Swap(true) {
				s.metrics.viewers.Set(float64(s.connected.Add(1)))
				s.log.Info("viewer connected", "id", v.id, "remote", v.remote, "scope", v.scope.String())
			}
			s.video.requestKeyframe()
		case webrtc.PeerConnectionStateFailed, webrtc.PeerConnectionStateClosed:
			go s.dropViewer(v)
		}
	})
	if err := pc.SetRemoteDescription(offer); err != nil {
		return sd, fmt.Errorf("%w: %v", errBadOffer, err)
	}
	ans, err := pc.CreateAnswer(nil)
	if err != nil {
		return sd, fmt.Errorf("%w: create answer: %v", errBadOffer, err)
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(ans); err != nil {
		return sd, fmt.Errorf("telemetry: set local description: %w", err)
	}
	t := time.NewTimer(s.cfg.ICE.GatherTimeout)
	defer t.Stop()
	select {
	case <-gathered:
	case <-t.C:
		s.log.Warn("ICE gathering timed out; answering with the candidates so far")
	case <-ctx.Done():
		return sd, ctx.Err()
	}
	// A viewer that never connects is dropped.
	time.AfterFunc(20*time.Second, func() {
		if !v.connected.Load() {
			s.dropViewer(v)
		}
	})
	return *pc.LocalDescription(), nil
}

// readRTCP serves keyframe requests (PLI, FIR) of one viewer until its
// sender stops.
func (s *Server) readRTCP(sender *webrtc.RTPSender) {
	for {
		pkts, _, err := sender.ReadRTCP()
		if err != nil {
			return
		}
		for _, p := range pkts {
			switch p.(type) {
			case *rtcp.PictureLossIndication, *rtcp.FullIntraRequest:
				s.video.requestKeyframe()
			}
		}
	}
}

// dropViewer closes and forgets v; safe to call more than once.
func (s *Server) dropViewer(v *viewer) {
	if v.dropped.Swap(true) {
		return
	}
	s.vMu.Lock()
	delete(s.viewers, v.id)
	s.vMu.Unlock()
	if v.connected.Load() {
		s.metrics.viewers.Set(float64(s.connected.Add(-1)))
		s.log.Info("viewer left", "id", v.id, "remote", v.remote)
	}
	v.dcOpen.Store(false)
	if v.sink != nil {
		s.video.removeSink(v.sink)
	}
	if v.pc != nil {
		v.pc.Close()
	}
}

// hello is the first data-channel message to a viewer.
func (s *Server) hello(scope Scope) []byte {
	b := []byte(`{"type":"hello","scope":`)
	b = appendString(b, scope.String())
	b = fmt.Appendf(b, `,"can_reset":%t,"video":{"width":%d,"height":%d,"fps":%d},"events":`,
		scope >= ScopeReset, s.cfg.Video.Width, s.cfg.Video.Height, s.cfg.Video.FPS)
	b = s.appendEvents(b)
	s.statsMu.Lock()
	if s.lastStat != nil {
		b = append(b, `,"stats":`...)
		b = append(b, s.lastStat...)
	}
	s.statsMu.Unlock()
	return append(b, '}')
}

func (s *Server) appendEvents(b []byte) []byte {
	s.evMu.Lock()
	defer s.evMu.Unlock()
	b = append(b, '[')
	for i := range s.events {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEventJSON(b, &s.events[i], false)
	}
	return append(b, ']')
}
