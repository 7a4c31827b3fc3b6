// benchhttp is the harness behind `make bench-http`: it starts bin/samla on the embedded default
// (and again with ClickHouse read models when SAMLA_CLICKHOUSE_DSN is set) beside the bare Gin
// handler of ../shared/bench/ginbase, drives both with the same Go load generator in one run and
// prints the rows of issue 11's table with their ratios to the bare handler and their goals.
//
//	go run ./internal/benchhttp -samla bin/samla -ginbase bin/ginbase -c 32 -d 10s
//
// Every process it starts is stopped on return and on Ctrl-C; every loop is bounded in time.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/samla/samla/domain/collection"
)

type config struct {
	samlaBin, ginBin   string
	conc               int
	dur, postDur       time.Duration
	collections        int
	visible            int
	clickhouse         bool
	maxSamples         int
	verbose            bool
	startTimeout       time.Duration
	finalTimeout       time.Duration
	visibleTimeoutEach time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.samlaBin, "samla", "bin/samla", "samla binary")
	flag.StringVar(&c.ginBin, "ginbase", "bin/ginbase", "bare Gin baseline binary; empty or missing: no baseline")
	flag.IntVar(&c.conc, "c", 32, "concurrent keep-alive connections of the load generator")
	flag.DurationVar(&c.dur, "d", 10*time.Second, "duration of each status-poll load")
	flag.DurationVar(&c.postDur, "post-d", 5*time.Second, "duration of the POST /collections load")
	flag.IntVar(&c.collections, "n", 200, "collections created (and awaited until final) for the status poll")
	flag.IntVar(&c.visible, "visible", 300, "sequential POSTs timed from 201 to the first 200 of the status poll")
	flag.BoolVar(&c.clickhouse, "clickhouse", os.Getenv("SAMLA_CLICKHOUSE_DSN") != "", "also run samla with SAMLA_CLICKHOUSE_DSN (default: when it is set)")
	flag.IntVar(&c.maxSamples, "max-samples", 20_000_000, "latency samples kept per load run")
	flag.BoolVar(&c.verbose, "v", false, "print progress")
	flag.DurationVar(&c.startTimeout, "start-timeout", 60*time.Second, "bound on a server becoming ready")
	flag.DurationVar(&c.finalTimeout, "final-timeout", 120*time.Second, "bound on the N collections becoming final")
	flag.DurationVar(&c.visibleTimeoutEach, "visible-timeout", 5*time.Second, "bound on one collection becoming visible")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench-http:", err)
		stop()
		os.Exit(1)
	}
}

// result is one load run: throughput and the latencies of every request.
type result struct {
	n, errs   int
	codes     map[int]int
	elapsed   time.Duration
	lat       []time.Duration // sorted
	truncated bool
}

