package main

import (
	"context"
	"fmt"
)

// cmdBench is a placeholder until its package lands; it says so and fails.
func cmdBench(_ context.Context, env *cliEnv, _ []string) int {
	fmt.Fprintln(env.stderr, "energyflow bench: not built yet")
	return exitFailure
}
