package projections

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/samla/samla/eventschema"
)

// EventReader is the part of the event store a rebuild reads: every event after a global
// position, in commit order (command/eventstore.Store satisfies it).
type EventReader interface {
	ReadAll(ctx context.Context, after uint64, limit int) ([]eventschema.Envelope, error)
}

// HeadPositioner is what an event store may add so that a rebuild can tell how far it has got:
// the position of its last event (both event store adapters have it). On the SQLite store
// positions are dense, so the head is also the number of events.
type HeadPositioner interface {
	HeadPosition(ctx context.Context) (uint64, error)
}

// RebuildBatchSize is how many events a rebuild reads and hands to the projectors at once on
// SQLite, and ClickHouseRebuildBatchSize on ClickHouse. At 1000 a rebuild's profile was
// per-batch overhead (a read-model transaction, a GetMany, a ClickHouse INSERT and its revision
// lookups); from 5000 on SQLite it is the folding and writing of rows. ClickHouse answers each
// batch's GetMany and revision lookups with a FINAL scan, so fewer, larger batches went 11k ->
// 17k events/s there (5000 -> 20000). A few batches in flight stay well under 100 MB.
const (
	RebuildBatchSize           = 10000
	ClickHouseRebuildBatchSize = 20000
)

// rebuildGCPercent is GOGC while a rebuild runs.
const rebuildGCPercent = 400

// RebuildOptions tune a rebuild; the zero value is the default.
type RebuildOptions struct {
	// BatchSize is the events per page read and per batch handed to the projectors
	// (RebuildBatchSize or ClickHouseRebuildBatchSize when <= 0).
	BatchSize int
	// Progress, when set, is called after every batch that every projector has written, and
	// once more at the end, from one goroutine at a time.
	Progress func(RebuildProgress)
}

// RebuildProgress is how far a rebuild has got.
type RebuildProgress struct {
	// Events is how many events every read model has folded so far.
	Events int
	// Position is the event store position of the last of them; Head is the store's head
	// position when the rebuild started (0 when the store cannot tell), so Position/Head is the
	// fraction done.
	Position, Head uint64
	// ReadModels is how many read models are being built.
	ReadModels int
	Elapsed    time.Duration
	Done       bool
}

// Rebuild rebuilds every read model from the event store with the default options; see
// RebuildWith.
func Rebuild(ctx context.Context, reader EventReader, models *ReadModels) (int, error) {
	return RebuildWith(ctx, reader, models, RebuildOptions{})
}

// RebuildWith replays the whole event store through every projector into new tables (SQLite: a
// new directory of databases; ClickHouse: a new database) and, once every model is complete,
// swaps them for the served ones (ReadModels.beginRebuild says how), so that a reader never sees
// half a read model and a failed, cancelled or killed rebuild leaves the served models as they
// were; its leftovers are removed by the next rebuild or open. models then serves the rebuilt
// tables. It returns how many events it replayed.
//
// The pipeline: one goroutine reads pages of the event store, one opens each event's personal
// data once for every projector that wants it opened (which each projector did for itself
// before: two thirds of a rebuild's CPU), and each read model folds and writes in a goroutine
// of its own, so that the models, each in its own database, are built side by side.
//
// Stop the projections' consumers first. Their committed Kafka offsets are kept: once the
// rebuild is done they resume from them, and what they deliver again the rebuilt models already
// hold, which the projectors ignore by revision; events appended after the rebuild read the
// store's end reach the models through Kafka as usual.
func RebuildWith(ctx context.Context, reader EventReader, models *ReadModels, opts RebuildOptions) (int, error) {
	size := opts.BatchSize
	switch {
	case size > 0:
	case models.conn != nil:
		size = ClickHouseRebuildBatchSize
	default:
		size = RebuildBatchSize
	}
	// A rebuild allocates envelopes, decoded events and rows by the gigabyte, all short-lived;
	// at the default GOGC the collector ran every few batches and took a tenth of the CPU.
	// The live heap stays a few batches, so trading memory for fewer cycles is cheap here.
	defer debug.SetGCPercent(debug.SetGCPercent(rebuildGCPercent))
	start := time.Now()
	var head uint64
	if hp, ok := reader.(HeadPositioner); ok {
		h, err := hp.HeadPosition(ctx)
		if err != nil {
			return 0, fmt.Errorf("rebuild: read the event store's head position: %w", err)
		}
		head = h
	}
	build, err := models.beginRebuild(ctx)
	if err != nil {
		return 0, fmt.Errorf("rebuild: %w", err)
	}
	readModels := len(build.target.Projectors())
	total, last, err := replay(ctx, reader, build.target, size, 0, func(events int, position uint64) {
		if opts.Progress != nil {
			opts.Progress(RebuildProgress{Events: events, Position: position, Head: head,
				ReadModels: readModels, Elapsed: time.Since(start)})
		}
	})
	if err != nil {
		if aerr := build.abort(); aerr != nil {
			err = errors.Join(err, fmt.Errorf("remove the unfinished rebuild: %w", aerr))
		}
		return total, fmt.Errorf("rebuild: %w", err)
	}
	if err := build.commit(ctx); err != nil {
		return total, fmt.Errorf("rebuild: swap in the rebuilt read models: %w", err)
	}
	// Events appended after the rebuild read the store's end, which a projection still running
	// elsewhere (nothing stops one against ClickHouse and EventStoreDB) may have written into
	// the tables just replaced, are folded into the new ones: the projectors ignore what they
	// hold already (found in review).
	caughtUp, _, err := replay(ctx, reader, models, size, last, func(int, uint64) {})
	if err != nil {
		return total, fmt.Errorf("rebuild: fold the events appended during the rebuild: %w", err)
	}
	total += caughtUp
	if opts.Progress != nil {
		opts.Progress(RebuildProgress{Events: total, Position: head, Head: head,
			ReadModels: readModels, Elapsed: time.Since(start), Done: true})
	}
	return total, nil
}

