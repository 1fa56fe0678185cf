package camera

import (
	"fmt"
	"strings"
	"testing"
)

// The frames are the simulator's, rendered by testdata/gen_view_shift.py
// from the bundles' camera (topview, 96×96): ref at the scene's reset, arm
// 30 expert steps later, scene another scene's reset, knocked the arm
// frame's scene with the camera knocked 5 cm and 5° (the camera_shift fault).
var viewTasks = []string{"button-press", "drawer-open", "hammer"}

func viewFrame(t *testing.T, task, name string) *RGB {
	return readPNG(t, "view/"+task+"-"+name+".png")
}

// brighter returns img with every sample raised by d (clipped): another
// exposure of the same view.
func brighter(img *RGB, d int) *RGB {
	out := NewRGB(img.Width, img.Height)
	for i, p := range img.Pix {
		out.Pix[i] = byte(min(255, int(p)+d))
	}
	return out
}

func TestViewWatchSimulatorFrames(t *testing.T) {
	for _, task := range viewTasks {
		ref, arm, scene, knocked := viewFrame(t, task, "ref"), viewFrame(t, task, "arm"), viewFrame(t, task, "scene"), viewFrame(t, task, "knocked")
		cases := []struct {
			name   string
			frames []*RGB
			moved  []bool // after each frame past the first
		}{
			{"the arm moves", []*RGB{ref, arm, ref, arm}, []bool{false, false, false}},
			{"another scene", []*RGB{ref, scene, arm, scene}, []bool{false, false, false}},
			{"another exposure", []*RGB{ref, brighter(ref, 25), brighter(arm, 25)}, []bool{false, false}},
			{"knocked, then put back", []*RGB{ref, arm, knocked, knocked, arm}, []bool{false, true, true, false}},
			{"knocked while the arm moves", []*RGB{ref, knocked, brighter(knocked, 10)}, []bool{true, true}},
		}
		for _, c := range cases {
			t.Run(task+"/"+c.name, func(t *testing.T) {
				v, err := NewViewWatch(ViewWatchConfig{})
				if err != nil {
					t.Fatal(err)
				}
				if st := v.Observe(c.frames[0]); st.Moved || st.Tiles != 36 {
					t.Fatalf("first frame: %+v, want not moved, 36 tiles", st)
				}
				for i, f := range c.frames[1:] {
					st := v.Observe(f)
					if st.Moved != c.moved[i] {
						t.Errorf("frame %d: %+v (fraction %.2f), want moved %v", i+1, st, st.Fraction(), c.moved[i])
					}
				}
			})
		}
	}
}

// viewStep is one frame of a sequence and whether the view should read
// moved after it.
type viewStep struct {
	name  string
	frame *RGB
	moved bool
}

// observeSteps feeds v the frames in turn and checks each status.
func observeSteps(t *testing.T, v *ViewWatch, steps ...viewStep) {
	t.Helper()
	for _, s := range steps {
		if st := v.Observe(s.frame); st.Moved != s.moved {
			t.Fatalf("%s: %+v (fraction %.2f), want moved %v", s.name, st, st.Fraction(), s.moved)
		}
	}
}

// A tile that holds other content for Rereference frames takes it as its
// reference; a knock is measured against the new reference, and while the
// view is moved nothing is re-referenced (the knocked view never becomes
// the reference).
func TestViewWatchRereference(t *testing.T) {
	ref, arm, knocked := viewFrame(t, "button-press", "ref"), viewFrame(t, "button-press", "arm"), viewFrame(t, "button-press", "knocked")
	v, err := NewViewWatch(ViewWatchConfig{Rereference: 3})
	if err != nil {
		t.Fatal(err)
	}
	steps := []viewStep{{"reference", ref, false}}
	for range 4 {
		steps = append(steps, viewStep{"arm", arm, false})
	}
	// the arm's tiles now match the arm frame: back at the reset they differ
	// from their new reference, but only a few tiles stop matching at once
	steps = append(steps, viewStep{"back to the reset frame", ref, false})
	for range 7 {
		steps = append(steps, viewStep{"knocked", knocked, true})
	}
	observeSteps(t, v, steps...)
}

// Rebase takes the next frame as the reference: a scene replaced on
// purpose is not a moved view, a knock after it is.
func TestViewWatchRebase(t *testing.T) {
	ref, scene, knocked := viewFrame(t, "drawer-open", "ref"), viewFrame(t, "drawer-open", "scene"), viewFrame(t, "drawer-open", "knocked")
	v, _ := NewViewWatch(ViewWatchConfig{})
	observeSteps(t, v, viewStep{"reference", ref, false}, viewStep{"knocked", knocked, true})
	v.Rebase()
	observeSteps(t, v, viewStep{"the first frame after Rebase", scene, false}, viewStep{"the new scene again", scene, false},
		viewStep{"knocked after Rebase", knocked, true})
}

// A change of frame size restarts the watch; frames too small for a tile
// are ignored.
func TestViewWatchSizes(t *testing.T) {
	ref, knocked := viewFrame(t, "hammer", "ref"), viewFrame(t, "hammer", "knocked")
	v, _ := NewViewWatch(ViewWatchConfig{})
	v.Observe(ref)
	if st := v.Observe(NewRGB(8, 8)); st != (ViewStatus{}) {
		t.Fatalf("8×8 frame: %+v, want the zero status", st)
	}
	small := NewRGB(64, 64)
	v.Observe(small)
	if st := v.Observe(knocked); st.Moved || st.Tiles != 36 {
		t.Fatalf("first 96×96 frame after a 64×64 one: %+v, want a fresh start", st)
	}
}

func TestNewViewWatchRefuses(t *testing.T) {
	for _, c := range []struct {
		cfg  ViewWatchConfig
		want string
	}{
		{ViewWatchConfig{Trigger: 1.5}, "trigger 1.5"},
		{ViewWatchConfig{Trigger: -0.1}, "trigger -0.1"},
		{ViewWatchConfig{TileSize: 2}, "tile size 2"},
		{ViewWatchConfig{TileTolerance: 300}, "tile tolerance 300"},
		{ViewWatchConfig{Rereference: -1}, "rereference -1"},
	} {
		t.Run(fmt.Sprint(c.cfg), func(t *testing.T) {
			_, err := NewViewWatch(c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one naming %q", err, c.want)
			}
		})
	}
}

func BenchmarkViewWatch96(b *testing.B) {
	ref := readPNG(b, "view/button-press-ref.png")
	arm := readPNG(b, "view/button-press-arm.png")
	v, _ := NewViewWatch(ViewWatchConfig{})
	v.Observe(ref)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			v.Observe(arm)
		} else {
			v.Observe(ref)
		}
	}
}
