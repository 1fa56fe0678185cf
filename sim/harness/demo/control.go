package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/telemetry"
)

// rearmWithin bounds how long a new episode started from the page
// retries the reset of a stopped arm: the gate decides a reset on the next
// tick, and refuses it until the new scene's first scores are in.
const rearmWithin = 5 * time.Second

// control is the demo's telemetry.EpisodeControl: the live view's
// Episode panel starts episodes and sets the level through the bridge,
// with the runtime holding the arm across each reset (runtime.Loop.NewEpisode).
// One episode switch at a time: the page's and the demo's own (a finished
// episode) take turns.
type control struct {
	b  *harness.Bridge
	tr *tracer // --scores: told of each scene switch; nil: none

	switching sync.Mutex // one switch at a time
	mu        sync.Mutex
	loop      *runtime.Loop // nil until the app is built
}

var _ telemetry.EpisodeControl = (*control)(nil)

func (c *control) setLoop(l *runtime.Loop) {
	c.mu.Lock()
	c.loop = l
	c.mu.Unlock()
}

func (c *control) runtimeLoop() (*runtime.Loop, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loop == nil {
		return nil, errors.New("demo: the runtime is still starting — try again in a moment")
	}
	return c.loop, nil
}

// Levels are the bridge's OOD levels.
func (c *control) Levels() []string { return harness.Levels() }

// Episode reports the bridge's episode.
func (c *control) Episode(ctx context.Context) (telemetry.EpisodeInfo, error) {
	ep, err := c.b.Episode(ctx)
	if err != nil {
		return telemetry.EpisodeInfo{}, fmt.Errorf("demo: read the episode: %w", err)
	}
	return episodeInfo(ep), nil
}

// NewEpisode starts the next seed's scene now at level ("": the pending
// level, else the current one), through the runtime, and re-arms a stopped
// arm: the reset is retried for up to rearmWithin, until the new
// scene's scores are in.
func (c *control) NewEpisode(ctx context.Context, actor, level string) (telemetry.EpisodeInfo, error) {
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
	var ep harness.Episode
	err = loop.NewEpisode(ctx, func(ctx context.Context) (err error) {
		if ep, err = c.b.Reset(ctx, "", level, cur.Seed+1, "", 0); err == nil {
			c.traceSwitch(cur, ep)
		}
		return err
	})
	c.switching.Unlock()
	if err != nil {
		return telemetry.EpisodeInfo{}, fmt.Errorf("demo: new episode: %w", err)
	}
	if st, _ := loop.Machine().State(); st == runtime.StateRunning {
		return episodeInfo(ep), nil
	}
	rctx, cancel := context.WithTimeout(ctx, rearmWithin)
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
func (c *control) SetLevel(ctx context.Context, actor, level string) error {
	if _, err := c.b.SetLevel(ctx, level, false); err != nil {
		return fmt.Errorf("demo: set the level: %w", err)
	}
	return nil
}

// next starts the next episode if the current one has ended
// (nextEpisode through the runtime) and logs the one that ended: one
// line an episode, which scripts/watch_demo.sh counts.
func (c *control) next(ctx context.Context, log *slog.Logger) error {
	loop, err := c.runtimeLoop()
	if err != nil {
		return nil // not running yet: nothing to switch
	}
	c.switching.Lock()
	defer c.switching.Unlock()
	ended, _, reset, err := nextEpisode(ctx, c.b, loop.NewEpisode, c.traceSwitch)
	if ended.Done {
		log.Info("demo: episode ended", "seed", ended.Seed, "level", ended.Level, "success", ended.Success,
			"steps", ended.Step, "new_episode", reset)
	}
	return err
}

// traceSwitch tells --scores' tracer, if any, that episode ended gave
// way to ep.
func (c *control) traceSwitch(ended, ep harness.Episode) {
	if c.tr != nil {
		c.tr.end(ended)
		c.tr.begin(ep)
	}
}

func episodeInfo(ep harness.Episode) telemetry.EpisodeInfo {
	return telemetry.EpisodeInfo{Level: ep.Level, Seed: int64(ep.Seed), Episode: ep.Episode, PendingLevel: ep.PendingLevel}
}

// episodeSwitcher replaces the scene between two control ticks and
// restarts the policy on it (runtime.Loop.NewEpisode).
type episodeSwitcher func(ctx context.Context, replace func(context.Context) error) error

// nextEpisode starts the next episode when the current one has ended:
// same task, the next seed, and the level set with POST /episode/level if
// one is pending (else the current level). The reset runs through sw (nil:
// the bridge alone), so the runtime holds the arm across it and plans the
// new scene from a fresh history, as sim eval's runtime per episode does.
// switched, if not nil, is called with both once the new scene is in
// place, before the runtime resumes. It returns the episode that ended
// (the current one when none did), the new one, and whether it reset.
func nextEpisode(ctx context.Context, b *harness.Bridge, sw episodeSwitcher, switched func(ended, ep harness.Episode)) (ended, ep harness.Episode, reset bool, err error) {
	ep, err = b.Episode(ctx)
	if err != nil || !ep.Done {
		return ep, ep, false, err
	}
	ended = ep
	seed := ep.Seed + 1
	restart := func(ctx context.Context) (err error) {
		if ep, err = b.Reset(ctx, "", "", seed, "", 0); err == nil && switched != nil {
			switched(ended, ep)
		}
		return err
	}
	if sw == nil {
		err = restart(ctx)
	} else {
		err = sw(ctx, restart)
	}
	return ended, ep, err == nil, err
}

// episodeEvery is how often the demo asks the bridge whether the
// episode has ended: a fraction of the 10 steps the demonstrations keep
// after success, so the arm does not linger in the finished scene.
const episodeEvery = 200 * time.Millisecond

// runEpisodes starts a new episode whenever one ends, so the arm keeps
// working, until ctx ends. A failure is logged when it starts and again at
// most every 30 s while it lasts.
func runEpisodes(ctx context.Context, c *control, log *slog.Logger) {
	var failing time.Time
	t := time.NewTicker(episodeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.next(tctx, log)
		cancel()
		switch {
		case err == nil:
			if !failing.IsZero() {
				log.Info("demo: episodes start again")
				failing = time.Time{}
			}
		case ctx.Err() != nil:
			return
		case failing.IsZero() || time.Since(failing) >= 30*time.Second:
			log.Warn("demo: cannot start the next episode (retrying)", "err", err)
			failing = time.Now()
		}
	}
}
