package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"
)

// benchMemory starts a fresh samla, reads its RSS, reads it again after one collection has
// completed and the process has been idle for a check of its memory role, drives POST
// /collections for -mem-load, reads it again right after and once more after -mem-settle (the
// pipeline keeps working through the backlog meanwhile; the peak of the readings every 5 s is
// kept too). The goal is judged against the first reading; the second tells how much of the
// growth a single collection brings already (lazily built caches, pools, prepared statements,
// connections), which no load of any size can give back.
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
	anonBefore, err := rssAnon(pid)
	if err != nil {
		return nil, in.p.withLog(err)
	}
	warm, err := warmRSS(ctx, c, in, pid)
	if err != nil {
		return nil, err
	}
	c.logf("memory: RSS %s, %s after one collection; POST /collections for %s", mb(before), mb(warm), c.memLoad)
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
	anonSettled, err := rssAnon(pid)
	if err != nil {
		return nil, in.p.withLog(err)
	}
	if c.profileDir != "" {
		if err := fetchProfile(ctx, in.opsBase+"/debug/pprof/heap", filepath.Join(c.profileDir, "heap-settled.pprof")); err != nil {
			c.logf("heap profile: %v", err)
		}
	}
	// The anonymous part is given too: the binary's resident pages (about two thirds of the start)
	// vary by some MB from run to run with what the page cache held when they were touched.
	v := fmt.Sprintf("RSS %s (%s after one collection) → %s right after (%d POSTs%s) → %s %s later (peak %s): %.2f× the start (%.2f× after one collection); anonymous %s → %s",
		mb(before), mb(warm), mb(after), post.n, codeNote(post), mb(settled), c.memSettle, mb(peak),
		float64(settled)/float64(before), float64(settled)/float64(warm), mb(anonBefore), mb(anonSettled))
	return []row{{what, v, "—", goal}}, nil
}

// warmIdle is how long the memory run leaves samla idle after its one collection: longer than
// the memory role's check (idleHeapCheck in cmd/samla, 15 s), so the reading is of a process that
// has returned what it could.
const warmIdle = 20 * time.Second

// warmRSS creates one collection, waits until its status is final and warmIdle more, and reads
// the RSS.
func warmRSS(ctx context.Context, c config, in *instance, pid int) (int64, error) {
	cl := &http.Client{Timeout: 10 * time.Second}
	defer cl.CloseIdleConnections()
	id, err := create(cl, in.base, in.key)
	if err != nil {
		return 0, in.p.withLog(err)
	}
	items := []*tracked{{id: id, started: time.Now()}}
	if pending := track(ctx, cl, in.base, in.key, items, 200*time.Millisecond, c.finalTimeout); pending > 0 {
		return 0, in.p.withLog(fmt.Errorf("memory: the warm-up collection is not final after %s", c.finalTimeout))
	}
	sleep(ctx, warmIdle)
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	warm, err := rss(pid)
	if err != nil {
		return 0, in.p.withLog(err)
	}
	return warm, nil
}
