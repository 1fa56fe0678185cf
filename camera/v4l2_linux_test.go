//go:build linux

package camera

import (
	"testing"
	"unsafe"
)

// The G_FMT ioctl struct must match the kernel's struct v4l2_format.
func TestV4L2FormatLayout(t *testing.T) {
	want := uintptr(204)
	if unsafe.Sizeof(uintptr(0)) == 8 {
		want = 208
	}
	if got := unsafe.Sizeof(v4l2Format{}); got != want {
		t.Errorf("sizeof(v4l2Format) = %d, want %d", got, want)
	}
	if got := unsafe.Sizeof(v4l2PixFormat{}); got != 48 {
		t.Errorf("sizeof(v4l2PixFormat) = %d, want 48", got)
	}
	if unsafe.Sizeof(uintptr(0)) == 8 && vidiocGFmt != 0xc0d05604 {
		t.Errorf("VIDIOC_G_FMT = %#x, want 0xc0d05604", vidiocGFmt)
	}
	if _, err := getFormat("/dev/video-energyflow-missing"); err == nil {
		t.Error("getFormat on a missing device succeeded")
	}
}
