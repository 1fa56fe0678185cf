package runtime

import _ "embed"

//go:embed config.example.yaml
var exampleConfig []byte

// ExampleConfig returns the commented example configuration printed by
// `energyflow config example`.
func ExampleConfig() []byte { return append([]byte(nil), exampleConfig...) }