func (r result) rps() float64 { return float64(r.n) / r.elapsed.Seconds() }
func (r result) pct(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[int(q*float64(len(r.lat)-1))]
}
func (r result) String() string {
	return fmt.Sprintf("%.0f/s, p50 %s, p99 %s", r.rps(), ms(r.pct(0.5)), ms(r.pct(0.99)))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func run(ctx context.Context, c config) error {
	tmp, err := os.MkdirTemp("", "samla-bench-http-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	var bare *result
	if c.ginBin == "" {
		fmt.Println("baseline: no -ginbase given; the bare column stays empty")
	} else if _, err := os.Stat(c.ginBin); err != nil {
		fmt.Printf("baseline: %s missing (%v); the bare column stays empty\n", c.ginBin, err)
	} else {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		p, err := start(ctx, "ginbase", c.ginBin, []string{addr}, nil, filepath.Join(tmp, "ginbase.log"))
		if err != nil {
			return err
		}
		err = waitReady(ctx, p, "http://"+addr+"/collections/ID/status", http.StatusUnauthorized, c.startTimeout)
		if err == nil {
			c.logf("bare Gin handler: status poll for %s", c.dur)
			r := load(ctx, c, c.dur, func(i int) *http.Request {
				req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/collections/ID/status", nil)
				req.Header.Set("Authorization-token", "x")
				return req
			}, http.StatusOK)
			bare = &r
		}
		p.stop()
		if err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}

	kinds := []string{"SQLite"}
	if c.clickhouse {
		kinds = append(kinds, "ClickHouse")
	}
	var rows [][4]string
	for _, kind := range kinds {
		r, err := benchSamla(ctx, c, tmp, kind, bare)
		rows = append(rows, r...)
		if err != nil {
			printTable(c, rows)
			return fmt.Errorf("samla (%s): %w", kind, err)
		}
	}
	printTable(c, rows)
	return nil
}

func printTable(c config, rows [][4]string) {
	fmt.Printf("\nbench-http: %d connections, %s per poll run, %s of POSTs, %d collections polled, %d POSTs timed to visible\n\n",
		c.conc, c.dur, c.postDur, c.collections, c.visible)
	fmt.Println("| what | samla | bare | ratio / goal |")
	fmt.Println("|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s |\n", r[0], r[1], r[2], r[3])
	}
}

func benchSamla(ctx context.Context, c config, tmp, kind string, bare *result) ([][4]string, error) {
	data := filepath.Join(tmp, "data-"+strings.ToLower(kind))
	addrs := make([]string, 3)
	for i := range addrs {
		a, err := freeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	httpAddr, opsAddr, sandboxAddr := addrs[0], addrs[1], addrs[2]
	env := map[string]string{
		"SAMLA_DATA_DIR":           data,
		"SAMLA_HTTP_ADDR":          httpAddr,
		"SAMLA_OPS_ADDR":           opsAddr,
		"SAMLA_SANDBOX_ADDR":       sandboxAddr,
		"SAMLA_MTLS_ADDR":          "",
		"SAMLA_RATE_LIMIT":         "1000000",
		"SAMLA_RATE_BURST":         "1000000",
		"SAMLA_AUTH_FAILURE_LIMIT": "0",
	}
	if kind == "ClickHouse" {
		env["SAMLA_CLICKHOUSE_DSN"] = os.Getenv("SAMLA_CLICKHOUSE_DSN")
	}
	p, err := start(ctx, "samla", c.samlaBin, []string{"run"}, env, filepath.Join(tmp, "samla-"+strings.ToLower(kind)+".log"))
	if err != nil {
		return nil, err
	}
	defer p.stop()
	if err := waitReady(ctx, p, "http://"+opsAddr+"/readyz", http.StatusOK, c.startTimeout); err != nil {
		return nil, err
	}
	keyb, err := os.ReadFile(filepath.Join(data, "bootstrap-api-key"))
	if err != nil {
		return nil, err
	}
	key := strings.TrimSpace(string(keyb))
	base := "http://" + httpAddr
	cl := &http.Client{Timeout: 10 * time.Second}

	// 1. N collections, awaited until final.
	c.logf("samla (%s): creating %d collections", kind, c.collections)
	ids := make([]string, 0, c.collections)
	for i := 0; i < c.collections && ctx.Err() == nil; i++ {
		id, err := create(cl, base, key)
		if err != nil {
			return nil, p.withLog(err)
		}
		ids = append(ids, id)
	}
	if err := awaitFinal(ctx, cl, base, key, ids, c.finalTimeout); err != nil {
		return nil, p.withLog(err)
	}

	// 2. The status poll, same load as the baseline.
	c.logf("samla (%s): status poll for %s", kind, c.dur)
	poll := load(ctx, c, c.dur, func(i int) *http.Request {
		req, _ := http.NewRequest(http.MethodGet, base+"/collections/"+ids[i%len(ids)]+"/status", nil)
		req.Header.Set("Authorization-token", key)
		return req
	}, http.StatusOK)
	var rows [][4]string
	bareCol, ratio := "—", "goal: ≥ 0.5× bare throughput, p99 ≤ 2× bare p99"
	if bare != nil {
		bareCol = bare.String() + codeNote(*bare)
		ratio = fmt.Sprintf("%.2f× throughput (goal ≥ 0.5×); p99 %.1f× bare (goal ≤ 2×)",
			poll.rps()/bare.rps(), float64(poll.pct(0.99))/float64(bare.pct(0.99)))
	}
	rows = append(rows, [4]string{"status poll, " + kind + " read models", poll.String() + codeNote(poll), bareCol, ratio})
	if ctx.Err() != nil {
		return rows, ctx.Err()
	}

	// 3a. 201 → visible, sequential, on an idle pipeline (the N collections are final).
	c.logf("samla (%s): %d sequential POSTs timed to visible", kind, c.visible)
	vis, n404, done, err := visible(ctx, cl, base, key, c.visible, c.visibleTimeoutEach)
	if err != nil {
		return rows, p.withLog(err)
	}
	rows = append(rows, [4]string{"poll right after the 201 (" + kind + ")",
		fmt.Sprintf("404 in %d of %d", n404, done), "—", "goal: never 404 (read-your-writes)"})
	if ctx.Err() != nil {
		return rows, ctx.Err()
	}

	// 3b. POST /collections under the same concurrency, the whole pipeline running.
	c.logf("samla (%s): POST /collections for %s", kind, c.postDur)
	body := postBody()
	post := load(ctx, c, c.postDur, func(int) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, base+"/collections", bytes.NewReader(body))
		setPostHeaders(req, key)
		return req
	}, http.StatusCreated)
	rows = append(rows, [4]string{"POST /collections, durable, whole pipeline running (" + kind + ")",
		fmt.Sprintf("%.0f/s, p99 %s", post.rps(), ms(post.pct(0.99))) + codeNote(post), "—", "goal: ≥ 5k/s, p99 ≤ 20 ms"})
	goal := "goal: p99 ≤ 10 ms embedded"
	if kind == "ClickHouse" {
		goal = "goal: p99 ≤ 100 ms distributed"
	}
	rows = append(rows, [4]string{"201 → status visible (" + kind + ")",
		fmt.Sprintf("p50 %s, p99 %s (%d)", ms(vis.pct(0.5)), ms(vis.pct(0.99)), len(vis.lat)), "—", goal})
	return rows, ctx.Err()
}

