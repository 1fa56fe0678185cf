// Package manifestedit rewrites keys of a bundle's manifest.json while the
// rest of the file keeps its keys' order and its values' exact text (the
// training toolkit's float32 digits included). It works on generic JSON and
// does not depend on package engines' manifest types: the TensorRT engine
// builder records plans with it, `energyflow sim calibrate` the closed-loop
// calibration.
package manifestedit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Object is a JSON object with its keys in file order. The zero value is an
// empty object.
type Object struct {
	keys []string
	vals map[string]json.RawMessage
}

// Parse reads one JSON object; anything after it is an error.
func Parse(data []byte) (*Object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("want a JSON object")
	}
	o := &Object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("want an object key, got %v", tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		o.SetRaw(key, raw)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the top-level object")
	}
	return o, nil
}

// Raw returns key's value as written (nil when missing).
func (o *Object) Raw(key string) json.RawMessage { return o.vals[key] }

// Get decodes key into v; a missing or null key leaves v alone and returns
// false.
func (o *Object) Get(key string, v any) (bool, error) {
	raw, ok := o.vals[key]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return true, fmt.Errorf("manifest key %q: %w", key, err)
	}
	return true, nil
}

// Set replaces key's value with v marshalled, or appends key.
func (o *Object) Set(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	o.SetRaw(key, raw)
	return nil
}

// SetRaw replaces key's value with raw JSON, or appends key.
func (o *Object) SetRaw(key string, raw json.RawMessage) {
	if o.vals == nil {
		o.vals = map[string]json.RawMessage{}
	}
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = raw
}

// Delete removes key (nothing when missing).
func (o *Object) Delete(key string) {
	if _, ok := o.vals[key]; !ok {
		return
	}
	delete(o.vals, key)
	for i, k := range o.keys {
		if k == key {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			break
		}
	}
}

// Marshal writes the object indented by indent per level, with a final
// newline.
func (o *Object) Marshal(indent string) ([]byte, error) {
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, o.compact()); err != nil {
		return nil, err
	}
	if err := json.Indent(&out, compact.Bytes(), "", indent); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// compact is the object as one line, for nesting with SetRaw.
func (o *Object) compact() []byte {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(o.vals[k])
	}
	buf.WriteByte('}')
	return buf.Bytes()
}

// MarshalJSON makes an Object a value of another (SetRaw or Set of a nested
// object keeps its keys' order).
func (o *Object) MarshalJSON() ([]byte, error) {
	var out bytes.Buffer
	err := json.Compact(&out, o.compact())
	return out.Bytes(), err
}
