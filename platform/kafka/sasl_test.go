package kafka

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/samla/samla/eventschema"
)

// TestEmbeddedRequiresSASL: a client without credentials, or with a wrong password, can neither
// produce, fetch, join a group nor create topics on the embedded broker; samla's own clients
// (Embedded.Conn) can do all of it.
func TestEmbeddedRequiresSASL(t *testing.T) {
	t.Parallel()
	e := startEmbedded(t, t.TempDir())
	topic := eventschema.Topic("collection")
	host, port, err := net.SplitHostPort(e.Brokers()[0])
	if err != nil {
		t.Fatal(err)
	}
	leader := kafkago.Broker{Host: host, ID: 0}
	if leader.Port, err = strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	wrongMech, err := NewMechanism(EmbeddedMechanism, EmbeddedUser, strings.Repeat("0", 2*passwordBytes))
	if err != nil {
		t.Fatal(err)
	}
	outsiders := map[string]Conn{
		"no credentials": {Brokers: e.Brokers()},
		"wrong password": {Brokers: e.Brokers(), SASL: wrongMech},
	}

	// samla's clients: produce, consume with a group, create a topic.
	publish(t, e.Conn(), toKafka(t, envelope("collection-1", 0, 1)))
	c := consumeInBackground(t, e.Conn(), "sasl-group", nil)
	c.waitFor(t, "the event, through the group", func() bool { return c.committedEvents() == 1 })
	c.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := EnsureTopics(ctx, e.Conn(), []string{"samla.sasl.created"}, 1); err != nil {
		t.Fatalf("samla's client cannot create a topic: %v", err)
	}
	if e.cluster.TopicInfo("samla.sasl.created") == nil {
		t.Fatal("the topic samla's client created is missing")
	}

	for name, conn := range outsiders {
		t.Run(name, func(t *testing.T) {
			// Produce.
			w := NewWriter(conn)
			w.MaxAttempts = 1
			wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
			err := w.WriteMessages(wctx, toKafka(t, envelope("collection-forged", 0, 99)))
			wcancel()
			w.Close()
			if err == nil {
				t.Fatal("produced without valid credentials")
			}
			t.Logf("produce refused: %v", err)

			// Fetch, without a group.
			dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
			// DialPartition goes to the leader without a metadata request first, so that
			// without credentials the fetch itself is what the broker sees.
			pc, err := conn.Dialer().DialPartition(dctx, "tcp", "", kafkago.Partition{Topic: topic, ID: 0, Leader: leader})
			dcancel()
			if err == nil {
				pc.SetDeadline(time.Now().Add(5 * time.Second))
				b := pc.ReadBatch(1, 1<<20)
				m, rerr := b.ReadMessage()
				b.Close()
				pc.Close()
				if rerr == nil {
					t.Fatalf("fetched %q without valid credentials", m.Value)
				}
				t.Logf("fetch refused: %v", rerr)
			} else {
				t.Logf("dial refused: %v", err)
			}

			// Consume with a group: nothing arrives.
			oc := consumeInBackground(t, conn, "outsider-group", nil)
			time.Sleep(2 * time.Second)
			if n := len(oc.handled()); n != 0 {
				t.Fatalf("a group without valid credentials consumed %d events", n)
			}
			oc.stop(t)

			// Create a topic.
			tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
			err = EnsureTopics(tctx, conn, []string{"samla.sasl.forged"}, 1)
			tcancel()
			if err == nil {
				t.Fatal("created a topic without valid credentials")
			}
			if e.cluster.TopicInfo("samla.sasl.forged") != nil {
				t.Fatal("a topic was created without valid credentials")
			}
		})
	}
	// Nothing forged reached the log.
	if got := countMessages(t, e.Conn(), topic); got != 1 {
		t.Fatalf("the collection topic holds %d messages, want only samla's 1", got)
	}
}

