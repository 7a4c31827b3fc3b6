// Package esdbfake is an in-process EventStoreDB for tests: a gRPC server on the client
// module's own generated protos that keeps events in memory. No EventStoreDB server can be
// installed where Samla is built, so the adapter is tested against this instead.
//
// It implements what a single-node client calls: ServerFeatures.GetSupportedMethods (discovery),
// Streams.Append, Streams.Read (stream and $all reads in both directions, filtered $all
// reads, and catch-up subscriptions to $all) and Streams.Tombstone. It follows the real server where
// the adapter depends on it:
//   - expected revisions (any, no stream, stream exists, exact) with wrong-expected-version
//     answers that carry the current and the expected revision;
//   - idempotent appends: events whose ids already sit right after the expected revision (or,
//     for any and stream exists, wherever the first id sits) answer success with the original
//     revision and position, and store nothing;
//   - $all positions are byte offsets into a log that starts with system records, so they are
//     neither contiguous nor start at 0, and commit position equals prepare position;
//   - reads from a position or revision include it, subscriptions start after it;
//   - subscriptions send a confirmation, the catch-up events, a caught-up notice (and a
//     checkpoint when filtered), then live events;
//   - a stream without events reads as StreamNotFound;
//   - read events carry the "type", "content-type" and "created" metadata keys;
//   - a tombstoned stream (Tombstone, the hard delete) can never be read or written again: both
//     fail with the "stream-deleted" exception; its events stay in $all until Scavenge removes
//     them, as a real server's scavenge does.
//
// Delete (the soft delete), BatchAppend and subscriptions to a single stream are not
// implemented.
package esdbfake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/serverfeatures"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	api "github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Server is an in-memory EventStoreDB. Its events outlive Stop, so a test can take the server
// away and bring it back on the same address with Restart.
type Server struct {
	mu      sync.Mutex
	all     []*record
	streams map[string][]*record
	deleted map[string]bool // tombstoned streams
	next    uint64          // position of the next record
	changed chan struct{}   // closed and replaced on every append
	dropped chan struct{}   // closed and replaced by DropSubscriptions

	idempotentNoPosition bool
	noIdempotency        bool
	inclusiveSubscribe   bool

	addr string
	grpc *grpc.Server
	done chan struct{} // closed when the current grpc server stopped serving
}

type record struct {
	id          uuid.UUID
	stream      string
	revision    uint64
	position    uint64
	eventType   string
	contentType string
	created     int64 // .NET ticks (100 ns) since the Unix epoch, as the server sends them
	data        []byte
	metadata    []byte
}

// Start listens on 127.0.0.1 on a free port and serves. The log begins with a few system
// events, as a real server's does.
func Start() (*Server, error) {
	s := &Server{
		streams: map[string][]*record{},
		deleted: map[string]bool{},
		next:    4096,
		changed: make(chan struct{}),
		dropped: make(chan struct{}),
	}
	s.AppendSystemEvent("$settings", "$settings", `{"$userStreamAcl":{}}`)
	s.AppendSystemEvent("$users", "$User", `"admin"`)
	s.AppendSystemEvent("$user-admin", "$UserCreated", `{"loginName":"admin"}`)
	if err := s.listen("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) listen(addr string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("esdbfake: listen on %s: %w", addr, err)
	}
	srv := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
		// The client pings every 10 s, with or without calls; a stricter default policy
		// would answer with GOAWAY "too many pings".
		MinTime:             time.Second,
		PermitWithoutStream: true,
	}))
	api.RegisterStreamsServer(srv, &streamsService{s: s})
	serverfeatures.RegisterServerFeaturesServer(srv, featuresService{})
	done := make(chan struct{})
	s.mu.Lock()
	s.addr, s.grpc, s.done = lis.Addr().String(), srv, done
	s.mu.Unlock()
	go func() {
		defer close(done)
		_ = srv.Serve(lis) // Returns when stopped.
	}()
	return nil
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// ConnectionString is the client's connection string for this server.
func (s *Server) ConnectionString() string { return "esdb://" + s.Addr() + "?tls=false" }

// Stop closes the listener and every connection, ending calls in flight. Events are kept.
func (s *Server) Stop() {
	s.mu.Lock()
	srv, done := s.grpc, s.done
	s.grpc = nil
	s.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Stop()
	<-done
}

