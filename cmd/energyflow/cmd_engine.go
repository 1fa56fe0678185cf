package main

import (
	"context"
	"fmt"
)

// cmdEngine is a placeholder until its package lands; it says so and fails.
func cmdEngine(_ context.Context, env *cliEnv, _ []string) int {
	fmt.Fprintln(env.stderr, "energyflow engine: not built yet")
	return exitFailure
}
