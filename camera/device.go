package camera

import (
	"path/filepath"
	"strings"
)

// ByIDDir is where udev publishes stable camera names.
const ByIDDir = "/dev/v4l/by-id"

// DevicePath returns the path cfg names: the by-id link when set (a bare
// name is looked up in /dev/v4l/by-id), else Device.
func DevicePath(cfg Config) string {
	if cfg.ByID != "" {
		if strings.HasPrefix(cfg.ByID, "/") {
			return cfg.ByID
		}
		return filepath.Join(ByIDDir, cfg.ByID)
	}
	return cfg.Device
}

// Device describes one V4L2 capture node for `camera list`.
type Device struct {
	Path    string       `json:"path"`
	ByID    []string     `json:"by_id,omitempty"`
	Name    string       `json:"name,omitempty"`
	Bus     string       `json:"bus,omitempty"`
	Formats []FormatDesc `json:"formats,omitempty"`
	Err     string       `json:"error,omitempty"`
}

// FormatDesc is one pixel format with its sizes and rates.
type FormatDesc struct {
	Format      string   `json:"format"`
	Description string   `json:"description"`
	Sizes       []string `json:"sizes"`
}