// codeNote names the answers a load run did not expect, if any.
func codeNote(r result) string {
	var parts []string
	for code, n := range r.codes {
		parts = append(parts, fmt.Sprintf("%d×%d", n, code))
	}
	if r.errs > 0 {
		parts = append(parts, fmt.Sprintf("%d errors", r.errs))
	}
	if r.truncated {
		parts = append(parts, "latencies truncated")
	}
	if len(parts) == 0 {
		return ""
	}
	slices.Sort(parts)
	return " (unexpected: " + strings.Join(parts, ", ") + ")"
}

func (c config) logf(format string, a ...any) {
	if c.verbose {
		fmt.Fprintf(os.Stderr, "bench-http: "+format+"\n", a...)
	}
}

// load drives c.conc workers, each on its own keep-alive connection, for d; every request's
// latency is kept (up to maxSamples). Answers other than want count in codes.
func load(ctx context.Context, c config, d time.Duration, mk func(i int) *http.Request, want int) result {
	tr := &http.Transport{MaxIdleConnsPerHost: c.conc, MaxConnsPerHost: c.conc, DisableCompression: true}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	per := c.maxSamples / c.conc
	type wres struct {
		n, errs int
		codes   map[int]int
		lat     []time.Duration
		trunc   bool
	}
	out := make([]wres, c.conc)
	var wg sync.WaitGroup
	began := time.Now()
	for w := range c.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &out[w]
			r.codes = map[int]int{}
			r.lat = make([]time.Duration, 0, 1<<14)
			for i := w; ctx.Err() == nil; i += c.conc {
				req := mk(i).WithContext(ctx)
				t0 := time.Now()
				resp, err := cl.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						r.errs++
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat := time.Since(t0)
				r.n++
				if resp.StatusCode != want {
					r.codes[resp.StatusCode]++
				}
				if len(r.lat) < per {
					r.lat = append(r.lat, lat)
				} else {
					r.trunc = true
				}
			}
		}()
	}
	wg.Wait()
	res := result{codes: map[int]int{}, elapsed: time.Since(began)}
	for _, r := range out {
		res.n += r.n
		res.errs += r.errs
		res.truncated = res.truncated || r.trunc
		for k, v := range r.codes {
			res.codes[k] += v
		}
		res.lat = append(res.lat, r.lat...)
	}
	slices.Sort(res.lat)
	return res
}