// TestEmbeddedPasswordFile: the password is generated once into a 0600 file, reused across
// restarts (clients of the earlier start still authenticate), and a file with looser
// permissions or a malformed one stops the start.
func TestEmbeddedPasswordFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEmbedded(t, dir)
	path := filepath.Join(dir, PasswordFileName)
	if e.PasswordFile() != path {
		t.Fatalf("PasswordFile() = %s, want %s", e.PasswordFile(), path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Fatalf("password file mode %04o, want 0600", perm)
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pw := strings.TrimSuffix(string(first), "\n")
	if raw, err := hex.DecodeString(pw); err != nil || len(raw) < 32 {
		t.Fatalf("password %q is not 32 random bytes in hex", pw)
	}
	if fi, err := os.Stat(filepath.Join(dir, kfakeSASLFile)); err == nil && fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s mode %04o, want 0600", kfakeSASLFile, fi.Mode().Perm())
	}
	oldConn := e.Conn()
	e.Close()

	// A data directory from before SASL holds a sasl.json without users; kfake would load it
	// in place of samla's user.
	if err := os.WriteFile(filepath.Join(dir, kfakeSASLFile), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e = startEmbedded(t, dir)
	again, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(first) {
		t.Fatal("the password changed across a restart")
	}
	oldConn.Brokers = e.Brokers()
	publish(t, oldConn, toKafka(t, envelope("collection-1", 0, 1)))
	e.Close()

	for _, tc := range []struct {
		name    string
		content string
		mode    os.FileMode
		want    string
	}{
		{"world-readable", string(first), 0o644, "mode 0644"},
		{"group-writable", string(first), 0o620, "mode 0620"},
		{"malformed", "hunter2\n", 0o600, "malformed"},
		{"not hex", strings.Repeat("z", 2*passwordBytes), 0o600, "malformed"},
	} {
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		b, err := StartEmbedded(dir, testLogger(t), WithSyncWrites(false))
		if err == nil {
			b.Close()
			t.Fatalf("%s password file: started", tc.name)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s password file: %v, want it to say %q", tc.name, err, tc.want)
		}
	}

	// Put right, the broker starts again (the refusals released the directory lock).
	if err := os.WriteFile(path, first, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	e = startEmbedded(t, dir)
	if got := countMessages(t, e.Conn(), eventschema.Topic("collection")); got != 1 {
		t.Fatalf("after the restarts the collection topic holds %d messages, want 1", got)
	}

	// A fresh directory gets a different password.
	other := startEmbedded(t, t.TempDir())
	b, err := os.ReadFile(other.PasswordFile())
	if err != nil {
		t.Fatal(err)
	}
	if string(b) == string(first) {
		t.Fatal("two data directories got the same password")
	}
}

// TestEmbeddedDropsConnectionsThatDoNotAuthenticate: a connection to the broker's port that
// does not get past authentication is dropped after the auth timeout (not the ten-minute idle
// one), so that processes without the credential cannot hold the broker's connections; samla's
// own writer, whose pooled connection authenticated and then idles past that timeout, goes on.
func TestEmbeddedDropsConnectionsThatDoNotAuthenticate(t *testing.T) {
	t.Parallel()
	const auth = 300 * time.Millisecond
	e := startEmbedded(t, t.TempDir(), withAuthTimeout(auth))

	raw, err := net.Dial("tcp", e.Brokers()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	start := time.Now()
	_ = raw.SetReadDeadline(start.Add(10 * time.Second))
	if n, err := raw.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("a connection that sends nothing: read %d bytes, %v; want the broker to close it (EOF)", n, err)
	}
	if took := time.Since(start); took > 10*auth {
		t.Fatalf("the broker closed the silent connection after %v, want about %v", took, auth)
	}

	w := NewWriter(e.Conn())
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 2 {
		if err := w.WriteMessages(ctx, toKafka(t, envelope("collection-auth", uint64(i), uint64(i+1)))); err != nil {
			t.Fatalf("samla's writer, write %d: %v", i, err)
		}
		time.Sleep(3 * auth) // its connection idles past the auth timeout
	}
}