// Restart serves again on the address it had, with the events it had.
func (s *Server) Restart() error {
	s.Stop()
	return s.listen(s.Addr())
}

// DropSubscriptions ends every open subscription with Unavailable, as a server does when it
// shuts a subscription down (for example one that fell too far behind).
func (s *Server) DropSubscriptions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.dropped)
	s.dropped = make(chan struct{})
}

// SetIdempotentNoPosition makes idempotent appends answer without a position, as older
// servers do.
func (s *Server) SetIdempotentNoPosition(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idempotentNoPosition = on
}

// SetIdempotency turns the server's recognition of retried appends on (the default) or off,
// so that a test can check what the client does with a conflict that is really a retry.
func (s *Server) SetIdempotency(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noIdempotency = !on
}

// SetInclusiveSubscriptions makes subscriptions from a position or revision deliver the event
// at it too, so that a test can check the client does not deliver it twice.
func (s *Server) SetInclusiveSubscriptions(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inclusiveSubscribe = on
}

// AppendSystemEvent appends an event the way the server's own subsystems do (statistics,
// settings, users), for tests that check system events are skipped.
func (s *Server) AppendSystemEvent(stream, eventType, data string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appendLocked(stream, []*record{{
		id:          uuid.New(),
		eventType:   eventType,
		contentType: "application/json",
		data:        []byte(data),
	}})
}

// appendLocked stores recs at the end of stream and wakes subscriptions. s.mu is held.
func (s *Server) appendLocked(stream string, recs []*record) {
	now := time.Now().UnixNano() / 100
	rev := uint64(len(s.streams[stream]))
	for _, r := range recs {
		r.stream, r.revision, r.position, r.created = stream, rev, s.next, now
		rev++
		// Advance like a log of records with headers, so positions are not contiguous.
		s.next += uint64(80 + len(stream) + len(r.eventType) + len(r.data) + len(r.metadata))
		s.all = append(s.all, r)
		s.streams[stream] = append(s.streams[stream], r)
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

type featuresService struct {
	serverfeatures.UnimplementedServerFeaturesServer
}

func (featuresService) GetSupportedMethods(context.Context, *shared.Empty) (*serverfeatures.SupportedMethods, error) {
	const streams = "event_store.client.streams.streams"
	return &serverfeatures.SupportedMethods{
		EventStoreServerVersion: "23.10.0",
		Methods: []*serverfeatures.SupportedMethod{
			{ServiceName: streams, MethodName: "read"},
			{ServiceName: streams, MethodName: "append"},
			{ServiceName: streams, MethodName: "tombstone"},
		},
	}, nil
}

type streamsService struct {
	api.UnimplementedStreamsServer
	s *Server
}

type expectation struct {
	kind     int // one of the expect constants
	revision uint64
}

const (
	expectAny = iota
	expectNoStream
	expectStreamExists
	expectRevision
)

func (e expectation) allows(current int64) bool {
	switch e.kind {
	case expectNoStream:
		return current < 0
	case expectStreamExists:
		return current >= 0
	case expectRevision:
		return current >= 0 && uint64(current) == e.revision
	default:
		return true
	}
}

// Append implements the streams service: one options message, then the proposed events.
func (svc *streamsService) Append(stream api.Streams_AppendServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	opts := first.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "the first append message must carry options")
	}
	name := string(opts.GetStreamIdentifier().GetStreamName())
	if name == "" {
		return status.Error(codes.InvalidArgument, "stream name is empty")
	}
	var exp expectation
	switch o := opts.GetExpectedStreamRevision().(type) {
	case *api.AppendReq_Options_Revision:
		exp = expectation{kind: expectRevision, revision: o.Revision}
	case *api.AppendReq_Options_NoStream:
		exp.kind = expectNoStream
	case *api.AppendReq_Options_StreamExists:
		exp.kind = expectStreamExists
	case *api.AppendReq_Options_Any:
		exp.kind = expectAny
	default:
		return status.Error(codes.InvalidArgument, "expected stream revision is missing")
	}

	var recs []*record
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		msg := req.GetProposedMessage()
		if msg == nil {
			return status.Error(codes.InvalidArgument, "expected a proposed message")
		}
		id, err := uuidFromProto(msg.GetId())
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		eventType, ok := msg.GetMetadata()["type"]
		if !ok {
			return status.Error(codes.InvalidArgument, "required metadata property is missing: type")
		}
		contentType, ok := msg.GetMetadata()["content-type"]
		if !ok {
			return status.Error(codes.InvalidArgument, "required metadata property is missing: content-type")
		}
		recs = append(recs, &record{
			id: id, eventType: eventType, contentType: contentType,
			data: msg.GetData(), metadata: msg.GetCustomMetadata(),
		})
	}
	if svc.s.isDeleted(name) {
		return streamDeleted(stream.SetTrailer, name)
	}
	return stream.SendAndClose(svc.s.append(name, exp, recs))
}

