package runtime

import (
	"io"
	"log/slog"
)

// NewLogger returns the logger the log section asks for, writing to w:
// text (the default) or JSON records, at its level (info when the level is
// empty or unknown; Config.Validate refuses an unknown one).
func NewLogger(w io.Writer, c LogConfig) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level))
	o := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}
