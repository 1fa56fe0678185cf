package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/jpeg"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/energyflow/edge/camera"
)

const cameraUsage = `usage: energyflow camera <subcommand> [flags]

subcommands:
  list       list V4L2 cameras: paths, /dev/v4l/by-id names, formats, sizes, rates
  snapshot   capture one frame to a PNG (or JPEG) file, from a V4L2 device,
             an MJPEG stream URL or a recording

Run 'energyflow camera <subcommand> --help' for its flags.`

// cmdCamera helps a person set up the robot's camera.
func cmdCamera(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(env.stderr, cameraUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	switch args[0] {
	case "list":
		return cameraList(ctx, env, args[1:])
	case "snapshot":
		return cameraSnapshot(ctx, env, args[1:])
	}
	fmt.Fprintf(env.stderr, "energyflow camera: unknown subcommand %q (want list or snapshot)\n", args[0])
	return exitUsage
}

func cameraList(_ context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("camera list", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: energyflow camera list [--json]\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitUsage
	}
	devs, err := camera.List()
	if err != nil {
		fmt.Fprintf(env.stderr, "energyflow camera list: %v\n", err)
		return exitFailure
	}
	if *asJSON {
		if devs == nil {
			devs = []camera.Device{}
		}
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(devs)
		return exitOK
	}
	if len(devs) == 0 {
		fmt.Fprintln(env.stdout, "no V4L2 cameras found (no /dev/video* nodes): is the camera plugged in and its driver (uvcvideo) loaded?")
		return exitOK
	}
	for _, d := range devs {
		fmt.Fprintf(env.stdout, "%s", d.Path)
		if d.Name != "" {
			fmt.Fprintf(env.stdout, "  %q", d.Name)
		}
		if d.Bus != "" {
			fmt.Fprintf(env.stdout, "  (%s)", d.Bus)
		}
		fmt.Fprintln(env.stdout)
		for _, id := range d.ByID {
			fmt.Fprintf(env.stdout, "  by_id: %s\n", id)
		}
		if d.Err != "" {
			fmt.Fprintf(env.stdout, "  not usable: %s\n", d.Err)
		}
		for _, f := range d.Formats {
			fmt.Fprintf(env.stdout, "  %s (%s): %s\n", f.Format, f.Description, strings.Join(f.Sizes, ", "))
		}
	}
	return exitOK
}

// parseSize parses "640x480".
func parseSize(s string) (w, h int, err error) {
	a, b, ok := strings.Cut(strings.ToLower(s), "x")
	if ok {
		w, err = strconv.Atoi(a)
		if err == nil {
			h, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || w <= 0 || h <= 0 {
		return 0, 0, fmt.Errorf("size %q is not WIDTHxHEIGHT (e.g. 640x480)", s)
	}
	return w, h, nil
}

func cameraSnapshot(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("camera snapshot", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	device := fs.String("device", "", "V4L2 device path, e.g. /dev/video0")
	byID := fs.String("by-id", "", "V4L2 device by stable name under /dev/v4l/by-id")
	url := fs.String("url", "", "MJPEG stream URL (multipart/x-mixed-replace), e.g. http://127.0.0.1:8081/stream.mjpg")
	replay := fs.String("replay", "", "recording: a directory of images, an .mjpeg or a .yuyv file")
	format := fs.String("format", "yuyv", "V4L2 pixel format: yuyv or mjpeg")
	size := fs.String("size", "640x480", "capture size WIDTHxHEIGHT (also the frame size of a .yuyv recording)")
	fps := fs.Float64("fps", 30, "V4L2 frame rate")
	yuvRange := fs.String("yuv-range", "limited", "YUYV range: limited (BT.601 studio) or full")
	skip := fs.Int("skip", 5, "frames to discard first (auto exposure settles)")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	out := fs.String("out", "frame.png", "output file (.png, or .jpg to re-encode)")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: energyflow camera snapshot (--device PATH | --by-id NAME | --url URL | --replay PATH) [flags]\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "energyflow camera snapshot: "+format+"\n", a...)
		return exitUsage
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	n := 0
	for _, s := range []string{*device, *byID, *url, *replay} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return usageErr("give exactly one of --device, --by-id, --url, --replay")
	}
	w, h, err := parseSize(*size)
	if err != nil {
		return usageErr("%v", err)
	}
	cfg := camera.Config{Device: *device, ByID: *byID, URL: *url, Format: *format, Width: w, Height: h,
		FPS: *fps, YUVRange: *yuvRange, ReadTimeout: min(*timeout, 5*time.Second)}
	switch {
	case *device != "" || *byID != "":
		cfg.Source = camera.KindV4L2
	case *url != "":
		cfg.Source = camera.KindHTTP
	default:
		cfg.Source = camera.KindReplay
		if st, err := os.Stat(*replay); err == nil && st.IsDir() {
			cfg.Replay.Dir = *replay
		} else {
			cfg.Replay.File = *replay
		}
	}
	if err := cfg.Validate(); err != nil {
		return usageErr("%v", err)
	}
	ext := strings.ToLower(filepath.Ext(*out))
	if ext != ".png" && ext != ".jpg" && ext != ".jpeg" {
		return usageErr("--out %q: want a .png or .jpg file", *out)
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	src, err := camera.Open(cfg, cliLogger(env.stderr))
	if err != nil {
		fmt.Fprintf(env.stderr, "energyflow camera snapshot: %v\n", err)
		return exitFailure
	}
	defer src.Close()

	var f camera.Frame
	got := 0
	for got <= *skip {
		err := src.Read(ctx, &f)
		if err == nil {
			got++
			continue
		}
		if got > 0 && errors.Is(err, io.EOF) {
			break // a short recording: keep the last frame
		}
		if ctx.Err() != nil || errors.Is(err, camera.ErrClosed) || errors.Is(err, io.EOF) {
			if ctx.Err() != nil && got > 0 {
				break
			}
			fmt.Fprintf(env.stderr, "energyflow camera snapshot: no frame: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(env.stderr, "energyflow camera snapshot: %v\n", err)
	}
	var img camera.RGB
	var dec camera.JPEGDecoder
	rng := camera.RangeLimited
	if *yuvRange == "full" {
		rng = camera.RangeFull
	}
	if err := camera.ToRGB(&img, &f, &dec, rng); err != nil {
		fmt.Fprintf(env.stderr, "energyflow camera snapshot: %v\n", err)
		return exitFailure
	}
	file, err := os.Create(*out)
	if err != nil {
		fmt.Fprintf(env.stderr, "energyflow camera snapshot: %v\n", err)
		return exitFailure
	}
	if ext == ".png" {
		err = png.Encode(file, &img)
	} else {
		err = jpeg.Encode(file, &img, &jpeg.Options{Quality: 95})
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "energyflow camera snapshot: write %s: %v\n", *out, err)
		return exitFailure
	}
	info := src.Info()
	rate := ""
	if info.FPS > 0 {
		rate = fmt.Sprintf(" @ %g fps", info.FPS)
	}
	fmt.Fprintf(env.stdout, "wrote %s: %dx%d %v frame #%d from %s (source reports %dx%d%s), captured %v ago\n",
		*out, f.Width, f.Height, f.Format, f.Seq, info.Name, info.Width, info.Height, rate, time.Since(f.Time).Round(time.Millisecond))
	return exitOK
}