func (s *Server) isDeleted(stream string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleted[stream]
}

// streamDeleted is the server's answer to a call on a tombstoned stream: an error whose
// trailers carry the "stream-deleted" exception, which the client maps to
// ErrorCodeStreamDeleted.
func streamDeleted(setTrailer func(metadata.MD), stream string) error {
	setTrailer(metadata.Pairs("exception", "stream-deleted", "stream-name", stream))
	return status.Errorf(codes.FailedPrecondition, "Event stream '%s' is deleted.", stream)
}

// Tombstone implements the streams service's hard delete: the stream's expected revision is
// checked, a "$streamDeleted" record ends it, and it is closed for good.
func (svc *streamsService) Tombstone(ctx context.Context, req *api.TombstoneReq) (*api.TombstoneResp, error) {
	opts := req.GetOptions()
	name := string(opts.GetStreamIdentifier().GetStreamName())
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "stream name is empty")
	}
	var exp expectation
	switch o := opts.GetExpectedStreamRevision().(type) {
	case *api.TombstoneReq_Options_Revision:
		exp = expectation{kind: expectRevision, revision: o.Revision}
	case *api.TombstoneReq_Options_NoStream:
		exp.kind = expectNoStream
	case *api.TombstoneReq_Options_StreamExists:
		exp.kind = expectStreamExists
	default:
		exp.kind = expectAny
	}
	s := svc.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted[name] {
		return nil, streamDeleted(func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) }, name)
	}
	if current := int64(len(s.streams[name])) - 1; !exp.allows(current) {
		return nil, status.Errorf(codes.FailedPrecondition, "wrong expected version %d for %s", current, name)
	}
	tombstone := &record{id: uuid.New(), eventType: "$streamDeleted", contentType: "application/octet-stream"}
	s.appendLocked(name, []*record{tombstone})
	s.deleted[name] = true
	return &api.TombstoneResp{PositionOption: &api.TombstoneResp_Position_{Position: &api.TombstoneResp_Position{
		CommitPosition: tombstone.position, PreparePosition: tombstone.position}}}, nil
}

// Scavenge removes the events of tombstoned streams from the log, as a real server's scavenge
// does: until then $all still holds them. The tombstones themselves stay.
func (s *Server) Scavenge() {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.all[:0]
	for _, r := range s.all {
		if s.deleted[r.stream] && r.eventType != "$streamDeleted" {
			continue
		}
		kept = append(kept, r)
	}
	for i := len(kept); i < len(s.all); i++ {
		s.all[i] = nil
	}
	s.all = kept
	for name := range s.deleted {
		s.streams[name] = nil
	}
}

// Data returns every byte of event data and metadata the log holds, for tests that look for
// what must not be there.
func (s *Server) Data() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []byte
	for _, r := range s.all {
		out = append(append(out, r.data...), r.metadata...)
	}
	return out
}

