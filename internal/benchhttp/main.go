// benchhttp is the harness behind `make bench-http`: it starts bin/samla on the embedded default
// (and again with ClickHouse read models when SAMLA_CLICKHOUSE_DSN is set) beside the bare Gin
// handler of ../shared/bench/ginbase, drives both with the same Go load generator in one run and
// prints every row of issue 11's table with its ratio to the bare handler or its goal: the
// status poll, the polls right after the 201, POST /collections, 201 → visible, the projection
// rebuild, completed collections per CPU-second, memory after a POST load, and fairness between
// clients.
//
//	go run ./internal/benchhttp -samla bin/samla -ginbase bin/ginbase -c 32 -d 10s
//
// Every process it starts is stopped on return and on Ctrl-C; every loop is bounded in time.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	samlaBin, ginBin   string
	conc               int
	dur, postDur       time.Duration
	collections        int
	warm               int
	visible            int
	clickhouse         bool
	maxSamples         int
	verbose            bool
	startTimeout       time.Duration
	finalTimeout       time.Duration
	visibleTimeoutEach time.Duration

	skip       map[string]bool
	pprof      bool
	profileDir string
	// completedProfile is how long the CPU profile of the completed-collections phase runs.
	completedProfile time.Duration
	rebuildTimeout   time.Duration
	memLoad          time.Duration
	memSettle        time.Duration
	fairA            []int // the fairness run's sizes of client A, one run each
	fairB            int
	fairTimeout      time.Duration
	contactTimeout   time.Duration
	clkTck           int64
}

// skippable are the parts -skip can leave out: the slow ones, and "poll" (the bare handler and the
// read-model runs: the status poll, the POSTs, 201 → visible and completed collections), so that
// one slow part can be measured alone.
var skippable = []string{"poll", "rebuild", "memory", "fairness"}

// quickDefaults shorten a run to about two minutes (-quick); flags given explicitly win.
var quickDefaults = map[string]string{
	"d": "3s", "post-d": "2s", "n": "100", "warm": "50", "visible": "100",
	"mem-load": "10s", "mem-settle": "15s",
	"fair-a": "600", "fair-b": "10", "fair-timeout": "20s",
}

