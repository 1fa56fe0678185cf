package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/telemetry"
)

// demoRearmWithin bounds how long a new episode started from the page
// retries the reset of a stopped arm: the gate decides a reset on the next
// tick, and refuses it until the new scene's first scores are in.
const demoRearmWithin = 5 * time.Second

// demoControl is the demo's telemetry.EpisodeControl: the live view's
// Episode panel starts episodes and sets the level through the bridge,
// with the runtime holding the arm across each reset (runtime.Loop.NewEpisode).
// One episode switch at a time: the page's and the demo's own (a finished
// episode) take turns.
type demoControl struct {
	b *bridge

	switching sync.Mutex // one switch at a time
	mu        sync.Mutex
	loop      *runtime.Loop // nil until the app is built
}

var _ telemetry.EpisodeControl = (*demoControl)(nil)

func (c *demoControl) setLoop(l *runtime.Loop) {
	c.mu.Lock()
	c.loop = l
	c.mu.Unlock()
}

func (c *demoControl) runtimeLoop() (*runtime.Loop, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loop == nil {
		return nil, errors.New("demo: the runtime is still starting — try again in a moment")
	}
	return c.loop, nil
}

// Levels are the bridge's OOD levels.
func (c *demoControl) Levels() []string { return strings.Fields(simLevels) }

// Episode reports the bridge's episode.
func (c *demoControl) Episode(ctx context.Context) (telemetry.EpisodeInfo, error) {
	ep, err := c.b.Episode(ctx)
	if err != nil {
		return telemetry.EpisodeInfo{}, fmt.Errorf("demo: read the episode: %w", err)
	}
	return episodeInfo(ep), nil
}

// NewEpisode starts the next seed's scene now at level ("": the pending
// level, else the current one), through the runtime, and re-arms a stopped
// arm: the reset is retried for up to demoRearmWithin, until the new
// scene's scores are in.
func (c *demoControl) NewEpisode(ctx context.Context, actor, level string) (telemetry.EpisodeInfo, error) {
	loop, err := c.runtimeLoop()
	if err != nil {
		return telemetry.EpisodeInfo{}, err
	}
	c.switching.Lock()
	cur, err := c.b.Episode(ctx)
	if err != nil {
		c.switching.Unlock()
		return telemetry.EpisodeInfo{}, fmt.Errorf("demo: read the episode: %w", err)
	}
	var ep episode
	err = loop.NewEpisode(ctx, func(ctx context.Context) (err error) {
		ep, err = c.b.Reset(ctx, "", level, cur.Seed+1, "", 0)
		return err
	})
	c.switching.Unlock()
	if err != nil {
		return telemetry.EpisodeInfo{}, fmt.Errorf("demo: new episode: %w", err)
	}
	if st, _ := loop.Machine().State(); st == runtime.StateRunning {
		return episodeInfo(ep), nil
	}
	rctx, cancel := context.WithTimeout(ctx, demoRearmWithin)
	defer cancel()
	for {
		aerr := loop.Arm(rctx, actor)
		if aerr == nil {
			return episodeInfo(ep), nil
		}
		select {
		case <-rctx.Done():
			return episodeInfo(ep), fmt.Errorf("demo: episode %d started, but the arm stays stopped: %w", ep.Episode, aerr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// SetLevel sets the level of the next episodes.
func (c *demoControl) SetLevel(ctx context.Context, actor, level string) error {
	if _, err := c.b.SetLevel(ctx, level, false); err != nil {
		return fmt.Errorf("demo: set the level: %w", err)
	}
	return nil
}

// next starts the next episode if the current one has ended
// (demoNextEpisode through the runtime) and logs the one that ended: one
// line an episode, which scripts/watch_demo.sh counts.
func (c *demoControl) next(ctx context.Context, log *slog.Logger) error {
	loop, err := c.runtimeLoop()
	if err != nil {
		return nil // not running yet: nothing to switch
	}
	c.switching.Lock()
	defer c.switching.Unlock()
	ended, _, reset, err := demoNextEpisode(ctx, c.b, loop.NewEpisode)
	if ended.Done {
		log.Info("demo: episode ended", "seed", ended.Seed, "level", ended.Level, "success", ended.Success,
			"steps", ended.Step, "new_episode", reset)
	}
	return err
}

func episodeInfo(ep episode) telemetry.EpisodeInfo {
	return telemetry.EpisodeInfo{Level: ep.Level, Seed: int64(ep.Seed), Episode: ep.Episode, PendingLevel: ep.PendingLevel}
}
