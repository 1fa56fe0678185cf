// Package vpx is a small cgo wrapper of libvpx's VP8 encoder tuned for live
// streaming: realtime deadline, constant bitrate, one encoder thread, no
// look-ahead (lag 0), and keyframes on request.
//
// # Concepts
//
// An Encoder takes I420 (YUV 4:2:0 planar, BT.601 limited range) frames of a
// fixed, even size and returns one compressed VP8 frame per input. It is not
// safe for concurrent use: one goroutine owns it. Close releases the libvpx
// context and is idempotent.
//
// libvpx comes from Debian's libvpx-dev (found with pkg-config).
package vpx

/*
#cgo pkg-config: vpx
#include <stdlib.h>
#include <string.h>
#include <vpx/vpx_encoder.h>
#include <vpx/vp8cx.h>

typedef struct {
	vpx_codec_ctx_t ctx;
	vpx_image_t img;
	int w, h;
} efvpx;

static int efvpx_open(efvpx *e, int w, int h, int fps, int kbps, int cpu_used, int kf_dist) {
	vpx_codec_enc_cfg_t cfg;
	memset(e, 0, sizeof(*e));
	if (vpx_codec_enc_config_default(vpx_codec_vp8_cx(), &cfg, 0) != VPX_CODEC_OK) return -1;
	cfg.g_w = w;
	cfg.g_h = h;
	cfg.g_timebase.num = 1;
	cfg.g_timebase.den = fps;
	cfg.g_threads = 1;
	cfg.g_lag_in_frames = 0;
	cfg.g_pass = VPX_RC_ONE_PASS;
	cfg.g_error_resilient = VPX_ERROR_RESILIENT_DEFAULT;
	cfg.rc_end_usage = VPX_CBR;
	cfg.rc_target_bitrate = kbps;
	cfg.rc_min_quantizer = 4;
	cfg.rc_max_quantizer = 56;
	cfg.rc_undershoot_pct = 95;
	cfg.rc_overshoot_pct = 15;
	cfg.rc_buf_sz = 1000;
	cfg.rc_buf_initial_sz = 500;
	cfg.rc_buf_optimal_sz = 600;
	cfg.rc_dropframe_thresh = 0;
	cfg.kf_mode = VPX_KF_AUTO;
	cfg.kf_min_dist = 0;
	cfg.kf_max_dist = kf_dist;
	if (vpx_codec_enc_init(&e->ctx, vpx_codec_vp8_cx(), &cfg, 0) != VPX_CODEC_OK) return -2;
	vpx_codec_control(&e->ctx, VP8E_SET_CPUUSED, cpu_used);
	vpx_codec_control(&e->ctx, VP8E_SET_NOISE_SENSITIVITY, 0);
	vpx_codec_control(&e->ctx, VP8E_SET_STATIC_THRESHOLD, 1);
	vpx_codec_control(&e->ctx, VP8E_SET_MAX_INTRA_BITRATE_PCT, 300);
	e->w = w;
	e->h = h;
	return 0;
}

// efvpx_encode encodes one I420 frame and copies the compressed frame into
// out. Returns the number of bytes written, 0 if the encoder produced no
// frame, -1 on an encoder error, -2 if out is too small.
static int efvpx_encode(efvpx *e, unsigned char *i420, long long pts, int force_kf,
		unsigned char *out, int out_cap, int *is_key) {
	vpx_image_t *img = vpx_img_wrap(&e->img, VPX_IMG_FMT_I420, e->w, e->h, 1, i420);
	if (img == NULL) return -1;
	vpx_enc_frame_flags_t flags = force_kf ? VPX_EFLAG_FORCE_KF : 0;
	if (vpx_codec_encode(&e->ctx, img, pts, 1, flags, VPX_DL_REALTIME) != VPX_CODEC_OK) return -1;
	vpx_codec_iter_t iter = NULL;
	const vpx_codec_cx_pkt_t *pkt;
	int n = 0;
	*is_key = 0;
	while ((pkt = vpx_codec_get_cx_data(&e->ctx, &iter)) != NULL) {
		if (pkt->kind != VPX_CODEC_CX_FRAME_PKT) continue;
		int sz = (int)pkt->data.frame.sz;
		if (n + sz > out_cap) return -2;
		memcpy(out + n, pkt->data.frame.buf, sz);
		n += sz;
		if (pkt->data.frame.flags & VPX_FRAME_IS_KEY) *is_key = 1;
	}
	return n;
}

static const char *efvpx_error(efvpx *e) {
	const char *d = vpx_codec_error_detail(&e->ctx);
	return d ? d : vpx_codec_error(&e->ctx);
}

static void efvpx_close(efvpx *e) { vpx_codec_destroy(&e->ctx); }

// efvpx_rgb_to_i420: packed RGB24 → I420, BT.601 limited range, chroma
// averaged over 2×2 blocks. w and h even.
static void efvpx_rgb_to_i420(const unsigned char *src, int w, int h, unsigned char *dst) {
	unsigned char *yp = dst, *up = dst + w * h, *vp = up + (w / 2) * (h / 2);
	int cw = w / 2;
	for (int y = 0; y < h; y += 2) {
		const unsigned char *a = src + (size_t)y * w * 3, *b = a + (size_t)w * 3;
		unsigned char *y0 = yp + (size_t)y * w, *y1 = y0 + w;
		unsigned char *cu = up + (size_t)(y / 2) * cw, *cv = vp + (size_t)(y / 2) * cw;
		for (int cx = 0; cx < cw; cx++, a += 6, b += 6) {
			int ra = a[0], ga = a[1], ba = a[2], rb = a[3], gb = a[4], bb = a[5];
			int rc = b[0], gc = b[1], bc = b[2], rd = b[3], gd = b[4], bd = b[5];
			y0[2 * cx] = (unsigned char)(((66 * ra + 129 * ga + 25 * ba + 128) >> 8) + 16);
			y0[2 * cx + 1] = (unsigned char)(((66 * rb + 129 * gb + 25 * bb + 128) >> 8) + 16);
			y1[2 * cx] = (unsigned char)(((66 * rc + 129 * gc + 25 * bc + 128) >> 8) + 16);
			y1[2 * cx + 1] = (unsigned char)(((66 * rd + 129 * gd + 25 * bd + 128) >> 8) + 16);
			int sr = (ra + rb + rc + rd + 2) >> 2, sg = (ga + gb + gc + gd + 2) >> 2, sb = (ba + bb + bc + bd + 2) >> 2;
			cu[cx] = (unsigned char)(((-38 * sr - 74 * sg + 112 * sb + 128) >> 8) + 128);
			cv[cx] = (unsigned char)(((112 * sr - 94 * sg - 18 * sb + 128) >> 8) + 128);
		}
	}
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Errors returned by the encoder.
var (
	// ErrClosed is returned by Encode after Close.
	ErrClosed = errors.New("vpx: encoder closed")
	// ErrFrameSize is returned when the I420 buffer does not match the size.
	ErrFrameSize = errors.New("vpx: I420 buffer has the wrong size")
)

// Config sets up an encoder. Zero fields take the defaults noted.
type Config struct {
	Width, Height int // even, required
	FPS           int // frames per second the rate control plans for; default 15
	BitrateKbps   int // target bitrate; default 1000
	// CPUUsed is libvpx's speed/quality trade-off for realtime, -16…16;
	// negative values mean "adaptive, at least this fast". Default -8.
	CPUUsed int
	// KeyframeInterval is the longest run of frames without a keyframe;
	// default 10 s worth of frames.
	KeyframeInterval int
}

func (c Config) withDefaults() Config {
	if c.FPS <= 0 {
		c.FPS = 15
	}
	if c.BitrateKbps <= 0 {
		c.BitrateKbps = 1000
	}
	if c.CPUUsed == 0 {
		c.CPUUsed = -8
	}
	if c.KeyframeInterval <= 0 {
		c.KeyframeInterval = 10 * c.FPS
	}
	return c
}

// Encoder is a VP8 encoder. One goroutine owns it.
type Encoder struct {
	c      *C.efvpx
	cfg    Config
	pts    int64
	closed bool
}

// I420Size is the byte size of a w×h I420 frame.
func I420Size(w, h int) int { return w*h + 2*((w+1)/2)*((h+1)/2) }

// NewEncoder opens a VP8 encoder.
func NewEncoder(cfg Config) (*Encoder, error) {
	cfg = cfg.withDefaults()
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width%2 != 0 || cfg.Height%2 != 0 || cfg.Width > 4096 || cfg.Height > 4096 {
		return nil, fmt.Errorf("vpx: frame size %dx%d: width and height must be even and in 2…4096", cfg.Width, cfg.Height)
	}
	if cfg.CPUUsed < -16 || cfg.CPUUsed > 16 {
		return nil, fmt.Errorf("vpx: cpu_used %d out of range -16…16", cfg.CPUUsed)
	}
	c := (*C.efvpx)(C.calloc(1, C.size_t(unsafe.Sizeof(C.efvpx{}))))
	if c == nil {
		return nil, errors.New("vpx: out of memory")
	}
	if rc := C.efvpx_open(c, C.int(cfg.Width), C.int(cfg.Height), C.int(cfg.FPS), C.int(cfg.BitrateKbps), C.int(cfg.CPUUsed), C.int(cfg.KeyframeInterval)); rc != 0 {
		C.free(unsafe.Pointer(c))
		return nil, fmt.Errorf("vpx: init VP8 encoder %dx%d failed (code %d) — is libvpx built with the VP8 encoder?", cfg.Width, cfg.Height, int(rc))
	}
	return &Encoder{c: c, cfg: cfg}, nil
}

// Config returns the encoder's configuration with defaults filled in.
func (e *Encoder) Config() Config { return e.cfg }

// Encode compresses one I420 frame. forceKey asks for a keyframe. The
// compressed frame is written into dst (grown if needed) and returned;
// key reports whether it is a keyframe. An empty frame means the encoder
// chose to skip this input.
func (e *Encoder) Encode(i420 []byte, forceKey bool, dst []byte) (frame []byte, key bool, err error) {
	if e.closed {
		return nil, false, ErrClosed
	}
	if len(i420) != I420Size(e.cfg.Width, e.cfg.Height) {
		return nil, false, fmt.Errorf("%w: got %d bytes, want %d for %dx%d", ErrFrameSize, len(i420), I420Size(e.cfg.Width, e.cfg.Height), e.cfg.Width, e.cfg.Height)
	}
	if cap(dst) < len(i420) {
		dst = make([]byte, len(i420))
	}
	dst = dst[:cap(dst)]
	var isKey C.int
	fk := C.int(0)
	if forceKey {
		fk = 1
	}
	n := C.efvpx_encode(e.c, (*C.uchar)(unsafe.Pointer(&i420[0])), C.longlong(e.pts), fk,
		(*C.uchar)(unsafe.Pointer(&dst[0])), C.int(len(dst)), &isKey)
	e.pts++
	switch {
	case n == -2:
		return nil, false, errors.New("vpx: compressed frame larger than the output buffer")
	case n < 0:
		return nil, false, fmt.Errorf("vpx: encode: %s", C.GoString(C.efvpx_error(e.c)))
	}
	return dst[:n], isKey != 0, nil
}

// Close releases the encoder. It is idempotent.
func (e *Encoder) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	C.efvpx_close(e.c)
	C.free(unsafe.Pointer(e.c))
	e.c = nil
	return nil
}

// RGBToI420 converts a packed 8-bit RGB frame (w×h, both even) into dst,
// an I420 buffer of I420Size(w, h) bytes, with BT.601 limited-range
// coefficients (what VP8 decoders assume) and 2×2-averaged chroma.
func RGBToI420(dst, rgb []byte, w, h int) error {
	if w <= 0 || h <= 0 || w%2 != 0 || h%2 != 0 {
		return fmt.Errorf("vpx: RGBToI420: size %dx%d must be positive and even", w, h)
	}
	if len(rgb) < w*h*3 || len(dst) < I420Size(w, h) {
		return fmt.Errorf("%w: RGBToI420 %dx%d: rgb %d bytes, dst %d bytes", ErrFrameSize, w, h, len(rgb), len(dst))
	}
	C.efvpx_rgb_to_i420((*C.uchar)(unsafe.Pointer(&rgb[0])), C.int(w), C.int(h), (*C.uchar)(unsafe.Pointer(&dst[0])))
	return nil
}

// KeyframeInfo parses the header of a VP8 frame (RFC 6386 §9.1). ok is
// false for an inter frame or a malformed buffer.
func KeyframeInfo(frame []byte) (width, height int, ok bool) {
	if len(frame) < 10 || frame[0]&1 != 0 {
		return 0, 0, false
	}
	if frame[3] != 0x9d || frame[4] != 0x01 || frame[5] != 0x2a {
		return 0, 0, false
	}
	width = int(frame[6]) | int(frame[7]&0x3f)<<8
	height = int(frame[8]) | int(frame[9]&0x3f)<<8
	return width, height, true
}
