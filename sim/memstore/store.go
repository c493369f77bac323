// Package memstore is a store that keeps its records in memory and links
// no database: what a job author's test binary (normsimtest) runs on.
//
// It behaves as sim/sqlite's in-memory store does, which is the product's
// reference: the same ordering, filters, paging, bounds and counts of what
// the bounds let go, the same error kinds, and copies, never aliases, of
// the caller's data going in and coming out. sim/storetest holds both
// stores to one contract.
package memstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/normsim/normsim/sim"
)

// Path is what Path says of every memstore: sim/sqlite's name for an
// in-memory store.
const Path = ":memory:"

// Store is a sim.Store, sim.LogStore and sim.SeamCaptures in memory. It
// is safe for concurrent use.
type Store struct {
	// gate is held by a caller for its whole call, and by a Batch for its
	// whole run: a caller outside the batch waits for it to end, as for
	// sim/sqlite's one connection, and never sees half a batch.
	gate chan struct{}
	// mu guards what follows; a batch's own writes take only mu.
	mu sync.Mutex

	owner  string
	closed bool
	// batch is the batch running, and undo how to undo its writes so far
	// (in reverse): a batch whose context ends before it commits is undone
	// whole, as a rolled-back transaction is.
	batch *batch
	undo  []func()

	logLimits   sim.LogLimits
	frameLimits sim.FrameLimits
	eventLimits sim.EventLimits
	// eventCounts are each instance's events since the last trim looked
	// (boundEvents); eventsTrimmed counts what trims let go of.
	eventCounts   map[string]int64
	eventsTrimmed atomic.Int64
	migCap        atomic.Int64
	pruned        atomic.Int64
	prunedIDs     sim.RecentlyPruned // the cap's last drops, whose late writes go

	instances  map[string]*instanceRow
	migrations map[string]*migrationRow
	timelines  map[string][]timelineRow
	events     []eventRow
	eventSeq   int64
	// frames are each instance's, oldest first; their seq orders all.
	frames     map[frameKey][]frameRow
	frameSeq   int64
	frameState map[frameKey]frameState
	logs       map[string][]logRow
	logSeq     int64
	logState   map[string]logState
	// logStateRow numbers log states as they are made: the order of two
	// printed at the same moment (sim/sqlite's rowid).
	logStateRow int64
	captures    map[string]*captureRow
	settings    map[string]string
}

var (
	_ sim.Store        = (*Store)(nil)
	_ sim.LogStore     = (*Store)(nil)
	_ sim.SeamCaptures = (*Store)(nil)
)

// New is an empty store with the default bounds (sim.DefaultFrameLimits,
// sim.DefaultLogLimits) and no cap on migrations, labelled with a fresh
// owner.
func New() *Store {
	return &Store{
		gate:        make(chan struct{}, 1),
		owner:       newOwner(),
		logLimits:   sim.DefaultLogLimits,
		frameLimits: sim.DefaultFrameLimits,
		eventLimits: sim.DefaultEventLimits,
		eventCounts: map[string]int64{},
		instances:   map[string]*instanceRow{},
		migrations:  map[string]*migrationRow{},
		timelines:   map[string][]timelineRow{},
		frames:      map[frameKey][]frameRow{},
		frameState:  map[frameKey]frameState{},
		logs:        map[string][]logRow{},
		logState:    map[string]logState{},
		captures:    map[string]*captureRow{},
		settings:    map[string]string{},
	}
}

// newOwner is a fresh owner label: 16 hex digits, as sim/sqlite draws.
func newOwner() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ErrClosed is what a closed store's calls fail with.
var ErrClosed = errors.New("memstore: the store is closed")

type batchKey struct{}

// batch is a running Batch, as its context carries it.
type batch struct {
	s      *Store
	parent context.Context
	over   bool
}

