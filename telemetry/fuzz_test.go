package telemetry

import (
	"errors"
	"testing"
)

// FuzzParseOffer checks that signaling input never panics and is either
// accepted or refused with errBadOffer.
func FuzzParseOffer(f *testing.F) {
	for _, s := range []string{
		`{"type":"offer","sdp":"v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=rtpmap:96 VP8/90000\r\n"}`,
		`{"type":"offer","sdp":"v=0"}`, `{}`, `[`, "\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := parseOffer(b); err != nil && !errors.Is(err, errBadOffer) {
			t.Fatalf("error not errBadOffer: %v", err)
		}
	})
}
