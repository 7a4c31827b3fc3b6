package projections

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/samla/samla/domain"
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
// lookups). ClickHouse answers each batch's GetMany and revision lookups with a FINAL scan, so
// fewer, larger batches went 11k -> 17k events/s there (5000 -> 20000; 10000 was no faster).
// On SQLite, where that overhead is small, batches of 10000 were chosen in
// BenchmarkRebuild, which rebuilds again and again in one process; but `samla projections
// rebuild` is a process of its own that touches every page of its heap for the first time, and
// each batch in flight (a few per stage) grows the heap the collector lets it reach. A perf
// profile of the command found a seventh of its CPU in the kernel's page faults (182k of them,
// 760 MB resident for 167k events). With 2500, GOGC 150 (RebuildWith) and 2 MiB page caches
// (readdb.OpenSQLiteBulk) it took 46k faults and 210 MB, and ran 20-30 % faster in runs
// alternating with the old settings on this 2-core VM: 27-30k against 21-24k events/s in a
// busy hour, 31-41k against 27-31k in a quiet one.
const (
	RebuildBatchSize           = 2500
	ClickHouseRebuildBatchSize = 20000
)

// rebuildGCPercent is GOGC while a rebuild runs: see RebuildWith.
const rebuildGCPercent = 150

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
	// at the default GOGC the collector ran every few batches and took a tenth of the CPU. Not
	// much more, though: every byte the heap grows by is a page the kernel faults in once, and
	// at 400 (a heap goal of 5x the batches in flight) the faults cost more than the cycles
	// saved. With ClickHouse (batches of 20000), 150 against 400 in alternating runs of 167k
	// events: 23k against 19k events/s and 0.76-0.79 GB resident against 1.2-1.3 GB.
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

// rebuildBatch is one page of the event store: as stored, and taken apart once for every
// projector (openBatch): opened, the parts of each personal member, and decoded.
type rebuildBatch struct {
	raw, opened []eventschema.Envelope
	parts       []eventschema.PersonalParts
	// events are the opened envelopes decoded, nil where one does not decode (its projector
	// then decodes it itself and fails as it always did, or ignores it).
	events []domain.Event
	// pending counts the projectors still to fold the batch; the last one drops it from the
	// decode memo.
	pending atomic.Int32
}

// decodeMemo is the Decoder of a rebuild's projectors: it answers an envelope of a batch in
// flight with the event openBatch decoded from it, once for all of them (each decoded it again
// before, a fifth of a rebuild's CPU), and decodes any other envelope itself. An envelope is
// answered from a batch only if it is the batch's own opened envelope, payload and all.
//
// The decoded events are shared by the projectors' goroutines, and the rows the projectors
// keep share the events' maps, slices and pointers (ExtraInformation, RequiredInputTypes, the
// EID order, the deadline, a document's content): no projector may change an event, or a row
// in place, only replace what it changes.
type decodeMemo struct {
	reg      *eventschema.Registry
	mu       sync.RWMutex
	inFlight []*rebuildBatch // in position order
}

func (d *decodeMemo) Decode(env eventschema.Envelope) (domain.Event, error) {
	if ev := d.lookup(env); ev != nil {
		return ev, nil
	}
	return d.reg.Decode(env)
}

func (d *decodeMemo) lookup(env eventschema.Envelope) domain.Event {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, b := range d.inFlight {
		n := len(b.opened)
		if n == 0 || env.Position < b.opened[0].Position || env.Position > b.opened[n-1].Position {
			continue
		}
		i := sort.Search(n, func(i int) bool { return b.opened[i].Position >= env.Position })
		if i == n {
			return nil
		}
		o := b.opened[i]
		if o.EventID != env.EventID || o.Type != env.Type || o.SchemaVersion != env.SchemaVersion ||
			!samePayload(o.Payload, env.Payload) {
			return nil
		}
		return b.events[i]
	}
	return nil
}

