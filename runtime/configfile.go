package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/mitchellh/go-homedir"
	"gopkg.in/yaml.v3"
)

// ErrNoConfig is returned by FindConfig when no configuration file exists in
// any of the searched places.
var ErrNoConfig = errors.New("runtime: no configuration file found")

// ConfigSearchPath lists, in order, where FindConfig looks when --config is
// not given.
func ConfigSearchPath() []string {
	return []string{"~/.config/energyflow/config.yaml", "/etc/energyflow/config.yaml"}
}

// FindConfig returns the configuration file to use: explicit if not empty
// (it must exist), else the first existing file of ConfigSearchPath.
func FindConfig(explicit string) (string, error) {
	if explicit != "" {
		p, err := ExpandPath(explicit)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("runtime: config %s: %w", explicit, err)
		}
		return p, nil
	}
	var tried []string
	for _, c := range ConfigSearchPath() {
		p, err := ExpandPath(c)
		if err != nil {
			continue
		}
		tried = append(tried, p)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (tried %s; write one with 'energyflow config example > FILE' and pass --config FILE)", ErrNoConfig, strings.Join(tried, ", "))
}

// ExpandPath expands a leading ~ with go-homedir. Empty stays empty.
func ExpandPath(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	e, err := homedir.Expand(p)
	if err != nil {
		return "", fmt.Errorf("runtime: expand %q: %w", p, err)
	}
	return e, nil
}

// ConfigError is one problem in a configuration file, located by key and line.
type ConfigError struct {
	File string
	Line int    // 0 when unknown
	Key  string // dotted path, e.g. "safety.energy.threshold"
	Err  error
}

func (e *ConfigError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	if e.Key != "" {
		return fmt.Sprintf("%s: %s: %v", loc, e.Key, e.Err)
	}
	return fmt.Sprintf("%s: %v", loc, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// keyError reports a problem with key found after validation (e.g. when the
// bundle is loaded): a *ConfigError with the file and line when the config
// came from a file.
func (c *Config) keyError(key string, err error) error {
	if c.file == "" {
		return fmt.Errorf("runtime: config: %s: %w", key, err)
	}
	return &ConfigError{File: c.file, Line: c.lines[key], Key: key, Err: err}
}

// decodeStrict decodes YAML into v, rejecting unknown keys. Every unknown
// key is reported with its line and its YAML path (robot.adress), with the
// nearest valid key when one is close ("did you mean robot.address?").
func decodeStrict(file string, data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(v)
	if err == nil || errors.Is(err, io.EOF) { // an empty file means all defaults
		return nil
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		lines := keyLines(data)
		var errs []error
		for _, msg := range te.Errors {
			errs = append(errs, parseYAMLMsg(file, msg, lines, reflect.TypeOf(v)))
		}
		return errors.Join(errs...)
	}
	return parseYAMLMsg(file, err.Error(), nil, nil)
}

var (
	yamlLineRE    = regexp.MustCompile(`line (\d+): (.*)`)
	yamlUnknownRE = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
)

// parseYAMLMsg turns one of yaml's messages into a ConfigError with its
// line; an unknown key is named by its YAML path, found in lines (dotted
// path → line) on the message's line, with a suggestion from root's fields.
func parseYAMLMsg(file, msg string, lines map[string]int, root reflect.Type) error {
	msg = strings.TrimPrefix(msg, "yaml: ")
	m := yamlLineRE.FindStringSubmatch(msg)
	if m == nil {
		return &ConfigError{File: file, Err: errors.New(msg)}
	}
	line, _ := strconv.Atoi(m[1])
	inner := m[2]
	u := yamlUnknownRE.FindStringSubmatch(inner)
	if u == nil {
		return &ConfigError{File: file, Line: line, Err: errors.New(inner)}
	}
	path := u[1]
	for p, l := range lines {
		if l == line && (p == u[1] || strings.HasSuffix(p, "."+u[1])) && len(p) > len(path) {
			path = p
		}
	}
	text := "unknown key " + path
	parent := ""
	if i := strings.LastIndex(path, "."); i >= 0 {
		parent = path[:i]
	}
	if root != nil {
		valid := yamlKeysAt(root, parent)
		if near := nearestKey(u[1], valid); near != "" {
			if parent != "" {
				near = parent + "." + near
			}
			text += " (did you mean " + near + "?)"
		} else if len(valid) > 0 {
			text += " (valid keys here: " + strings.Join(valid, ", ") + ")"
		}
	}
	return &ConfigError{File: file, Line: line, Err: errors.New(text)}
}

// yamlKeysAt lists the YAML keys a struct type accepts at a dotted path
// ("" for the top level), following inline structs; nil when the path does
// not lead to a struct (a map, a list, an unknown section).
func yamlKeysAt(t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if path != "" {
		head, rest, _ := strings.Cut(path, ".")
		if strings.Contains(head, "[") {
			return nil
		}
		f, ok := yamlField(t, head)
		if !ok {
			return nil
		}
		return yamlKeysAt(f, rest)
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case strings.Contains(opts, "inline"):
			keys = append(keys, yamlKeysAt(f.Type, "")...)
		case name != "":
			keys = append(keys, name)
		default:
			keys = append(keys, strings.ToLower(f.Name))
		}
	}
	sort.Strings(keys)
	return keys
}

// yamlField is the type of struct t's field with YAML key name.
func yamlField(t reflect.Type, name string) (reflect.Type, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") {
			if ft, ok := yamlField(f.Type, name); ok {
				return ft, true
			}
			continue
		}
		if key == "" {
			key = strings.ToLower(f.Name)
		}
		if key == name && f.IsExported() {
			return f.Type, true
		}
	}
	return nil, false
}

