package storetest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

var storeTests = []test{
	{"OwnerIsFreshForEachStore", testOwnerIsFreshForEachStore},
	{"InMemoryStoreFacts", testInMemoryStoreFacts},
	{"SettingsAreKept", testSettingsAreKept},
	{"SizeGrowsWithWhatIsKept", testSizeGrowsWithWhatIsKept},
	{"AnEndedContextIsRefused", testAnEndedContextIsRefused},
	{"ClosedStoreRefusesCalls", testClosedStoreRefusesCalls},
	{"ConcurrentCallersLoseNothing", testConcurrentCallersLoseNothing},
	{"LimitsMustBePositive", testLimitsMustBePositive},
}

var ownerRe = regexp.MustCompile(`^[0-9a-f]{16}$`)

// testOwnerIsFreshForEachStore: every store has an owner of its own, 16
// hex digits, the same for as long as it is open.
func testOwnerIsFreshForEachStore(t *testing.T, open Opener) {
	a, b := open(t), open(t)
	if !ownerRe.MatchString(a.Owner()) || !ownerRe.MatchString(b.Owner()) || a.Owner() == b.Owner() || a.Owner() != a.Owner() {
		t.Fatalf("owners %q and %q; want two of 16 hex digits", a.Owner(), b.Owner())
	}
}

// testInMemoryStoreFacts: a store in memory says so, has nothing to check
// (Checked is closed) and is not damaged; naming its holder does nothing
// to it.
func testInMemoryStoreFacts(t *testing.T, open Opener) {
	s := open(t)
	if s.Path() != ":memory:" {
		t.Skipf("a store in the file %s: its path, check and damage are its own package's to test", s.Path())
	}
	select {
	case <-s.Checked():
	case <-time.After(10 * time.Second):
		t.Fatal("Checked never closed")
	}
	if err := s.Damaged(); err != nil {
		t.Errorf("damaged: %v", err)
	}
	owner := s.Owner()
	s.SetHolder("pid 1, dashboard http://x")
	if s.Owner() != owner {
		t.Errorf("the owner changed with the holder")
	}
}

