package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// benchMemory starts a fresh samla, reads its RSS, drives POST /collections for -mem-load, reads
// it again right after and once more after -mem-settle (the pipeline keeps working through the
// backlog meanwhile; the peak of the readings every 5 s is kept too).
func benchMemory(ctx context.Context, c config, tmp string) (rows []row, data string, err error) {
	in, err := startSamla(ctx, c, tmp, "memory", nil)
	if err != nil {
		return nil, "", err
	}
	defer in.p.stop()
	rows, err = measureMemory(ctx, c, in)
	in.p.stop()
	return rows, in.data, err
}

func measureMemory(ctx context.Context, c config, in *instance) ([]row, error) {
	what := fmt.Sprintf("memory after a %s POST load (SQLite)", c.memLoad)
	goal := "goal: back within 20 % of the start (≤ 1.20×)"
	pid := in.p.pid()
	// A moment for start-up's allocations to settle, so the start is the idle service.
	sleep(ctx, 2*time.Second)
	before, err := rss(pid)
	if err != nil {
		return nil, in.p.withLog(err)
	}
	c.logf("memory: RSS %s; POST /collections for %s", mb(before), c.memLoad)
	post := postLoad(ctx, c, in.base, in.key, c.memLoad)
	after, err := rss(pid)
	if err != nil {
		return nil, in.p.withLog(err)
	}
	if c.profileDir != "" {
		if err := fetchProfile(ctx, in.opsBase+"/debug/pprof/heap", filepath.Join(c.profileDir, "heap-after-load.pprof")); err != nil {
			c.logf("heap profile: %v", err)
		}
	}
	c.logf("memory: RSS %s after %d POSTs; settling for %s", mb(after), post.n, c.memSettle)
	peak := after
	end := time.Now().Add(c.memSettle)
	for ctx.Err() == nil && time.Now().Before(end) {
		sleep(ctx, min(5*time.Second, time.Until(end)))
		v, err := rss(pid)
		if err != nil {
			return nil, in.p.withLog(err)
		}
		peak = max(peak, v)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	settled, err := rss(pid)
	if err != nil {
		return nil, in.p.withLog(err)
	}
	if c.profileDir != "" {
		if err := fetchProfile(ctx, in.opsBase+"/debug/pprof/heap", filepath.Join(c.profileDir, "heap-settled.pprof")); err != nil {
			c.logf("heap profile: %v", err)
		}
	}
	v := fmt.Sprintf("RSS %s → %s right after (%d POSTs%s) → %s %s later (peak %s): %.2f× the start",
		mb(before), mb(after), post.n, codeNote(post), mb(settled), c.memSettle, mb(peak), float64(settled)/float64(before))
	return []row{{what, v, "—", goal}}, nil
}
