package main

import (
	"context"
	"fmt"
)

// cmdConfig is a placeholder until its package lands; it says so and fails.
func cmdConfig(_ context.Context, env *cliEnv, _ []string) int {
	fmt.Fprintln(env.stderr, "energyflow config: not built yet")
	return exitFailure
}
