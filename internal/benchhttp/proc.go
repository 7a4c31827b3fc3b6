package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a started server: stop ends it (SIGTERM, then SIGKILL after 10 s) and waits for it.
type proc struct {
	name, log string
	cmd       *exec.Cmd
	exited    chan struct{}
	once      sync.Once
}

// childEnv is the harness's environment without its SAMLA_* settings, plus env: a child gets no
// SAMLA_* setting but those the harness gives it.
func childEnv(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SAMLA_") {
			out = append(out, kv)
		}
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

func start(ctx context.Context, name, bin string, args []string, env map[string]string, logPath string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", logPath, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = childEnv(env)
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

func (p *proc) pid() int { return p.cmd.Process.Pid }

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
			_, _ = io.Copy(io.Discard, resp.Body)
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

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// cpuTime is the CPU time (user + system) a process has used so far, from /proc/<pid>/stat.
func cpuTime(pid int, ticksPerSecond int64) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read the CPU time of pid %d: %w", pid, err)
	}
	ticks, err := parseStatCPU(string(b))
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return time.Duration(ticks) * time.Second / time.Duration(ticksPerSecond), nil
}

// parseStatCPU answers utime+stime (clock ticks) of a /proc/<pid>/stat line. The command name
// (field 2) is in parentheses and may hold spaces and parentheses itself, so the fields are
// counted from the last ')'.
func parseStatCPU(stat string) (int64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in /proc stat %q", stat)
	}
	// After ')': field 3 (state) is rest[0]; utime is field 14, stime field 15.
	rest := strings.Fields(stat[i+1:])
	if len(rest) < 13 {
		return 0, fmt.Errorf("short /proc stat: %d fields after the command name", len(rest))
	}
	utime, err := strconv.ParseInt(rest[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime in /proc stat: %w", err)
	}
	stime, err := strconv.ParseInt(rest[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime in /proc stat: %w", err)
	}
	return utime + stime, nil
}

// clockTicks is the kernel's USER_HZ (getconf CLK_TCK), 100 when getconf cannot tell.
func clockTicks() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 100
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || n <= 0 {
		return 100
	}
	return n
}

// rss is a process's resident set size in bytes, from VmRSS in /proc/<pid>/status.
func rss(pid int) (int64, error) {
	kb, err := statusKB(pid, "VmRSS")
	return kb * 1024, err
}

// rssAnon is the anonymous part of the resident set of pid in bytes (RssAnon: the heap, the
// stacks, SQLite's memory), without the pages of the binary and the libraries (RssFile), whose
// count depends on what the page cache held when they were first touched.
func rssAnon(pid int) (int64, error) {
	kb, err := statusKB(pid, "RssAnon")
	return kb * 1024, err
}

// statusKB reads the field of /proc/<pid>/status, in kB.
func statusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read the %s of pid %d: %w", field, pid, err)
	}
	kb, err := parseStatusKB(string(b), field)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return kb, nil
}

// parseStatusKB answers the field's line (VmRSS, RssAnon) of /proc/<pid>/status in kB.
func parseStatusKB(status, field string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		v, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected %s line %q", field, line)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", field, line, err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("no %s in /proc status (a kernel thread, or the process has exited)", field)
}

func mb(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }
