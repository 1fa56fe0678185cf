package main

import (
	"context"
	"fmt"
)

// cmdCamera is a placeholder until its package lands; it says so and fails.
func cmdCamera(_ context.Context, env *cliEnv, _ []string) int {
	fmt.Fprintln(env.stderr, "energyflow camera: not built yet")
	return exitFailure
}
