package main

import (
	"context"
	"fmt"
)

// cmdRun is a placeholder until its package lands; it says so and fails.
func cmdRun(_ context.Context, env *cliEnv, _ []string) int {
	fmt.Fprintln(env.stderr, "energyflow run: not built yet")
	return exitFailure
}
