package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
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
// key is reported with its line.
func decodeStrict(file string, data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(v)
	if err == nil || errors.Is(err, io.EOF) { // an empty file means all defaults
		return nil
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var errs []error
		for _, msg := range te.Errors {
			errs = append(errs, parseYAMLMsg(file, msg))
		}
		return errors.Join(errs...)
	}
	return parseYAMLMsg(file, err.Error())
}

var yamlLineRE = regexp.MustCompile(`line (\d+): (.*)`)

func parseYAMLMsg(file, msg string) error {
	msg = strings.TrimPrefix(msg, "yaml: ")
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		inner := m[2]
		inner = strings.Replace(inner, "field ", "unknown key ", 1)
		inner = strings.Replace(inner, " not found in type ", " (not a field of ", 1)
		if strings.Contains(inner, "(not a field of ") {
			inner += ")"
		}
		return &ConfigError{File: file, Line: line, Err: errors.New(inner)}
	}
	return &ConfigError{File: file, Err: errors.New(msg)}
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
