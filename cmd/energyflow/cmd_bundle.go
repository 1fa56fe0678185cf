package main

import (
	"context"
	"fmt"
)

// cmdBundle is a placeholder until its package lands; it says so and fails.
func cmdBundle(_ context.Context, env *cliEnv, _ []string) int {
	fmt.Fprintln(env.stderr, "energyflow bundle: not built yet")
	return exitFailure
}