func main() {
	var c config
	var skip string
	var quick bool
	flag.StringVar(&c.samlaBin, "samla", "bin/samla", "samla binary")
	flag.StringVar(&c.ginBin, "ginbase", "bin/ginbase", "bare Gin baseline binary; empty or missing: no baseline")
	flag.IntVar(&c.conc, "c", 32, "concurrent keep-alive connections of the load generator")
	flag.DurationVar(&c.dur, "d", 10*time.Second, "duration of each status-poll load")
	flag.DurationVar(&c.postDur, "post-d", 5*time.Second, "duration of the POST /collections load")
	flag.IntVar(&c.collections, "n", 200, "collections of each measured round of completed collections per CPU-second (created over -c connections, then as many one after another; awaited until final, polled once a second as a client does); the round over -c connections is then polled by the status-poll load")
	flag.IntVar(&c.warm, "warm", 100, "collections created and awaited until final right after start, before the measured -n (0: none); their CPU-s are reported as the cold figure")
	flag.IntVar(&c.visible, "visible", 300, "sequential POSTs timed from 201 to the first 200 of the status poll")
	flag.BoolVar(&c.clickhouse, "clickhouse", os.Getenv("SAMLA_CLICKHOUSE_DSN") != "", "also run samla with SAMLA_CLICKHOUSE_DSN (default: when it is set)")
	flag.IntVar(&c.maxSamples, "max-samples", 20_000_000, "latency samples kept per load run")
	flag.BoolVar(&c.verbose, "v", false, "print progress")
	flag.DurationVar(&c.startTimeout, "start-timeout", 60*time.Second, "bound on a server becoming ready")
	flag.DurationVar(&c.finalTimeout, "final-timeout", 120*time.Second, "bound on each round of collections becoming final")
	flag.DurationVar(&c.visibleTimeoutEach, "visible-timeout", 5*time.Second, "bound on one collection becoming visible")
	flag.BoolVar(&quick, "quick", false, "shorter run (about 2 minutes): -d 3s -post-d 2s -n 100 -warm 50 -visible 100 -mem-load 10s -mem-settle 15s -fair-a 600 -fair-b 10 -fair-timeout 20s; explicit flags win")
	flag.StringVar(&skip, "skip", "", "comma-separated parts to leave out: "+strings.Join(skippable, ", "))
	flag.BoolVar(&c.pprof, "pprof", false, "start samla with SAMLA_PPROF=true (its /debug/pprof/ address is printed)")
	flag.StringVar(&c.profileDir, "profile-dir", "", "save CPU profiles of the completed-collections phase and the status-poll and POST loads, and heap profiles of the memory run there (implies -pprof)")
	flag.DurationVar(&c.completedProfile, "completed-profile-d", 5*time.Second, "length of the CPU profile of the completed-collections phase (with -profile-dir): a shorter phase leaves the profile's rest idle, a longer one is profiled in part")
	flag.DurationVar(&c.rebuildTimeout, "rebuild-timeout", 3*time.Minute, "bound on one `samla projections rebuild`")
	flag.DurationVar(&c.memLoad, "mem-load", 30*time.Second, "duration of the POST load of the memory run")
	flag.DurationVar(&c.memSettle, "mem-settle", 3*time.Minute, "wait after the memory run's load before its last RSS reading (the issue reads it three minutes later)")
	flag.Func("fair-a", "comma-separated counts of client A's collections waiting for a contact form, a fairness run each (default 600,10000: the issue's row and its 10,000 waiting on one node)", func(v string) error {
		counts, err := parseCounts(v)
		c.fairA = counts
		return err
	})
	flag.IntVar(&c.fairB, "fair-b", 20, "client B's new collections timed from POST to COMPLETED, alone and beside A's (fairness)")
	flag.DurationVar(&c.fairTimeout, "fair-timeout", 60*time.Second, "bound on client B's collections completing, each measurement (fairness)")
	flag.DurationVar(&c.contactTimeout, "contact-form-timeout", 10*time.Minute, "SAMLA_CONTACT_FORM_TIMEOUT of the fairness run: A's collections must keep waiting throughout")
	flag.Parse()

	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if quick {
		if err := applyQuick(flag.CommandLine, set); err != nil {
			fmt.Fprintln(os.Stderr, "bench-http:", err)
			os.Exit(2)
		}
	}
	if c.fairA == nil {
		c.fairA = []int{600, 10_000}
	}
	var err error
	if c.skip, err = parseSkip(skip); err != nil {
		fmt.Fprintln(os.Stderr, "bench-http:", err)
		os.Exit(2)
	}
	if c.collections < 1 || c.conc < 1 || c.warm < 0 || c.visible < 1 {
		fmt.Fprintln(os.Stderr, "bench-http: -n, -c and -visible must be at least 1, -warm at least 0")
		os.Exit(2)
	}
	if c.profileDir != "" {
		c.pprof = true
		if err := os.MkdirAll(c.profileDir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "bench-http:", err)
			os.Exit(1)
		}
	}
	c.clkTck = clockTicks()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench-http:", err)
		stop()
		os.Exit(1)
	}
}

// applyQuick sets the flags of quickDefaults that were not given explicitly.
func applyQuick(fs *flag.FlagSet, set map[string]bool) error {
	for name, v := range quickDefaults {
		if set[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("-quick: -%s %s: %w", name, v, err)
		}
	}
	return nil
}

// parseSkip reads -skip's comma-separated list; an unknown part is an error, so that a typo does
// not run the part it meant to leave out.
func parseSkip(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.ToLower(strings.TrimSpace(part))
		if part == "" {
			continue
		}
		if !slices.Contains(skippable, part) {
			return nil, fmt.Errorf("-skip: unknown part %q (known: %s)", part, strings.Join(skippable, ", "))
		}
		out[part] = true
	}
	return out, nil
}

type row [4]string

