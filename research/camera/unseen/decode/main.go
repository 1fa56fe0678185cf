// Command decode turns a folder of JPEG frames into the RGB the runtime's
// camera loop decodes from them (camera.ToRGB), and the RGB libjpeg would
// not: the frames one after another, raw 8-bit RGB, in name order.
//
//	go run ./research/camera/unseen/decode DIR OUT.rgb
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/energyflow/edge/camera"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: decode DIR OUT.rgb")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "decode:", err)
		os.Exit(1)
	}
}

func run(dir, out string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.jpg"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%s: no .jpg frames", dir)
	}
	sort.Strings(files)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	var dec camera.JPEGDecoder
	var rgb camera.RGB
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		if err := camera.ToRGB(&rgb, &camera.Frame{Format: camera.FormatJPEG, Data: b}, &dec, camera.RangeLimited); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if _, err := f.Write(rgb.Pix); err != nil {
			return err
		}
	}
	return f.Close()
}