func testSettingsAreKept(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	if v, err := s.Setting(ctx, "sink.port"); err != nil || v != "" {
		t.Fatalf("an unset setting: %q, %v; want \"\"", v, err)
	}
	for _, v := range []string{"4000", "4001", ""} {
		if err := s.SetSetting(ctx, "sink.port", v); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Setting(ctx, "sink.port"); err != nil || got != v {
			t.Fatalf("setting after setting it to %q: %q, %v", v, got, err)
		}
	}
	if err := s.SetSetting(ctx, "other", "x"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Setting(ctx, "sink.port"); got != "" {
		t.Fatalf("another key's setting changed sink.port to %q", got)
	}
}

// testSizeGrowsWithWhatIsKept: the size counts the migrations, and its
// bytes grow with what the store keeps.
func testSizeGrowsWithWhatIsKept(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	empty, n, err := s.Size(ctx)
	if err != nil || n != 0 || empty < 0 {
		t.Fatalf("an empty store's size: %d bytes, %d migrations, %v", empty, n, err)
	}
	at := time.Unix(1700000000, 0).UTC()
	for i := range 3 {
		if err := s.SaveMigration(ctx, &sim.Migration{ID: fmt.Sprint("m", i), State: sim.MigrationRunning, StartedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	frs := make([]sim.FrameRecord, 400)
	for i := range frs {
		frs[i] = sim.FrameRecord{At: at, JobID: "j", Role: fmt.Sprint("r", i%5), Data: strings.Repeat("x", 1000)}
	}
	if err := s.RecordFrames(ctx, frs); err != nil {
		t.Fatal(err)
	}
	full, n, err := s.Size(ctx)
	if err != nil || n != 3 || full < empty+400_000 {
		t.Fatalf("after 3 migrations and 400 kB of frames: %d bytes (empty: %d), %d migrations, %v", full, empty, n, err)
	}
}

// testAnEndedContextIsRefused: a call whose context has ended fails with
// the context's error and changes nothing.
func testAnEndedContextIsRefused(t *testing.T, open Opener) {
	s := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	at := time.Unix(1700000000, 0).UTC()
	calls := map[string]func() error{
		"SaveInstance": func() error { return s.SaveInstance(ctx, &sim.Instance{ID: "i", CreatedAt: at, UpdatedAt: at}) },
		"GetInstance":  func() error { _, err := s.GetInstance(ctx, "i"); return err },
		"AppendEvents": func() error { return s.AppendEvents(ctx, []sim.Event{{At: at, Kind: "k"}}) },
		"ListEvents":   func() error { _, err := s.ListEvents(ctx, sim.EventFilter{}); return err },
		"RecordFrames": func() error { return s.RecordFrames(ctx, []sim.FrameRecord{{At: at, JobID: "j"}}) },
		"ReadLogs":     func() error { _, err := s.ReadLogs(ctx, sim.LogQuery{Instance: "i"}); return err },
		"SaveMigration": func() error {
			return s.SaveMigration(ctx, &sim.Migration{ID: "m", State: sim.MigrationRunning, StartedAt: at})
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with an ended context: %v, want context.Canceled", name, err)
		}
	}
	bg := context.Background()
	if list, _ := s.ListInstances(bg); len(list) != 0 {
		t.Errorf("a refused save kept %d instances", len(list))
	}
	if evs, _ := s.ListEvents(bg, sim.EventFilter{}); len(evs) != 0 {
		t.Errorf("a refused append kept %d events", len(evs))
	}
	if n, _ := s.CountMigrations(bg, sim.MigrationFilter{}); n != 0 {
		t.Errorf("a refused save kept %d migrations", n)
	}
}

// testClosedStoreRefusesCalls: once closed, a store's calls fail (not as
// ENotFound), but writes of nothing, which do nothing; closing it again
// is no error.
func testClosedStoreRefusesCalls(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	at := time.Unix(1700000000, 0).UTC()
	if err := s.SaveInstance(ctx, &sim.Instance{ID: "i", CreatedAt: at, UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"GetInstance":   func() error { _, err := s.GetInstance(ctx, "i"); return err },
		"ListInstances": func() error { _, err := s.ListInstances(ctx); return err },
		"SaveInstance":  func() error { return s.SaveInstance(ctx, &sim.Instance{ID: "j"}) },
		"ListEvents":    func() error { _, err := s.ListEvents(ctx, sim.EventFilter{}); return err },
		"AppendEvents":  func() error { return s.AppendEvents(ctx, []sim.Event{{At: at, Kind: "k"}}) },
		"ListFrames":    func() error { _, err := s.ListFrames(ctx, sim.FrameFilter{}); return err },
		"FrameCounts":   func() error { _, err := s.FrameCounts(ctx, "", ""); return err },
		"ReadLogs":      func() error { _, err := s.ReadLogs(ctx, sim.LogQuery{Instance: "i"}); return err },
		"Setting":       func() error { _, err := s.Setting(ctx, "k"); return err },
		"Size":          func() error { _, _, err := s.Size(ctx); return err },
		"GetMigration":  func() error { _, err := s.GetMigration(ctx, "m"); return err },
		"SeamCapture":   func() error { _, err := s.SeamCapture(ctx, "m"); return err },
		"Batch":         func() error { return s.Batch(ctx, func(context.Context) {}) },
	}
	for name, call := range calls {
		if err := call(); err == nil || sim.ErrorCode(err) == sim.ENotFound {
			t.Errorf("%s on a closed store: %v, want an error other than ENotFound", name, err)
		}
	}
	for name, err := range map[string]error{
		"AppendEvents":          s.AppendEvents(ctx, nil),
		"AppendMigrationEvents": s.AppendMigrationEvents(ctx, "m", nil),
		"RecordFrames":          s.RecordFrames(ctx, nil),
		"AppendLogs":            s.AppendLogs(ctx, nil),
		"RegisterLogs":          s.RegisterLogs(ctx),
	} {
		if err != nil {
			t.Errorf("%s of nothing on a closed store: %v", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("closing again: %v", err)
	}
}

// testConcurrentCallersLoseNothing: writers and readers at once (run
// with -race): every write is kept, each event its own seq.
func testConcurrentCallersLoseNothing(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	at := time.Unix(1700000000, 0).UTC()
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w := range 4 {
		wg.Go(func() {
			for i := range 25 {
				inst := fmt.Sprintf("w%d", w)
				errs <- s.AppendEvents(ctx, []sim.Event{{At: at, Kind: "k", Instance: inst}, {At: at, Kind: "k2", Instance: inst}})
				errs <- s.RecordFrames(ctx, []sim.FrameRecord{{At: at, JobID: "j", Role: inst, Data: "d"}})
				errs <- s.AppendLogs(ctx, []sim.LogLine{{Instance: inst, At: at, Text: fmt.Sprint(i)}})
				errs <- s.SaveInstance(ctx, &sim.Instance{ID: fmt.Sprintf("%s-%d", inst, i), CreatedAt: at, UpdatedAt: at})
				if i%5 == 0 {
					errs <- s.Batch(ctx, func(ctx context.Context) {
						errs <- s.AppendEvents(ctx, []sim.Event{{At: at, Kind: "batch", Instance: inst}})
					})
				}
				_, err := s.ListEvents(ctx, sim.EventFilter{Instance: inst, Limit: 5, Tail: true})
				errs <- err
				_, err = s.ReadLogs(ctx, sim.LogQuery{Instance: inst, Tail: 3})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	evs, _ := s.ListEvents(ctx, sim.EventFilter{})
	seqs := map[int64]bool{}
	for _, ev := range evs {
		seqs[ev.Seq] = true
	}
	if len(evs) != 4*(25*2+5) || len(seqs) != len(evs) {
		t.Fatalf("%d events (%d seqs), want %d with a seq each", len(evs), len(seqs), 4*(25*2+5))
	}
	if c, _ := s.FrameCounts(ctx, "", ""); c.Kept != 100 {
		t.Fatalf("%d frames kept, want 100", c.Kept)
	}
	if list, _ := s.ListInstances(ctx); len(list) != 100 {
		t.Fatalf("%d instances, want 100", len(list))
	}
	for w := range 4 {
		if p, _ := s.ReadLogs(ctx, sim.LogQuery{Instance: fmt.Sprintf("w%d", w)}); len(p.Lines) != 25 {
			t.Fatalf("w%d keeps %d lines, want 25", w, len(p.Lines))
		}
	}
}

// testLimitsMustBePositive: a bound of nothing is a programming error.
func testLimitsMustBePositive(t *testing.T, open Opener) {
	s := open(t)
	for name, set := range map[string]func(){
		"frame limits":  func() { s.SetFrameLimits(sim.FrameLimits{PerInstance: 1, PerInstanceBytes: 1, Total: 1}) },
		"log limits":    func() { s.SetLogLimits(sim.LogLimits{Lines: 1, Bytes: 1}) },
		"log total":     func() { s.SetLogLimits(sim.LogLimits{Lines: 1, Bytes: 1, Instances: 1, TotalBytes: -1}) },
		"migration cap": func() { s.SetMigrationCap(-1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			set()
		}()
	}
}
