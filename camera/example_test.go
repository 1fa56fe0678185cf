package camera_test

import (
	"context"
	"fmt"
	"time"

	"github.com/energyflow/edge/camera"
)

// A recording drives the same chain the runtime uses with a live camera:
// Source → Pipeline → History, then a window of T_o observations.
func Example() {
	cfg := camera.Config{Replay: camera.ReplayConfig{File: "testdata/clip_160x120.mjpeg"}}
	src, err := camera.Open(cfg, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close() // the application owns the source

	spec, err := camera.PreprocessFromSlices([]int{104, 104}, []int{96, 96}, "RGB",
		[]float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225})
	if err != nil {
		fmt.Println(err)
		return
	}
	pipe, _ := camera.NewPipeline(spec, cfg.PipelineOptions()...)
	info := src.Info()
	hist := camera.NewHistory(2, spec.TensorLen(info.Width, info.Height)) // T_o = 2

	capture := camera.NewCapture(src, pipe, hist, camera.CaptureOptions{StaleAfter: time.Second})
	capture.Start(context.Background())
	<-capture.Done() // a live source runs until Halt; this recording ends
	defer capture.Halt(context.Background())

	window := make([]camera.Obs, 2)
	if err := hist.Window(window); err != nil {
		fmt.Println(err)
		return
	}
	st := capture.Status()
	fmt.Printf("state %s, %d frames; window seq %d,%d; tensor %d floats (3×96×96)\n",
		st.State, st.Frames, window[0].Seq, window[1].Seq, len(window[1].Tensor))
	// Output: state ended, 3 frames; window seq 2,3; tensor 27648 floats (3×96×96)
}

// Converting one frame by hand, e.g. for the live view.
func ExamplePipeline() {
	src, _ := camera.Open(camera.Config{Width: 160, Height: 120,
		Replay: camera.ReplayConfig{File: "testdata/clip_160x120.yuyv"}}, nil)
	defer src.Close()
	spec := camera.Preprocess{Resize: [2]int{60, 80}, Crop: [2]int{48, 64}, Std: [3]float32{1, 1, 1}}
	pipe, _ := camera.NewPipeline(spec) // YUYV as BT.601 limited range
	var f camera.Frame
	if err := src.Read(context.Background(), &f); err != nil {
		fmt.Println(err)
		return
	}
	tensor := make([]float32, pipe.TensorLen(f.Width, f.Height))
	img, err := pipe.Process(tensor, &f)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%v %dx%d → RGB %dx%d → tensor 3×48×64 = %d\n", f.Format, f.Width, f.Height, img.Width, img.Height, len(tensor))
	// Output: YUYV 160x120 → RGB 160x120 → tensor 3×48×64 = 9216
}