func run(ctx context.Context, c config) error {
	began := time.Now()
	tmp, err := os.MkdirTemp("", "samla-bench-http-")
	if err != nil {
		return fmt.Errorf("temporary dir: %w", err)
	}
	defer os.RemoveAll(tmp)

	kinds := []string{"SQLite"}
	if c.clickhouse {
		kinds = append(kinds, "ClickHouse")
	}
	var rows []row
	fail := func(part string, err error) error {
		printTable(c, rows, time.Since(began))
		return fmt.Errorf("%s: %w", part, err)
	}
	envs := map[string]map[string]string{"SQLite": {}, "ClickHouse": {"SAMLA_CLICKHOUSE_DSN": os.Getenv("SAMLA_CLICKHOUSE_DSN")}}
	var events string // a stopped instance's data dir, replayed by the rebuilds
	if !c.skip["poll"] {
		bare, err := benchBare(ctx, c, tmp)
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, kind := range kinds {
			r, data, err := benchSamla(ctx, c, tmp, kind, envs[kind], bare)
			rows = append(rows, r...)
			if err != nil {
				return fail("samla ("+kind+")", err)
			}
			if events == "" {
				events = data
			}
		}
	}
	// Memory and fairness are properties of the service, not of its read models: measured on
	// the embedded default.
	if !c.skip["memory"] {
		r, data, err := benchMemory(ctx, c, tmp)
		rows = append(rows, r...)
		if err != nil {
			return fail("memory", err)
		}
		// The memory run's 30 s of POSTs leave far more events than the short POST load: a rate
		// measured over them is less the rebuild's start-up.
		events = data
	}
	if !c.skip["rebuild"] && events == "" {
		return fail("rebuild", errors.New("no events to rebuild: -skip poll,memory leaves none (skip rebuild too)"))
	}
	if !c.skip["rebuild"] {
		for _, kind := range kinds {
			c.logf("projections rebuild (%s) of %s", kind, events)
			r, err := rebuild(ctx, c, tmp, events, envs[kind], kind)
			if err != nil {
				return fail("rebuild ("+kind+")", err)
			}
			rows = append(rows, r)
		}
	}
	if !c.skip["fairness"] {
		for _, waiting := range c.fairA {
			r, err := benchFairness(ctx, c, tmp, waiting)
			rows = append(rows, r...)
			if err != nil {
				return fail("fairness", err)
			}
		}
	}
	printTable(c, rows, time.Since(began))
	return nil
}

// parseCounts parses a comma-separated list of positive counts.
func parseCounts(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a comma-separated list of positive counts", v)
		}
		out = append(out, n)
	}
	return out, nil
}

// rowOrder is the order of issue 11's table; printTable sorts the rows by it, the SQLite row of
// each pair before the ClickHouse one.
var rowOrder = []string{"status poll", "poll right after", "POST /collections", "201 →", "projection rebuild",
	"completed collections", "memory", "one client's"}

func rowRank(what string) int {
	for i, prefix := range rowOrder {
		if strings.HasPrefix(what, prefix) {
			return i
		}
	}
	return len(rowOrder)
}

func printTable(c config, rows []row, took time.Duration) {
	fmt.Printf("\nbench-http: %d connections, %s per poll run, %s of POSTs, %d collections polled, %d POSTs timed to visible; "+
		"memory: %s of POSTs, %s to settle; fairness: %v waiting vs %d new; whole run %s\n\n",
		c.conc, c.dur, c.postDur, c.collections, c.visible, c.memLoad, c.memSettle, c.fairA, c.fairB, took.Round(time.Second))
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(a, b row) int { return rowRank(a[0]) - rowRank(b[0]) })
	fmt.Println("| what | samla | bare | ratio / goal |")
	fmt.Println("|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s |\n", r[0], r[1], r[2], r[3])
	}
}

func (c config) logf(format string, a ...any) {
	if c.verbose {
		fmt.Fprintf(os.Stderr, "bench-http: "+format+"\n", a...)
	}
}