func (s *Server) append(stream string, exp expectation, recs []*record) *api.AppendResp {
	s.mu.Lock()
	defer s.mu.Unlock()
	existing := s.streams[stream]
	current := int64(len(existing)) - 1

	if len(recs) > 0 && !s.noIdempotency {
		// Where the events would have landed the first time.
		start := -1
		switch exp.kind {
		case expectRevision:
			start = int(exp.revision) + 1
		case expectNoStream:
			start = 0
		default:
			for i, r := range existing {
				if r.id == recs[0].id {
					start = i
					break
				}
			}
		}
		if start >= 0 && start < len(existing) {
			matched := 0
			for matched < len(recs) && start+matched < len(existing) && existing[start+matched].id == recs[matched].id {
				matched++
			}
			if matched == len(recs) {
				last := existing[start+matched-1]
				ok := &api.AppendResp_Success{CurrentRevisionOption: &api.AppendResp_Success_CurrentRevision{CurrentRevision: last.revision}}
				if s.idempotentNoPosition {
					ok.PositionOption = &api.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}}
				} else {
					ok.PositionOption = &api.AppendResp_Success_Position{Position: &api.AppendResp_Position{
						CommitPosition: last.position, PreparePosition: last.position,
					}}
				}
				return &api.AppendResp{Result: &api.AppendResp_Success_{Success: ok}}
			}
			if exp.kind == expectAny || exp.kind == expectStreamExists {
				// Some of the ids are stored and some are not: the real server calls this
				// corrupted idempotency and answers wrong expected version.
				return wrongExpectedVersion(exp, current)
			}
		}
	}
	if !exp.allows(current) {
		return wrongExpectedVersion(exp, current)
	}
	if len(recs) == 0 {
		ok := &api.AppendResp_Success{PositionOption: &api.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}}}
		if current < 0 {
			ok.CurrentRevisionOption = &api.AppendResp_Success_NoStream{NoStream: &shared.Empty{}}
		} else {
			ok.CurrentRevisionOption = &api.AppendResp_Success_CurrentRevision{CurrentRevision: uint64(current)}
		}
		return &api.AppendResp{Result: &api.AppendResp_Success_{Success: ok}}
	}
	s.appendLocked(stream, recs)
	last := recs[len(recs)-1]
	return &api.AppendResp{Result: &api.AppendResp_Success_{Success: &api.AppendResp_Success{
		CurrentRevisionOption: &api.AppendResp_Success_CurrentRevision{CurrentRevision: last.revision},
		PositionOption: &api.AppendResp_Success_Position{Position: &api.AppendResp_Position{
			CommitPosition: last.position, PreparePosition: last.position,
		}},
	}}}
}

func wrongExpectedVersion(exp expectation, current int64) *api.AppendResp {
	wrong := &api.AppendResp_WrongExpectedVersion{}
	if current < 0 {
		wrong.CurrentRevisionOption = &api.AppendResp_WrongExpectedVersion_CurrentNoStream{CurrentNoStream: &shared.Empty{}}
	} else {
		wrong.CurrentRevisionOption = &api.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: uint64(current)}
	}
	switch exp.kind {
	case expectRevision:
		wrong.ExpectedRevisionOption = &api.AppendResp_WrongExpectedVersion_ExpectedRevision{ExpectedRevision: exp.revision}
	case expectNoStream:
		wrong.ExpectedRevisionOption = &api.AppendResp_WrongExpectedVersion_ExpectedNoStream{ExpectedNoStream: &shared.Empty{}}
	case expectStreamExists:
		wrong.ExpectedRevisionOption = &api.AppendResp_WrongExpectedVersion_ExpectedStreamExists{ExpectedStreamExists: &shared.Empty{}}
	default:
		wrong.ExpectedRevisionOption = &api.AppendResp_WrongExpectedVersion_ExpectedAny{ExpectedAny: &shared.Empty{}}
	}
	return &api.AppendResp{Result: &api.AppendResp_WrongExpectedVersion_{WrongExpectedVersion: wrong}}
}

// Read implements the streams service: reads of a stream or of $all, and subscriptions.
func (svc *streamsService) Read(req *api.ReadReq, out api.Streams_ReadServer) error {
	opts := req.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "read options are missing")
	}
	f, err := newFilter(opts.GetFilter())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	enc := encoder{structured: opts.GetUuidOption().GetString_() == nil}
	backwards := opts.GetReadDirection() == api.ReadReq_Options_Backwards
	switch count := opts.GetCountOption().(type) {
	case *api.ReadReq_Options_Subscription:
		if backwards {
			return status.Error(codes.InvalidArgument, "subscriptions read forwards")
		}
		return svc.s.subscribe(out, opts, f, enc)
	case *api.ReadReq_Options_Count:
		if stream := opts.GetStream(); stream != nil {
			return svc.s.readStream(out, stream, backwards, count.Count, enc)
		}
		if all := opts.GetAll(); all != nil {
			return svc.s.readAll(out, all, backwards, count.Count, f, enc)
		}
		return status.Error(codes.InvalidArgument, "read of neither a stream nor $all")
	default:
		return status.Error(codes.InvalidArgument, "read count option is missing")
	}
}

