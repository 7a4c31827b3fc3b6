package relay

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/command/eventstore"
	"github.com/samla/samla/command/eventstore/sqlite"
	"github.com/samla/samla/command/eventstore/storetest"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/kafka"
)

func openSQLite(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newEvent(i int) eventschema.Envelope {
	return storetest.NewEvent("collection.status-changed", map[string]any{"n": i})
}

// TestRelayWithSQLiteStore runs the relay against the real embedded event store, with
// concurrent appenders while it runs and a relay restart in the middle.
func TestRelayWithSQLiteStore(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	store := openSQLite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	appendAll := func(writers, perWriter int) {
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stream := fmt.Sprintf("%s-%s", categories[w%len(categories)], uuid.NewString())
				for i := range perWriter {
					if _, err := store.Append(ctx, stream, eventstore.Any(), []eventschema.Envelope{newEvent(i), newEvent(i)}); err != nil {
						t.Errorf("append: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	appendAll(4, 25) // 200 events before the relay starts

	r := runRelay(t, Config{Store: store, Kafka: broker.Conn()})
	appendAll(6, 20) // 240 more while it runs
	r.stop(t)
	appendAll(3, 10) // 60 while it is down
	runRelay(t, Config{Store: store, Kafka: broker.Conn()})
	appendAll(5, 10) // 100 after the restart
	waitCheckpoint(t, broker.Conn(), 600)

	events, err := store.ReadAll(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 600 {
		t.Fatalf("store holds %d events, want 600", len(events))
	}
	s := checkLog(t, events, published(t, broker.Conn()))
	s.wantOnce(t, 600)
}

// BenchmarkAppendToConsume measures the whole embedded path for one event at a time: an
// acknowledged append to the SQLite store, the relay, the embedded broker and a consumer
// group handler.
func BenchmarkAppendToConsume(b *testing.B) {
	for _, syncWrites := range []bool{false, true} {
		b.Run(fmt.Sprintf("kafkaSyncWrites=%v", syncWrites), func(b *testing.B) {
			broker, err := kafka.StartEmbedded(b.TempDir(), testLogger(), kafka.WithSyncWrites(syncWrites))
			if err != nil {
				b.Fatal(err)
			}
			defer broker.Close()
			store := openSQLite(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			relayDone := make(chan error, 1)
			go func() {
				relayDone <- New(Config{Store: store, Kafka: broker.Conn(), Logger: testLogger()}).Run(ctx)
			}()
			arrived := make(chan struct{}, 16)
			consumeDone := make(chan error, 1)
			go func() {
				consumeDone <- kafka.Consume(ctx, kafka.ConsumerConfig{Kafka: broker.Conn(), GroupID: "bench",
					Topics: eventschema.Topics(), MaxWait: time.Millisecond}, testLogger(),
					func(_ context.Context, batch []eventschema.Envelope) error {
						for range batch {
							arrived <- struct{}{}
						}
						return nil
					})
			}()
			stream := "collection-" + uuid.NewString()
			appendOne := func(i int) {
				if _, err := store.Append(ctx, stream, eventstore.Any(), []eventschema.Envelope{newEvent(i)}); err != nil {
					b.Fatal(err)
				}
			}
			appendOne(0) // warm up: group joined, connections open
			<-arrived
			b.ResetTimer()
			for i := range b.N {
				appendOne(i + 1)
				<-arrived
			}
			b.StopTimer()
			cancel()
			<-relayDone
			<-consumeDone
		})
	}
}