func benchBare(ctx context.Context, c config, tmp string) (*result, error) {
	if c.ginBin == "" {
		fmt.Println("baseline: no -ginbase given; the bare column stays empty")
		return nil, nil
	}
	if _, err := os.Stat(c.ginBin); err != nil {
		fmt.Printf("baseline: %s missing (%v); the bare column stays empty\n", c.ginBin, err)
		return nil, nil
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p, err := start(ctx, "ginbase", c.ginBin, []string{addr}, nil, filepath.Join(tmp, "ginbase.log"))
	if err != nil {
		return nil, err
	}
	defer p.stop()
	if err := waitReady(ctx, p, "http://"+addr+"/collections/ID/status", http.StatusUnauthorized, c.startTimeout); err != nil {
		return nil, err
	}
	c.logf("bare Gin handler: status poll for %s", c.dur)
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/collections/ID/status", nil)
	req.Header.Set("Authorization-token", "x")
	r := load(ctx, c, c.dur, []*http.Request{req}, http.StatusOK)
	return &r, nil
}

// instance is one running `samla run` with its own data dir and listeners.
type instance struct {
	p                   *proc
	data, base, opsBase string
	key                 string // the bootstrap (sandbox) client's API key
}

// startSamla starts `samla run` on a fresh data dir under tmp with env added, and waits until it
// is ready and its bootstrap key is written.
func startSamla(ctx context.Context, c config, tmp, name string, env map[string]string) (*instance, error) {
	data := filepath.Join(tmp, "data-"+name)
	addrs := make([]string, 3)
	for i := range addrs {
		a, err := freeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	httpAddr, opsAddr, sandboxAddr := addrs[0], addrs[1], addrs[2]
	all := map[string]string{
		"SAMLA_DATA_DIR":           data,
		"SAMLA_HTTP_ADDR":          httpAddr,
		"SAMLA_OPS_ADDR":           opsAddr,
		"SAMLA_SANDBOX_ADDR":       sandboxAddr,
		"SAMLA_MTLS_ADDR":          "",
		"SAMLA_RATE_LIMIT":         "1000000",
		"SAMLA_RATE_BURST":         "1000000",
		"SAMLA_AUTH_FAILURE_LIMIT": "0",
	}
	if c.pprof {
		all["SAMLA_PPROF"] = "true"
	}
	for k, v := range env {
		all[k] = v
	}
	p, err := start(ctx, "samla "+name, c.samlaBin, []string{"run"}, all, filepath.Join(tmp, "samla-"+name+".log"))
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, p, "http://"+opsAddr+"/readyz", http.StatusOK, c.startTimeout); err != nil {
		p.stop()
		return nil, err
	}
	keyb, err := os.ReadFile(filepath.Join(data, "bootstrap-api-key"))
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("the bootstrap API key: %w", err)
	}
	if c.pprof {
		fmt.Fprintf(os.Stderr, "bench-http: samla %s (pid %d): profiles at http://%s/debug/pprof/\n", name, p.pid(), opsAddr)
	}
	return &instance{p: p, data: data, base: "http://" + httpAddr, opsBase: "http://" + opsAddr, key: strings.TrimSpace(string(keyb))}, nil
}

// benchSamla measures one samla run with the read models of kind, and answers its rows and its
// data dir (the service stopped).
func benchSamla(ctx context.Context, c config, tmp, kind string, env map[string]string, bare *result) (rows []row, data string, err error) {
	in, err := startSamla(ctx, c, tmp, strings.ToLower(kind), env)
	if err != nil {
		return nil, "", err
	}
	defer in.p.stop()
	rows, err = measureSamla(ctx, c, in, kind, env["SAMLA_CLICKHOUSE_DSN"], bare)
	in.p.stop()
	return rows, in.data, err
}