func (s *Server) readStream(out api.Streams_ReadServer, opts *api.ReadReq_Options_StreamOptions, backwards bool, count uint64, enc encoder) error {
	name := opts.GetStreamIdentifier().GetStreamName()
	s.mu.Lock()
	recs, deleted := s.streams[string(name)], s.deleted[string(name)]
	s.mu.Unlock()
	if deleted {
		return streamDeleted(out.SetTrailer, string(name))
	}
	if len(recs) == 0 {
		return out.Send(&api.ReadResp{Content: &api.ReadResp_StreamNotFound_{StreamNotFound: &api.ReadResp_StreamNotFound{
			StreamIdentifier: &shared.StreamIdentifier{StreamName: name},
		}}})
	}
	last := uint64(len(recs) - 1)
	var from uint64
	switch o := opts.GetRevisionOption().(type) {
	case *api.ReadReq_Options_StreamOptions_Revision:
		from = o.Revision
	case *api.ReadReq_Options_StreamOptions_End:
		from = last + 1
		if backwards {
			from = last
		}
	default: // start
		from = 0
	}
	var sent uint64
	if backwards {
		for i := int64(min(from, last)); i >= 0 && sent < count; i-- {
			if err := out.Send(enc.event(recs[i])); err != nil {
				return err
			}
			sent++
		}
		return nil
	}
	for i := from; i < uint64(len(recs)) && sent < count; i++ {
		if err := out.Send(enc.event(recs[i])); err != nil {
			return err
		}
		sent++
	}
	return nil
}

// positionIndex is the index of the first record at or after position p.
func positionIndex(all []*record, p uint64) int {
	return sort.Search(len(all), func(i int) bool { return all[i].position >= p })
}

func (s *Server) readAll(out api.Streams_ReadServer, opts *api.ReadReq_Options_AllOptions, backwards bool, count uint64, f *filter, enc encoder) error {
	s.mu.Lock()
	all := s.all
	s.mu.Unlock()
	var sent uint64
	send := func(r *record) (bool, error) {
		if !f.allows(r) {
			return true, nil
		}
		if err := out.Send(enc.event(r)); err != nil {
			return false, err
		}
		sent++
		return sent < count, nil
	}
	if backwards {
		// Backwards reads take the position as the end of the last record to return.
		end := len(all)
		if p := opts.GetPosition(); p != nil {
			end = positionIndex(all, p.GetCommitPosition())
		} else if opts.GetStart() != nil {
			end = 0
		}
		for i := end - 1; i >= 0 && sent < count; i-- {
			if more, err := send(all[i]); err != nil || !more {
				return err
			}
		}
		return nil
	}
	from := 0
	if p := opts.GetPosition(); p != nil {
		from = positionIndex(all, p.GetCommitPosition())
	} else if opts.GetEnd() != nil {
		from = len(all)
	}
	for i := from; i < len(all) && sent < count; i++ {
		if more, err := send(all[i]); err != nil || !more {
			return err
		}
	}
	return nil
}

// subscribe serves a catch-up subscription to $all until the client leaves, the server stops
// or DropSubscriptions.
func (s *Server) subscribe(out api.Streams_ReadServer, opts *api.ReadReq_Options, f *filter, enc encoder) error {
	ao := opts.GetAll()
	if ao == nil {
		return status.Error(codes.Unimplemented, "only subscriptions to $all are implemented")
	}
	s.mu.Lock()
	dropped := s.dropped
	next := 0 // index into the log of the next record to consider
	if p := ao.GetPosition(); p != nil {
		next = positionIndex(s.all, p.GetCommitPosition())
		if !s.inclusiveSubscribe && next < len(s.all) && s.all[next].position == p.GetCommitPosition() {
			next++
		}
	} else if ao.GetEnd() != nil {
		next = len(s.all)
	}
	s.mu.Unlock()

	if err := out.Send(&api.ReadResp{Content: &api.ReadResp_Confirmation{Confirmation: &api.ReadResp_SubscriptionConfirmation{
		SubscriptionId: uuid.NewString(),
	}}}); err != nil {
		return err
	}
	caughtUp := false
	var considered *record
	for {
		s.mu.Lock()
		batch, changed := s.all[next:], s.changed
		s.mu.Unlock()

		for _, r := range batch {
			next++
			considered = r
			if !f.allows(r) {
				continue
			}
			if err := out.Send(enc.event(r)); err != nil {
				return err
			}
		}
		if len(batch) == 0 && !caughtUp {
			caughtUp = true
			if f != nil && considered != nil {
				if err := out.Send(&api.ReadResp{Content: &api.ReadResp_Checkpoint_{Checkpoint: &api.ReadResp_Checkpoint{
					CommitPosition: considered.position, PreparePosition: considered.position,
				}}}); err != nil {
					return err
				}
			}
			if err := out.Send(&api.ReadResp{Content: &api.ReadResp_CaughtUp_{CaughtUp: &api.ReadResp_CaughtUp{}}}); err != nil {
				return err
			}
		}
		if len(batch) > 0 {
			continue // Look again before waiting: more may have come meanwhile.
		}
		select {
		case <-changed:
		case <-dropped:
			return status.Error(codes.Unavailable, "subscription dropped by the server")
		case <-out.Context().Done():
			return out.Context().Err()
		}
	}
}

