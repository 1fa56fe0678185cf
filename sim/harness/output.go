package harness

import "io"

// Output is where a sim command prints: its results on Stdout, progress,
// warnings and the logs on Stderr.
type Output struct {
	Stdout, Stderr io.Writer
}