// lock takes the store for one call and returns how to let it go. A call
// in the store's running batch takes only mu (the batch holds the gate);
// any other waits for the gate, or for ctx to end.
func (s *Store) lock(ctx context.Context) (unlock func(), err error) {
	if b, _ := ctx.Value(batchKey{}).(*batch); b != nil && b.s == s {
		s.mu.Lock()
		switch {
		case b.over:
			err = errors.New("memstore: the batch is over")
		case b.parent.Err() != nil:
			// sim/sqlite's transaction is rolled back when the batch's
			// context ends: its later writes fail.
			err = fmt.Errorf("memstore: the batch was rolled back: %w", b.parent.Err())
		}
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		return s.mu.Unlock, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case s.gate <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	unlock = func() {
		s.mu.Unlock()
		<-s.gate
	}
	if s.closed {
		unlock()
		return nil, ErrClosed
	}
	return unlock, nil
}

// Batch runs fn with a context under which every write to this store is
// one of a batch, as sim/sqlite's Batch: each write is undone alone when
// it fails, the others are kept, and callers outside the batch wait for
// it to end. A ctx that ends before fn returns undoes the whole batch and
// fails the writes fn makes after it ended; Batch then returns an error.
// fn may read through its context too (sim/sqlite's would wait forever).
func (s *Store) Batch(ctx context.Context, fn func(ctx context.Context)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("begin batch: %w", err)
	}
	select {
	case s.gate <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("begin batch: %w", ctx.Err())
	}
	defer func() { <-s.gate }()
	b := &batch{s: s, parent: ctx}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("begin batch: %w", ErrClosed)
	}
	s.batch, s.undo = b, []func(){}
	s.mu.Unlock()
	defer func() {
		// Whatever fn did (a panic included), the batch is over.
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.batch == b {
			s.rollback()
		}
	}()
	fn(context.WithValue(context.WithoutCancel(ctx), batchKey{}, b))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		s.rollback()
		return fmt.Errorf("commit batch: %w", err)
	}
	b.over, s.batch, s.undo = true, nil, nil
	return nil
}

// rollback undoes the running batch's writes.
func (s *Store) rollback() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.batch.over, s.batch, s.undo = true, nil, nil
}

// put sets m[k] = v, undoably.
func put[K comparable, V any](s *Store, m map[K]V, k K, v V) {
	if s.batch != nil {
		old, had := m[k]
		s.undo = append(s.undo, func() {
			if had {
				m[k] = old
			} else {
				delete(m, k)
			}
		})
	}
	m[k] = v
}

// del deletes m[k], undoably.
func del[K comparable, V any](s *Store, m map[K]V, k K) {
	old, had := m[k]
	if !had {
		return
	}
	if s.batch != nil {
		s.undo = append(s.undo, func() { m[k] = old })
	}
	delete(m, k)
}

// assign sets *p = v, undoably. Rows in the store's slices are never
// changed in place (a slice is appended to, resliced or replaced), so an
// old slice header restores what it held.
func assign[T any](s *Store, p *T, v T) {
	if s.batch != nil {
		old := *p
		s.undo = append(s.undo, func() { *p = old })
	}
	*p = v
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func nanos(t time.Time) int64 { return t.UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// instanceRow is an instance as sim/sqlite keeps it: its maps as JSON
// text, its times in nanoseconds, its published ports not at all.
type instanceRow struct {
	id, jobID, role, node, template, runtime, state, err string
	params, token, migrationID, ports                    string
	connected, healthy                                   bool
	created, updated                                     int64
	env, runtimeRef, adjustments                         string
}

func (r *instanceRow) instance() *sim.Instance {
	in := &sim.Instance{ID: r.id, JobID: r.jobID, Role: r.role, Node: r.node, Template: r.template, Runtime: r.runtime,
		State: sim.InstanceState(r.state), Error: r.err, Token: r.token, MigrationID: r.migrationID,
		Connected: r.connected, Healthy: r.healthy, CreatedAt: fromNanos(r.created), UpdatedAt: fromNanos(r.updated)}
	_ = json.Unmarshal([]byte(r.env), &in.Env)
	_ = json.Unmarshal([]byte(r.runtimeRef), &in.RuntimeRef)
	_ = json.Unmarshal([]byte(r.adjustments), &in.Adjustments)
	_ = json.Unmarshal([]byte(r.params), &in.Params)
	_ = json.Unmarshal([]byte(r.ports), &in.Ports)
	return in
}

// SaveInstance inserts or replaces an instance. A replaced one keeps the
// time it was first saved with (CreatedAt), as sim/sqlite's does.
func (s *Store) SaveInstance(ctx context.Context, in *sim.Instance) error {
	r := &instanceRow{id: in.ID, jobID: in.JobID, role: in.Role, node: in.Node, template: in.Template, runtime: in.Runtime,
		state: string(in.State), err: in.Error, params: jsonText(in.Params), token: in.Token, migrationID: in.MigrationID,
		ports: jsonText(in.Ports), connected: in.Connected, healthy: in.Healthy, created: nanos(in.CreatedAt), updated: nanos(in.UpdatedAt),
		env: jsonText(in.Env), runtimeRef: jsonText(in.RuntimeRef), adjustments: jsonText(in.Adjustments)}
	unlock, err := s.lock(ctx)
	if err != nil {
		return fmt.Errorf("save instance %s: %w", in.ID, err)
	}
	defer unlock()
	if old := s.instances[in.ID]; old != nil {
		r.created = old.created
	}
	put(s, s.instances, in.ID, r)
	return nil
}

// GetInstance returns one instance or an ENotFound error.
func (s *Store) GetInstance(ctx context.Context, id string) (*sim.Instance, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("get instance %s: %w", id, err)
	}
	defer unlock()
	r := s.instances[id]
	if r == nil {
		return nil, sim.Errorf(sim.ENotFound, "instance %q not found", id)
	}
	return r.instance(), nil
}

// ListInstances returns every instance, oldest first (by CreatedAt, then
// ID).
func (s *Store) ListInstances(ctx context.Context) ([]*sim.Instance, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	defer unlock()
	rows := make([]*instanceRow, 0, len(s.instances))
	for _, r := range s.instances {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b *instanceRow) int { return cmp.Or(cmp.Compare(a.created, b.created), cmp.Compare(a.id, b.id)) })
	var out []*sim.Instance
	for _, r := range rows {
		out = append(out, r.instance())
	}
	return out, nil
}