// measureSamla measures in; dsn is its ClickHouse read models' (empty: SQLite).
func measureSamla(ctx context.Context, c config, in *instance, kind, dsn string, bare *result) ([]row, error) {
	base, key := in.base, in.key
	cl := &http.Client{Timeout: 10 * time.Second}
	var rows []row

	// 1. N collections, polled once a second until final, as a client polls: completed
	// collections per CPU-second of the samla process (sandbox companies included; with
	// ClickHouse, the ClickHouse server's CPU is not counted). Three rounds:
	//   - -warm collections right after start (cold): a process just started pays once for what
	//     later collections find ready (its heap grown to the collector's floor page by page,
	//     the connections to the sandbox, prepared statements, code run for the first time);
	//   - -n created over -c connections, as a client system creates them for its users at
	//     once: the row's figure;
	//   - -n created one after another over one connection, which leaves every stage of the
	//     pipeline less to batch (each group commit, publish and read-model transaction takes
	//     what arrived together), so each collection costs more CPU.
	var cold *round
	if c.warm > 0 {
		c.logf("samla (%s): warm-up: creating %d collections over %d connections, awaiting them until final", kind, c.warm, c.conc)
		r, err := completedRound(ctx, c, in, c.warm, c.conc)
		if err != nil {
			return nil, err
		}
		cold = &r
	}
	c.logf("samla (%s): creating %d collections over %d connections, awaiting them until final", kind, c.collections, c.conc)
	stopProfile := profile(ctx, c, in, "cpu-completed-"+strings.ToLower(kind), c.completedProfile)
	together, err := completedRound(ctx, c, in, c.collections, c.conc)
	stopProfile() // before the next round and the status poll, which it would otherwise count in part
	if err != nil {
		return nil, err
	}
	c.logf("samla (%s): creating %d collections one after another, awaiting them until final", kind, c.collections)
	serial, err := completedRound(ctx, c, in, c.collections, 1)
	if err != nil {
		return nil, err
	}
	rows = append(rows, cpuRow(kind, c.conc, together, serial, cold))
	items := together.items

	ids := make([]string, len(items))
	for i, t := range items {
		ids[i] = t.id
	}

	// 2. The status poll, same load as the baseline. samla is idle (the round settled); the
	// ClickHouse server may still be merging the parts the rounds inserted, for some seconds and
	// with more than a core of the two the poll shares: the poll, which samla answers from
	// memory, starts once those merges are done too, as it starts once samla is idle. In a
	// distributed deployment the server has cores of its own.
	if dsn != "" {
		if err := settleClickHouse(ctx, c, dsn); err != nil {
			return rows, err
		}
	}
	c.logf("samla (%s): status poll for %s", kind, c.dur)
	stopProfile = profile(ctx, c, in, "cpu-poll-"+strings.ToLower(kind), c.dur)
	polls := make([]*http.Request, len(ids))
	for i, id := range ids {
		polls[i], _ = http.NewRequest(http.MethodGet, base+"/collections/"+id+"/status", nil)
		polls[i].Header.Set("Authorization-token", key)
	}
	poll := load(ctx, c, c.dur, polls, http.StatusOK)
	stopProfile()
	bareCol, ratio := "—", "goal: ≥ 0.5× bare throughput, p99 ≤ 2× bare p99"
	if bare != nil {
		bareCol = bare.String() + codeNote(*bare)
		ratio = fmt.Sprintf("%.2f× throughput (goal ≥ 0.5×); p99 %.1f× bare (goal ≤ 2×)",
			poll.rps()/bare.rps(), float64(poll.pct(0.99))/float64(bare.pct(0.99)))
	}
	rows = append(rows, row{"status poll, " + kind + " read models", poll.String() + codeNote(poll), bareCol, ratio})
	if ctx.Err() != nil {
		return rows, ctx.Err()
	}

	// 3a. 201 → visible, sequential, on an idle pipeline (the N collections are final).
	c.logf("samla (%s): %d sequential POSTs timed to visible", kind, c.visible)
	vis, n404, done, err := visible(ctx, cl, base, key, c.visible, c.visibleTimeoutEach)
	if err != nil {
		return rows, in.p.withLog(err)
	}
	rows = append(rows, row{"poll right after the 201 (" + kind + ")",
		fmt.Sprintf("404 in %d of %d", n404, done), "—", "goal: never 404 (read-your-writes)"})
	if ctx.Err() != nil {
		return rows, ctx.Err()
	}

	// 3b. POST /collections under the same concurrency, the whole pipeline running.
	c.logf("samla (%s): POST /collections for %s", kind, c.postDur)
	stopProfile = profile(ctx, c, in, "cpu-post-"+strings.ToLower(kind), c.postDur)
	post := postLoad(ctx, c, base, key, c.postDur)
	stopProfile()
	rows = append(rows, row{"POST /collections, durable, whole pipeline running (" + kind + ")",
		fmt.Sprintf("%.0f/s, p99 %s", post.rps(), ms(post.pct(0.99))) + codeNote(post), "—", "goal: ≥ 5k/s, p99 ≤ 20 ms"})
	goal := "goal: p99 ≤ 10 ms embedded"
	if kind == "ClickHouse" {
		goal = "goal: p99 ≤ 100 ms distributed"
	}
	rows = append(rows, row{"201 → status visible (" + kind + ")",
		fmt.Sprintf("p50 %s, p99 %s (%d)", ms(vis.pct(0.5)), ms(vis.pct(0.99)), len(vis.lat)), "—", goal})
	return rows, ctx.Err()
}

