package telemetry

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// Scope is what a token allows.
type Scope int

// Scopes, each including the ones before it.
const (
	ScopeNone  Scope = iota // no or unknown token
	ScopeView               // watch, read telemetry and metrics, press STOP
	ScopeReset              // also RESET
)

func (s Scope) String() string {
	switch s {
	case ScopeView:
		return "view"
	case ScopeReset:
		return "reset"
	}
	return "none"
}

// Tokens holds the two access tokens.
type Tokens struct {
	View  string `yaml:"view"`
	Reset string `yaml:"reset"`
}

// Scope returns what token allows, comparing in constant time.
func (t Tokens) Scope(token string) Scope {
	if token == "" {
		return ScopeNone
	}
	// Evaluate both comparisons to keep timing independent of which matched.
	r := t.Reset != "" && subtle.ConstantTimeCompare([]byte(token), []byte(t.Reset)) == 1
	v := t.View != "" && subtle.ConstantTimeCompare([]byte(token), []byte(t.View)) == 1
	switch {
	case r:
		return ScopeReset
	case v:
		return ScopeView
	}
	return ScopeNone
}

// newToken returns 32 random bytes, base64url without padding.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("telemetry: generate token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// LoadTokens resolves the tokens of cfg: configured tokens win; missing ones
// are read from cfg.TokenFile; if that file does not exist, fresh tokens are
// generated, written to it (mode 0600) and described once on announce
// (nil: not printed). generated reports whether that happened.
func LoadTokens(cfg AuthConfig, announce io.Writer) (t Tokens, generated bool, err error) {
	t = Tokens{View: cfg.ViewToken, Reset: cfg.ResetToken}
	if t.View != "" && t.Reset != "" {
		return t, false, nil
	}
	if cfg.TokenFile == "" {
		return t, false, errors.New("telemetry: auth: no token configured and no auth.token_file to keep a generated one")
	}
	b, err := os.ReadFile(cfg.TokenFile)
	switch {
	case err == nil:
		var f Tokens
		if err := yaml.Unmarshal(b, &f); err != nil {
			return t, false, fmt.Errorf("telemetry: auth: token file %s: %w — fix it or delete it to generate new tokens", cfg.TokenFile, err)
		}
		if t.View == "" {
			t.View = f.View
		}
		if t.Reset == "" {
			t.Reset = f.Reset
		}
		if len(t.View) < 16 || len(t.Reset) < 16 || t.View == t.Reset {
			return t, false, fmt.Errorf("telemetry: auth: token file %s needs distinct 'view' and 'reset' tokens of at least 16 characters — delete it to generate new ones", cfg.TokenFile)
		}
		return t, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return t, false, fmt.Errorf("telemetry: auth: read token file: %w", err)
	}
	if t.View == "" {
		if t.View, err = newToken(); err != nil {
			return t, false, err
		}
	}
	if t.Reset == "" {
		if t.Reset, err = newToken(); err != nil {
			return t, false, err
		}
	}
	out, err := yaml.Marshal(t)
	if err != nil {
		return t, false, fmt.Errorf("telemetry: auth: %w", err)
	}
	if dir := filepath.Dir(cfg.TokenFile); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return t, false, fmt.Errorf("telemetry: auth: create token directory: %w", err)
		}
	}
	f, err := os.OpenFile(cfg.TokenFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return t, false, fmt.Errorf("telemetry: auth: write token file: %w — is the directory writable by the service user?", err)
	}
	if _, err := f.Write(out); err != nil {
		f.Close()
		return t, false, fmt.Errorf("telemetry: auth: write token file: %w", err)
	}
	if err := f.Close(); err != nil {
		return t, false, fmt.Errorf("telemetry: auth: write token file: %w", err)
	}
	if announce != nil {
		fmt.Fprintf(announce, "telemetry: generated access tokens (stored in %s, shown only now)\n  view+stop:        %s\n  view+stop+reset:  %s\n  open http://<robot>:<port>/#token=<token>\n",
			cfg.TokenFile, t.View, t.Reset)
	}
	return t, true, nil
}

// bearer extracts the token from "Authorization: Bearer <token>".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	const p = "Bearer "
	if len(h) > len(p) && strings.EqualFold(h[:len(p)], p) {
		return strings.TrimSpace(h[len(p):])
	}
	return ""
}