// samePayload reports whether a and b are the same bytes in memory, not merely equal ones.
func samePayload(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func (d *decodeMemo) add(b *rebuildBatch) {
	d.mu.Lock()
	d.inFlight = append(d.inFlight, b)
	d.mu.Unlock()
}

func (d *decodeMemo) drop(b *rebuildBatch) {
	d.mu.Lock()
	d.inFlight = slices.DeleteFunc(d.inFlight, func(x *rebuildBatch) bool { return x == b })
	d.mu.Unlock()
}

// openedHandler is a projector that takes a rebuild's batch taken apart (the audit history,
// which opens nothing but reads what the personal members hold).
type openedHandler interface {
	HandleOpened(ctx context.Context, batch []eventschema.Envelope, parts []eventschema.PersonalParts, events []domain.Event) error
}

// replay streams the event store through target's projectors; see RebuildWith.
// It starts after the global position from (0: the beginning) and returns how many events it
// replayed and the position of the last one (from when none).
func replay(ctx context.Context, reader EventReader, target *ReadModels, size int, from uint64,
	progress func(events int, position uint64)) (int, uint64, error) {
	memo := &decodeMemo{reg: target.reg}
	projectors := target.projectors(memo)
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

	queues := make([]chan *rebuildBatch, len(projectors))
	for i := range queues {
		queues[i] = make(chan *rebuildBatch, 2)
	}
	g.Go(func() error {
		defer func() {
			for _, q := range queues {
				close(q)
			}
		}()
		for raw := range read {
			b, err := openBatch(ctx, target.keys, target.reg, raw)
			if err != nil {
				return err
			}
			b.pending.Store(int32(len(queues)))
			memo.add(b)
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
			parted, takesParts := p.(openedHandler)
			for b := range queues[i] {
				var err error
				switch {
				case wantsOpened:
					err = inner.Projector.Handle(ctx, b.opened)
				case takesParts:
					err = parted.HandleOpened(ctx, b.raw, b.parts, b.events)
				default:
					err = p.Handle(ctx, b.raw)
				}
				if b.pending.Add(-1) == 0 {
					memo.drop(b)
				}
				if err != nil {
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

// openBatch takes batch apart for every projector at once: each envelope opened
// (eventschema.OpenPersonal) into a copy, batch itself untouched, the parts of its personal
// member (eventschema.OpenPersonalParts, what the audit history reads) and the opened envelope
// decoded. The personal members are found first, so that the keys of every subject the page
// names are looked up in one go (pageKeys) rather than one query each; then the events are
// opened and decoded. Both steps run on as many goroutines as there are CPUs: a JSON scan per
// event, then an AEAD open and a JSON decode.
func openBatch(ctx context.Context, keys eventschema.Keys, reg *eventschema.Registry, batch []eventschema.Envelope) (*rebuildBatch, error) {
	b := &rebuildBatch{raw: batch, opened: make([]eventschema.Envelope, len(batch)),
		parts: make([]eventschema.PersonalParts, len(batch)), events: make([]domain.Event, len(batch))}
	scans := make([]eventschema.PersonalScan, len(batch))
	err := inParallel(ctx, len(batch), func(_ context.Context, i int) error {
		env := batch[i]
		scan, err := eventschema.ScanPersonal(env.Payload)
		if err != nil {
			return fmt.Errorf("open %s at %s/%d: %w", env.Type, env.Stream, env.Revision, err)
		}
		scans[i] = scan
		return nil
	})
	if err != nil {
		return nil, err
	}
	pk, err := prefetchKeys(ctx, keys, scans)
	if err != nil {
		return nil, err
	}
	err = inParallel(ctx, len(batch), func(ctx context.Context, i int) error {
		env := batch[i]
		parts, err := scans[i].Open(ctx, pk)
		if err != nil {
			return fmt.Errorf("open %s at %s/%d: %w", env.Type, env.Stream, env.Revision, err)
		}
		env.Payload = parts.Opened
		b.opened[i], b.parts[i] = env, parts
		// An event that does not decode stays nil: the projectors that read it decode it
		// themselves and report the error with their name, as without the memo.
		if ev, err := reg.Decode(env); err == nil {
			b.events[i] = ev
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// inParallel calls f for 0..n-1 from as many goroutines as there are CPUs, each taking a
// contiguous range, and returns the first error.
func inParallel(ctx context.Context, n int, f func(context.Context, int) error) error {
	workers := min(runtime.GOMAXPROCS(0), max(1, n/256))
	chunk := (n + workers - 1) / workers
	g, ctx := errgroup.WithContext(ctx)
	for from := 0; from < n; from += chunk {
		to := min(from+chunk, n)
		g.Go(func() error {
			for i := from; i < to; i++ {
				if err := f(ctx, i); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// manyKeys is a key store that looks up many subjects at once (keystore.ManyGetter: the cache in
// front of the SQLite key store): the key of each subject it has, the zero Key for an erased one.
type manyKeys interface {
	GetMany(ctx context.Context, subjects []string) (map[string]eventschema.Key, error)
}

// prefetchKeys looks up the keys of every subject scans are sealed under in one call, when the
// key store can, and returns the keys to open them with: those found, then keys for any other.
func prefetchKeys(ctx context.Context, keys eventschema.Keys, scans []eventschema.PersonalScan) (eventschema.Keys, error) {
	many, ok := keys.(manyKeys)
	if !ok {
		return keys, nil
	}
	seen := map[string]bool{}
	var subjects []string
	for _, s := range scans {
		if subject := s.SealedSubject(); subject != "" && !seen[subject] {
			seen[subject] = true
			subjects = append(subjects, subject)
		}
	}
	if len(subjects) == 0 {
		return keys, nil
	}
	got, err := many.GetMany(ctx, subjects)
	if err != nil {
		return nil, fmt.Errorf("look up the keys of %d subjects: %w", len(subjects), err)
	}
	return pageKeys{Keys: keys, got: got}, nil
}

// pageKeys answers Get from the keys looked up for a page of events (an erased subject's as the
// zero Key), and asks keys for any other subject, and for everything else.
type pageKeys struct {
	eventschema.Keys
	got map[string]eventschema.Key
}

func (p pageKeys) Get(ctx context.Context, subject string) (eventschema.Key, error) {
	k, ok := p.got[subject]
	switch {
	case !ok:
		return p.Keys.Get(ctx, subject)
	case k.IsZero():
		return eventschema.Key{}, fmt.Errorf("%s: %w", subject, eventschema.ErrSubjectErased)
	}
	return k, nil
}
