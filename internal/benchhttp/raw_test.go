package main

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The raw client must read every shape of answer net/http's server gives, and stay in step on a
// kept connection: a mistake in skipping a body shows as the next status line read wrongly.
func TestRawConnReadsEveryBodyShape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/length":
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"collectionId":"x"}`))
		case "/chunked":
			w.WriteHeader(http.StatusOK)
			for range 3 {
				_, _ = w.Write([]byte(strings.Repeat("a", 5000)))
				w.(http.Flusher).Flush()
			}
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/close":
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("gone"))
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dialRaw(ctx, srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wire := func(path string) []byte {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		var b strings.Builder
		if err := req.Write(&b); err != nil {
			t.Fatal(err)
		}
		return []byte(b.String())
	}
	for round := range 2 {
		for _, tc := range []struct {
			path string
			code int
		}{{"/length", 201}, {"/chunked", 200}, {"/empty", 204}, {"/length", 201}} {
			code, keep, err := conn.exchange(wire(tc.path))
			if err != nil || code != tc.code || !keep {
				t.Fatalf("round %d %s: code %d keep %v err %v, want %d kept", round, tc.path, code, keep, err, tc.code)
			}
		}
	}
	code, keep, err := conn.exchange(wire("/close"))
	if err != nil || code != 404 || keep {
		t.Fatalf("/close: code %d keep %v err %v, want 404 not kept", code, keep, err)
	}
}

// load counts answers it did not want, and its requests reach the server as written.
func TestLoadCountsAnswers(t *testing.T) {
	var posts, gets atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Authorization-token") == "k" {
			posts.Add(1)
			w.WriteHeader(http.StatusCreated)
			return
		}
		gets.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()
	post, _ := http.NewRequest(http.MethodPost, srv.URL+"/collections", strings.NewReader(`{}`))
	post.Header.Set("Authorization-token", "k")
	get, _ := http.NewRequest(http.MethodGet, srv.URL+"/x", nil)
	r := load(context.Background(), config{conc: 1, maxSamples: 1000}, 300*time.Millisecond, []*http.Request{post, get}, http.StatusCreated)
	// The server may have seen one request more: the one the load's end cut off.
	p, g := int(posts.Load()), int(gets.Load())
	if r.n == 0 || r.errs != 0 || (r.n != p+g && r.n != p+g-1) || p == 0 || g == 0 ||
		(r.codes[http.StatusTeapot] != g && r.codes[http.StatusTeapot] != g-1) {
		t.Fatalf("n %d errs %d codes %v; server saw %d POSTs, %d GETs", r.n, r.errs, r.codes, p, g)
	}
	if len(r.lat) != min(r.n, 1000) || r.truncated != (r.n > 1000) {
		t.Fatalf("%d latencies (truncated %v) for %d requests, at most 1000 kept", len(r.lat), r.truncated, r.n)
	}
}

// Answers net/http's server never gives, written byte for byte: an interim answer before the
// final one, header values with several tokens, trailers, and a chunk without its CRLF (last:
// the connection is out of step after it).
func TestRawConnReadsScriptedAnswers(t *testing.T) {
	script := []struct {
		answer string
		code   int
		keep   bool
		bad    bool
	}{
		{"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, true, false},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n", 200, true, false},
		{"HTTP/1.1 201 Created\r\ncontent-length:  0 \r\n\r\n", 201, true, false},
		{"HTTP/1.1 404 Not Found\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n", 404, false, false},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXX0\r\n\r\n", 0, false, true},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		for _, s := range script {
			for { // one request: up to its empty line
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if line == "\r\n" {
					break
				}
			}
			if _, err := conn.Write([]byte(s.answer)); err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dialRaw(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	for i, s := range script {
		code, keep, err := conn.exchange(req)
		if s.bad {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("answer %d: err %v, want errMalformed", i, err)
			}
			continue
		}
		if err != nil || code != s.code || keep != s.keep {
			t.Fatalf("answer %d: code %d keep %v err %v, want %d keep %v", i, code, keep, err, s.code, s.keep)
		}
	}
}