type encoder struct{ structured bool }

func (e encoder) event(r *record) *api.ReadResp {
	id := &shared.UUID{}
	if e.structured {
		most, least := int64(0), int64(0)
		for i := 0; i < 8; i++ {
			most = most<<8 | int64(r.id[i])
			least = least<<8 | int64(r.id[8+i])
		}
		id.Value = &shared.UUID_Structured_{Structured: &shared.UUID_Structured{MostSignificantBits: most, LeastSignificantBits: least}}
	} else {
		id.Value = &shared.UUID_String_{String_: r.id.String()}
	}
	return &api.ReadResp{Content: &api.ReadResp_Event{Event: &api.ReadResp_ReadEvent{
		Event: &api.ReadResp_ReadEvent_RecordedEvent{
			Id:               id,
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(r.stream)},
			StreamRevision:   r.revision,
			PreparePosition:  r.position,
			CommitPosition:   r.position,
			Metadata: map[string]string{
				"type":         r.eventType,
				"content-type": r.contentType,
				"created":      strconv.FormatInt(r.created, 10),
			},
			CustomMetadata: r.metadata,
			Data:           r.data,
		},
		Position: &api.ReadResp_ReadEvent_CommitPosition{CommitPosition: r.position},
	}}}
}

func uuidFromProto(id *shared.UUID) (uuid.UUID, error) {
	if st := id.GetStructured(); st != nil {
		var u uuid.UUID
		most, least := uint64(st.GetMostSignificantBits()), uint64(st.GetLeastSignificantBits())
		for i := 0; i < 8; i++ {
			u[7-i] = byte(most >> (8 * i))
			u[15-i] = byte(least >> (8 * i))
		}
		return u, nil
	}
	if str := id.GetString_(); str != "" {
		u, err := uuid.Parse(str)
		if err != nil {
			return uuid.UUID{}, fmt.Errorf("event id %q: %w", str, err)
		}
		return u, nil
	}
	return uuid.UUID{}, errors.New("event id is missing")
}

// filter is a server-side $all filter on the event type or the stream name, by prefixes or by
// a regular expression. A nil filter allows everything.
type filter struct {
	onStream bool
	prefixes []string
	re       *regexp.Regexp
}

func newFilter(opts *api.ReadReq_Options_FilterOptions) (*filter, error) {
	if opts == nil {
		return nil, nil
	}
	var expr *api.ReadReq_Options_FilterOptions_Expression
	f := &filter{}
	switch o := opts.GetFilter().(type) {
	case *api.ReadReq_Options_FilterOptions_StreamIdentifier:
		f.onStream, expr = true, o.StreamIdentifier
	case *api.ReadReq_Options_FilterOptions_EventType:
		expr = o.EventType
	default:
		return nil, errors.New("filter names neither event type nor stream")
	}
	f.prefixes = expr.GetPrefix()
	if expr.GetRegex() != "" {
		re, err := regexp.Compile(expr.GetRegex())
		if err != nil {
			return nil, fmt.Errorf("filter regex: %w", err)
		}
		f.re = re
	}
	return f, nil
}

func (f *filter) allows(r *record) bool {
	if f == nil {
		return true
	}
	subject := r.eventType
	if f.onStream {
		subject = r.stream
	}
	if f.re != nil && !f.re.MatchString(subject) {
		return false
	}
	if len(f.prefixes) == 0 {
		return true
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(subject, p) {
			return true
		}
	}
	return false
}