// nearestKey is the key of valid closest to k in edit distance when close
// enough to be a typo (2 edits, 3 for keys longer than 6 bytes), or one that
// k begins (rate → rate_hz); "" otherwise.
func nearestKey(k string, valid []string) string {
	limit := 2
	if len(k) > 6 {
		limit = 3
	}
	best, bestD := "", limit+1
	for _, v := range valid {
		d := editDistance(k, v)
		if strings.HasPrefix(v, k) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = v, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// keyLines maps every dotted key path of a YAML document to its line.
func keyLines(data []byte) map[string]int {
	var root yaml.Node
	lines := map[string]int{}
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return lines
	}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if prefix != "" {
					k = prefix + "." + k
				}
				lines[k] = n.Content[i].Line
				walk(n.Content[i+1], k)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				k := fmt.Sprintf("%s[%d]", prefix, i)
				lines[k] = c.Line
				walk(c, k)
			}
		}
	}
	walk(root.Content[0], "")
	return lines
}

// locate turns a section's validation error into ConfigErrors with key and
// line. Validators report problems as "key: message" (or "key.sub: ...",
// optionally prefixed by "package: "); each joined error becomes one
// ConfigError under the section.
func locate(file, section string, lines map[string]int, err error) []error {
	if err == nil {
		return nil
	}
	var parts []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			parts = append(parts, locate(file, section, lines, e)...)
		}
		return parts
	}
	msg := err.Error()
	// A package that prefixes its messages with its own name, the section's
	// (telemetry: listen: …), would otherwise print it twice.
	if tok, tail, ok := strings.Cut(msg, ": "); ok && section != "" && tok == section {
		msg = tail
	}
	key := section
	// Strip a leading "pkg: " prefix, then take a leading key token.
	rest := msg
	for i := 0; i < 2; i++ {
		tok, tail, ok := strings.Cut(rest, ": ")
		if !ok || strings.ContainsAny(tok, " \t") {
			break
		}
		cand := tok
		if section != "" && !strings.HasPrefix(cand, section+".") && cand != section {
			cand = section + "." + tok
		}
		if _, found := lines[cand]; found {
			key, rest = cand, tail
			break
		}
		rest = tail
	}
	line := lines[key]
	if key == section && line == 0 {
		line = lines[section]
	}
	if key != section {
		msg = rest
	}
	return []error{&ConfigError{File: file, Line: line, Key: key, Err: errors.New(msg)}}
}

// resolvePath expands ~ and makes p absolute relative to base (the config
// file's directory).
func resolvePath(base, p string) (string, error) {
	if p == "" {
		return "", nil
	}
	e, err := ExpandPath(p)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(e) && base != "" {
		e = filepath.Join(base, e)
	}
	return e, nil
}
