package main

import (
	"context"
	"fmt"
)

// cmdSim is a placeholder until its package lands; it says so and fails.
func cmdSim(_ context.Context, env *cliEnv, _ []string) int {
	fmt.Fprintln(env.stderr, "energyflow sim: not built yet")
	return exitFailure
}