func postBody() []byte {
	return []byte(`{"company":"se-demo-insurer","loginMethod":"SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK",` +
		`"parameters":[{"type":"SwedishPersonalNumberParameter","personalNumber":"199001010017"}]}`)
}

func setPostHeaders(req *http.Request, key string) {
	req.Header.Set("Authorization-token", key)
	req.Header.Set("Service-Version", "2026-04-01")
	req.Header.Set("Content-Type", "application/json")
}

func create(cl *http.Client, base, key string) (string, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/collections", bytes.NewReader(postBody()))
	setPostHeaders(req, key)
	resp, err := cl.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("POST /collections: %d %s", resp.StatusCode, b)
	}
	var v struct {
		CollectionID string `json:"collectionId"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.CollectionID == "" {
		return "", fmt.Errorf("POST /collections: no collectionId in %s", b)
	}
	return v.CollectionID, nil
}

// status answers the status code of one poll and the collection's status when 200.
func status(cl *http.Client, base, key, id string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodGet, base+"/collections/"+id+"/status", nil)
	req.Header.Set("Authorization-token", key)
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, "", nil
	}
	var v struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(b, &v)
	return resp.StatusCode, v.Status, nil
}

func awaitFinal(ctx context.Context, cl *http.Client, base, key string, ids []string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	pending := slices.Clone(ids)
	for len(pending) > 0 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d collections not final after %s", len(pending), len(ids), bound)
		}
		next := pending[:0]
		for _, id := range pending {
			code, st, err := status(cl, base, key, id)
			if err != nil || code != http.StatusOK || !collection.Status(st).IsFinal() {
				next = append(next, id)
			}
		}
		pending = next
		if len(pending) > 0 {
			sleep(ctx, 200*time.Millisecond)
		}
	}
	return nil
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
	slices.Sort(res.lat)
	return res, n404, done, nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// proc is a started server: stop ends it (SIGTERM, then SIGKILL after 10 s) and waits for it.
type proc struct {
	name, log string
	cmd       *exec.Cmd
	exited    chan struct{}
	once      sync.Once
}

func start(ctx context.Context, name, bin string, args []string, env map[string]string, logPath string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	// The children get none of the caller's SAMLA_* settings but those given here.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SAMLA_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: a terminal's Ctrl-C reaches the harness, which stops the child itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.exited) }()
	go func() {
		select {
		case <-ctx.Done():
			p.stop()
		case <-p.exited:
		}
	}()
	return p, nil
}

func (p *proc) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// withLog adds the tail of the server's log to err.
func (p *proc) withLog(err error) error {
	b, _ := os.ReadFile(p.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return fmt.Errorf("%w\n--- tail of %s log ---\n%s", err, p.name, b)
}

func waitReady(ctx context.Context, p *proc, url string, want int, bound time.Duration) error {
	cl := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(bound)
	for {
		select {
		case <-p.exited:
			return p.withLog(fmt.Errorf("%s exited before it was ready", p.name))
		default:
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		resp, err := cl.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return p.withLog(errors.New(p.name + " not ready after " + bound.String()))
		}
		sleep(ctx, 100*time.Millisecond)
	}
}