// round is one round of collections created and awaited until final.
type round struct {
	items     []*tracked
	completed int
	wall, cpu time.Duration
}

// completedRound creates n collections over conns connections (one after another when 1),
// awaits them until final (polled once a second) and answers how many completed, how long that
// took and the samla process's CPU time for them.
//
// Its CPU time runs from an idle samla to an idle samla (settle), not to the poll that finds
// the last collection final: the pipeline is still at work for the round then (read models,
// the collector), and that work is the round's, not the next one's.
func completedRound(ctx context.Context, c config, in *instance, n, conns int) (round, error) {
	if err := settle(ctx, c, in); err != nil {
		return round{}, err
	}
	cpu0, err := cpuTime(in.p.pid(), c.clkTck)
	if err != nil {
		return round{}, err
	}
	t0 := time.Now()
	ids, err := createMany(ctx, in.base, in.key, personaCompletes, n, conns)
	switch {
	case ctx.Err() != nil:
		return round{}, ctx.Err()
	case err != nil:
		return round{}, in.p.withLog(err)
	case len(ids) != n:
		return round{}, in.p.withLog(fmt.Errorf("created %d of %d collections", len(ids), n))
	}
	items := make([]*tracked, len(ids))
	for i, id := range ids {
		// started is the round's start, not the 201's: this row times no collection.
		items[i] = &tracked{id: id, started: t0}
	}
	cl := &http.Client{Timeout: 10 * time.Second}
	pending := track(ctx, cl, in.base, in.key, items, time.Second, c.finalTimeout)
	wall := time.Since(t0)
	if ctx.Err() != nil {
		return round{}, ctx.Err()
	}
	if pending > 0 {
		return round{}, in.p.withLog(fmt.Errorf("%d of %d collections not final after %s", pending, len(items), c.finalTimeout))
	}
	if err := settle(ctx, c, in); err != nil {
		return round{}, err
	}
	cpu1, err := cpuTime(in.p.pid(), c.clkTck)
	if err != nil {
		return round{}, in.p.withLog(err)
	}
	return round{items: items, completed: len(tookSorted(items, "COMPLETED")), wall: wall, cpu: cpu1 - cpu0}, nil
}

// settleTick and settleBound: samla is idle once a settleTick adds at most settleIdle of CPU
// time (an idle samla uses ~2.5 ms in 250 ms, which the round's figure then includes once or
// twice); a process that never gets there is measured after settleBound anyway.
const (
	settleTick  = 250 * time.Millisecond
	settleIdle  = 25 * time.Millisecond
	settleBound = 15 * time.Second
)

// settle waits until samla is idle (settleTick), at most settleBound.
func settle(ctx context.Context, c config, in *instance) error {
	last, err := cpuTime(in.p.pid(), c.clkTck)
	if err != nil {
		return err
	}
	return waitIdle(ctx, c, "samla", func() (bool, error) {
		now, err := cpuTime(in.p.pid(), c.clkTck)
		if err != nil {
			return false, err
		}
		idle := now-last <= settleIdle
		last = now
		return idle, nil
	})
}