// rebuildBatch is one page of the event store: as stored, and opened for the projectors that
// take opened events (nil until opened).
type rebuildBatch struct {
	raw, opened []eventschema.Envelope
}

// replay streams the event store through target's projectors; see RebuildWith.
// It starts after the global position from (0: the beginning) and returns how many events it
// replayed and the position of the last one (from when none).
func replay(ctx context.Context, reader EventReader, target *ReadModels, size int, from uint64,
	progress func(events int, position uint64)) (int, uint64, error) {
	projectors := target.Projectors()
	g, ctx := errgroup.WithContext(ctx)

	// A bounded queue between each stage: the reader and the opener run ahead of the slowest
	// read model by at most two batches each, which bounds memory.
	read := make(chan []eventschema.Envelope, 2)
	var total int
	after := from
	g.Go(func() error {
		defer close(read)
		for {
			batch, err := reader.ReadAll(ctx, after, size)
			if err != nil {
				return fmt.Errorf("read events after position %d: %w", after, err)
			}
			if len(batch) == 0 {
				return nil
			}
			last := batch[len(batch)-1].Position
			if last <= after {
				// A reader that does not advance would loop forever.
				return fmt.Errorf("event store returned position %d after %d", last, after)
			}
			select {
			case read <- batch:
			case <-ctx.Done():
				return ctx.Err()
			}
			total += len(batch)
			after = last
		}
	})

	queues := make([]chan rebuildBatch, len(projectors))
	for i := range queues {
		queues[i] = make(chan rebuildBatch, 2)
	}
	g.Go(func() error {
		defer func() {
			for _, q := range queues {
				close(q)
			}
		}()
		for raw := range read {
			opened, err := openBatch(ctx, target.keys, raw)
			if err != nil {
				return err
			}
			b := rebuildBatch{raw: raw, opened: opened}
			for _, q := range queues {
				select {
				case q <- b:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		return nil
	})

	// Each read model reports every batch it wrote, in order; a batch is done once all have.
	type written struct {
		model    int
		events   int
		position uint64
	}
	done := make(chan written, len(projectors)*4)
	var wg sync.WaitGroup
	for i, p := range projectors {
		wg.Add(1)
		g.Go(func() error {
			defer wg.Done()
			// The projectors that would open the events themselves get them opened once, here.
			inner, wantsOpened := p.(opening)
			for b := range queues[i] {
				batch, handler := b.raw, p
				if wantsOpened {
					batch, handler = b.opened, inner.Projector
				}
				if err := handler.Handle(ctx, batch); err != nil {
					return fmt.Errorf("projection %s at positions %d..%d: %w",
						p.Name(), b.raw[0].Position, b.raw[len(b.raw)-1].Position, err)
				}
				select {
				case done <- written{i, len(b.raw), b.raw[len(b.raw)-1].Position}:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
	}
	go func() { wg.Wait(); close(done) }()
	g.Go(func() error {
		var (
			seen     = make([]int, len(projectors)) // batches each model has written
			cumul    []int                          // events up to and including batch k
			position []uint64                       // last position of batch k
			complete int                            // batches every model has written
		)
		for w := range done {
			k := seen[w.model]
			seen[w.model]++
			if k == len(cumul) {
				prev := 0
				if k > 0 {
					prev = cumul[k-1]
				}
				cumul, position = append(cumul, prev+w.events), append(position, w.position)
			}
			if low := slices.Min(seen); low > complete {
				complete = low
				progress(cumul[complete-1], position[complete-1])
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return total, after, err
	}
	return total, after, nil
}

// openBatch returns copies of batch's envelopes with their personal member opened
// (eventschema.OpenPersonal), batch itself untouched. The events are opened by as many
// goroutines as there are CPUs: opening is a JSON scan and, for sealed members, a key lookup and
// an AEAD open per event.
func openBatch(ctx context.Context, keys eventschema.Keys, batch []eventschema.Envelope) ([]eventschema.Envelope, error) {
	opened := make([]eventschema.Envelope, len(batch))
	workers := min(runtime.GOMAXPROCS(0), max(1, len(batch)/256))
	chunk := (len(batch) + workers - 1) / workers
	g, ctx := errgroup.WithContext(ctx)
	for from := 0; from < len(batch); from += chunk {
		to := min(from+chunk, len(batch))
		g.Go(func() error {
			for i := from; i < to; i++ {
				env := batch[i]
				payload, _, err := eventschema.OpenPersonal(ctx, keys, env.Payload)
				if err != nil {
					return fmt.Errorf("open %s at %s/%d: %w", env.Type, env.Stream, env.Revision, err)
				}
				env.Payload = payload
				opened[i] = env
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return opened, nil
}
