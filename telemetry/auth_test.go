package telemetry_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/telemetry"
)

func TestTokensGeneratedOncePersistedAndPrintedOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sub", "tokens.yaml")
	var out bytes.Buffer
	tok, gen, err := telemetry.LoadTokens(telemetry.AuthConfig{TokenFile: file}, &out)
	if err != nil || !gen {
		t.Fatalf("first start: gen=%v err=%v", gen, err)
	}
	if len(tok.View) < 32 || len(tok.Reset) < 32 || tok.View == tok.Reset {
		t.Fatalf("weak tokens %+v", tok)
	}
	if !strings.Contains(out.String(), tok.View) || !strings.Contains(out.String(), tok.Reset) {
		t.Fatalf("tokens not printed: %q", out.String())
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v err %v", st.Mode(), err)
	}
	out.Reset()
	tok2, gen, err := telemetry.LoadTokens(telemetry.AuthConfig{TokenFile: file}, &out)
	if err != nil || gen || tok2 != tok {
		t.Fatalf("second start: %+v gen=%v err=%v", tok2, gen, err)
	}
	if out.Len() != 0 {
		t.Fatalf("tokens printed again: %q", out.String())
	}
	// A configured token wins over the file.
	tok3, _, _ := telemetry.LoadTokens(telemetry.AuthConfig{ViewToken: "configured-view-token-123", TokenFile: file}, nil)
	if tok3.View != "configured-view-token-123" || tok3.Reset != tok.Reset {
		t.Fatalf("configured token: %+v", tok3)
	}
}

func TestTokenFileCorrupt(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	os.WriteFile(file, []byte("view: short\n"), 0o600)
	if _, _, err := telemetry.LoadTokens(telemetry.AuthConfig{TokenFile: file}, nil); err == nil {
		t.Fatal("weak token file accepted")
	}
	os.WriteFile(file, []byte(":::\n\t["), 0o600)
	if _, _, err := telemetry.LoadTokens(telemetry.AuthConfig{TokenFile: file}, nil); err == nil {
		t.Fatal("corrupt token file accepted")
	}
}

func TestScopes(t *testing.T) {
	tok := telemetry.Tokens{View: "view-token-0123456789", Reset: "reset-token-0123456789"}
	for token, want := range map[string]telemetry.Scope{
		"": telemetry.ScopeNone, "x": telemetry.ScopeNone, "view-token-012345678": telemetry.ScopeNone,
		tok.View: telemetry.ScopeView, tok.Reset: telemetry.ScopeReset, tok.View + " ": telemetry.ScopeNone,
	} {
		if got := tok.Scope(token); got != want {
			t.Errorf("Scope(%q) = %v, want %v", token, got, want)
		}
	}
}
