package manifestedit_test

import (
	"strings"
	"testing"

	"github.com/energyflow/edge/engines/manifestedit"
)

func TestEditKeepsOrderAndText(t *testing.T) {
	tests := []struct {
		name, in, key string
		val           any
		want          string
	}{
		{"replace keeps order and digits", `{"b": 0.10000000149011612, "a": [1, 2]}`, "a", []int{3},
			"{\n \"b\": 0.10000000149011612,\n \"a\": [\n  3\n ]\n}\n"},
		{"append a new key", `{"b": 1}`, "c", map[string]int{"x": 1}, "{\n \"b\": 1,\n \"c\": {\n  \"x\": 1\n }\n}\n"},
		{"nested object keeps its order", `{"cal": null}`, "cal", mustParse(t, `{"z": 1, "a": 2}`),
			"{\n \"cal\": {\n  \"z\": 1,\n  \"a\": 2\n }\n}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := mustParse(t, tt.in)
			if err := o.Set(tt.key, tt.val); err != nil {
				t.Fatal(err)
			}
			got, err := o.Marshal(" ")
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{`[1]`, `{"a": 1} {}`, `{"a": }`, ``} {
		if _, err := manifestedit.Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%q) accepted", in)
		}
	}
	var o manifestedit.Object // the zero value is an empty object
	o.SetRaw("k", []byte(`true`))
	if got, _ := o.Marshal(""); !strings.Contains(string(got), `"k": true`) {
		t.Errorf("zero Object: %s", got)
	}
}

func mustParse(t *testing.T, s string) *manifestedit.Object {
	t.Helper()
	o, err := manifestedit.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestDelete(t *testing.T) {
	tests := []struct{ name, in, key, want string }{
		{"middle key", `{"a": 1, "b": 2, "c": 3}`, "b", "{\n \"a\": 1,\n \"c\": 3\n}\n"},
		{"missing key", `{"a": 1}`, "z", "{\n \"a\": 1\n}\n"},
		{"first key", `{"a": 1, "b": 2}`, "a", "{\n \"b\": 2\n}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := mustParse(t, tt.in)
			o.Delete(tt.key)
			got, err := o.Marshal(" ")
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}