// DeleteInstance removes an instance (none is not an error).
func (s *Store) DeleteInstance(ctx context.Context, id string) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return fmt.Errorf("delete instance %s: %w", id, err)
	}
	defer unlock()
	del(s, s.instances, id)
	delete(s.eventCounts, id) // only says when to count its events again
	return nil
}

// Owner is the store's random identity, made by New.
func (s *Store) Owner() string { return s.owner }

// SetHolder does nothing: nothing else can open a store in memory.
func (s *Store) SetHolder(string) {}

// Path is Path: the store lives in memory.
func (s *Store) Path() string { return Path }

var checked = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Checked is closed: there is no file to check.
func (s *Store) Checked() <-chan struct{} { return checked }

// Damaged is nil: there is no file to be damaged.
func (s *Store) Damaged() error { return nil }

// Setting is what the store keeps under key, "" when nothing is kept.
func (s *Store) Setting(ctx context.Context, key string) (string, error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	return s.settings[key], nil
}

// SetSetting keeps value under key.
func (s *Store) SetSetting(ctx context.Context, key, value string) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	put(s, s.settings, key, value)
	return nil
}

// rowBytes is what a record costs the store beyond its text: its struct,
// its slot in a map or slice, and the headers of its strings.
const rowBytes = 128

// Size estimates the bytes the store holds (each record's text and
// numbers, and rowBytes for each), and counts its migrations.
func (s *Store) Size(ctx context.Context) (bytes int64, migrations int, err error) {
	unlock, err := s.lock(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read the store's size: %w", err)
	}
	defer unlock()
	n := func(strs ...string) {
		bytes += rowBytes
		for _, x := range strs {
			bytes += int64(len(x))
		}
	}
	for _, r := range s.instances {
		n(r.id, r.jobID, r.role, r.node, r.template, r.runtime, r.state, r.err, r.params, r.token, r.migrationID, r.ports, r.env, r.runtimeRef, r.adjustments)
	}
	for _, r := range s.migrations {
		n(r.id, r.jobID, r.state, r.doc)
	}
	for _, evs := range s.timelines {
		for _, ev := range evs {
			n(ev.phase, ev.side, ev.detail, ev.kind, deref(ev.frame))
		}
	}
	for _, ev := range s.events {
		n(ev.kind, ev.instance, ev.migration, deref(ev.data))
	}
	for _, frs := range s.frames {
		for _, f := range frs {
			n(f.node, f.jobID, f.role, f.direction, f.typ, f.data)
		}
	}
	for k := range s.frameState {
		n(k.job, k.role)
	}
	for inst, lines := range s.logs {
		for _, l := range lines {
			n(inst, l.service, l.stream, l.text)
		}
	}
	for inst := range s.logState {
		n(inst)
	}
	for id, c := range s.captures {
		n(id)
		bytes += int64(len(c.ts) + len(c.targetTS) + len(c.rtp))
	}
	for k, v := range s.settings {
		n(k, v)
	}
	return bytes, len(s.migrations), nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Close lets go of what the store holds; every later call fails with
// ErrClosed (but those given nothing to write, which do nothing, as
// sim/sqlite's). Closing again does nothing.
func (s *Store) Close() error {
	s.gate <- struct{}{}
	defer func() { <-s.gate }()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.instances, s.migrations, s.timelines, s.events = nil, nil, nil, nil
	s.frames, s.frameState, s.logs, s.logState, s.captures, s.settings = nil, nil, nil, nil, nil, nil
	return nil
}