// settleClickHouse waits until the ClickHouse server behind dsn runs no merge in two readings
// a settleTick apart, at most settleBound.
func settleClickHouse(ctx context.Context, c config, dsn string) error {
	db, err := openClickHouse(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	quiet := 0
	return waitIdle(ctx, c, "ClickHouse", func() (bool, error) {
		var merges uint64
		if err := db.QueryRowContext(ctx, "SELECT count() FROM system.merges").Scan(&merges); err != nil {
			return false, fmt.Errorf("read ClickHouse's running merges: %w", err)
		}
		if merges > 0 {
			quiet = 0
			return false, nil
		}
		quiet++
		return quiet >= 2, nil
	})
}

// waitIdle asks idle every settleTick until it answers true, at most settleBound; what names
// the process waited for when the bound passes.
func waitIdle(ctx context.Context, c config, what string, idle func() (bool, error)) error {
	for deadline := time.Now().Add(settleBound); time.Now().Before(deadline); {
		sleep(ctx, settleTick)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		done, err := idle()
		if err != nil || done {
			return err
		}
	}
	c.logf("%s not idle after %s; measuring anyway", what, settleBound)
	return nil
}

func (r round) String() string {
	if r.cpu <= 0 {
		return "no CPU time measured"
	}
	return fmt.Sprintf("%.0f completed/CPU-s (%d of %d COMPLETED in %.1f s, %.2f CPU-s)",
		float64(r.completed)/r.cpu.Seconds(), r.completed, len(r.items), r.wall.Seconds(), r.cpu.Seconds())
}

// cpuRow is the row of the round created over conns connections, with the round created one
// after another and the cold round (when there was one) beside it.
func cpuRow(kind string, conns int, together, serial round, cold *round) row {
	v := fmt.Sprintf("%s over %d connections; one after another: %s", together, conns, serial)
	if cold != nil {
		v += fmt.Sprintf("; cold, the first %d after start: %s", len(cold.items), cold)
	}
	return row{"completed collections per CPU-second (" + kind + ")", v, "—", "goal: ≥ 4× today (50–100): ≥ 200–400/CPU-s"}
}

func postLoad(ctx context.Context, c config, base, key string, d time.Duration) result {
	body := postBody()
	req, _ := http.NewRequest(http.MethodPost, base+"/collections", bytes.NewReader(body))
	setPostHeaders(req, key)
	return load(ctx, c, d, []*http.Request{req}, http.StatusCreated)
}

// visible times n sequential POSTs from their 201 to the first status poll that answers 200, and
// counts the first polls that answered 404.
func visible(ctx context.Context, cl *http.Client, base, key string, n int, each time.Duration) (result, int, int, error) {
	var res result
	n404, done := 0, 0
	for i := 0; i < n && ctx.Err() == nil; i++ {
		id, err := create(cl, base, key)
		if err != nil {
			return res, n404, done, err
		}
		t0 := time.Now()
		deadline := t0.Add(each)
		for first := true; ; first = false {
			code, _, err := status(cl, base, key, id)
			if err != nil {
				return res, n404, done, err
			}
			if first && code == http.StatusNotFound {
				n404++
			}
			if code == http.StatusOK {
				res.lat = append(res.lat, time.Since(t0))
				break
			}
			if code != http.StatusNotFound {
				return res, n404, done, fmt.Errorf("status poll after the 201: %d", code)
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return res, n404, done, fmt.Errorf("collection %s not visible after %s", id, each)
			}
			time.Sleep(100 * time.Microsecond)
		}
		done++
	}
	sortDurations(res.lat)
	return res, n404, done, nil
}

func sortDurations(d []time.Duration) { slices.Sort(d) }

// profile saves a CPU profile of the next d of samla to -profile-dir while a load runs; the
// answer waits for it. Without -profile-dir it does nothing. A failed profile is reported, not
// fatal: the measurement stands without it.
func profile(ctx context.Context, c config, in *instance, name string, d time.Duration) (wait func()) {
	if c.profileDir == "" {
		return func() {}
	}
	secs := max(int(d/time.Second), 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := fetchProfile(ctx, in.opsBase+fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), filepath.Join(c.profileDir, name+".pprof")); err != nil {
			fmt.Fprintln(os.Stderr, "bench-http: profile", name+":", err)
		}
	}()
	return func() { <-done }
}

func fetchProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d (is SAMLA_PPROF on?)", url, resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.ReadFrom(resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	fmt.Fprintln(os.Stderr, "bench-http: profile saved:", path)
	return nil
}
