package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
	"github.com/normsim/normsim/web"
)

// floodingLogs follows with a page of 64 KiB every millisecond until the
// writer refuses one, and says when its follow returned.
type floodingLogs struct {
	*fakeService
	returned chan error
}

func (f *floodingLogs) Logs(ctx context.Context, id string, q sim.LogQuery, follow bool, each func(*sim.LogPage) error) error {
	err := func() error {
		text := strings.Repeat("x", 64<<10)
		for seq := int64(1); ; seq++ {
			if err := each(&sim.LogPage{Known: true, Lines: []sim.LogLine{{Seq: seq, Instance: id, Service: "app", Text: text}}}); err != nil {
				return err
			}
			if !follow {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}()
	f.returned <- err
	return err
}

// TestAStalledLogFollowerIsLetGo (attack round 10c, 2): a logs follower
// that stops reading held its connection (and the follow) for as long as
// it liked, after its instance was removed too; twenty such held
// twenty-one connections for the 90 s watched. A follow's write has the
// events stream's deadline: past it, the follow ends and its connection
// is closed.
func TestAStalledLogFollowerIsLetGo(t *testing.T) {
	f := &floodingLogs{fakeService: newFake(), returned: make(chan error, 1)}
	srv := httptest.NewUnstartedServer(web.New(web.Config{Service: f, Addr: host, EventWriteTimeout: 200 * time.Millisecond}))
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	defer srv.Close()
	stalledReader(t, srv.Listener.Addr().String(), "/api/v1/instances/i1/logs?follow=1")
	select {
	case err := <-f.returned:
		if err == nil {
			t.Fatal("the follow ended without an error, though nobody read it")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a follow nobody reads was still writing after 20 s")
	}
}

// TestALogFollowIsAStream: a follow tells the connection limit it is a
// stream, which may be closed to make room under a flood of connections
// (200 `normsim logs -f` locked every other client out); a plain read of
// the logs does not.
func TestALogFollowIsAStream(t *testing.T) {
	var streams atomic.Int32
	srv := httptest.NewServer(web.New(web.Config{Service: newFake(), Addr: host, Streaming: func(context.Context) { streams.Add(1) }}))
	defer srv.Close()
	for _, c := range []struct {
		query string
		want  int32
	}{{"", 0}, {"?follow=1", 1}, {"?follow=1&format=json", 2}, {"?format=json", 2}} {
		resp, err := http.Get(srv.URL + "/api/v1/instances/i1/logs" + c.query)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := streams.Load(); got != c.want {
			t.Errorf("after logs%s: %d streams marked, want %d", c.query, got, c.want)
		}
	}
}

// TestAJSONFollowIsPagesWithTheirSeqs: a follow with format=json sends
// one page per line, each line with its seq, for a client to resume
// after the last it read.
func TestAJSONFollowIsPagesWithTheirSeqs(t *testing.T) {
	f := newFake()
	f.add(sim.Instance{ID: "i1", JobID: "job-1", Node: "a", Template: "counter", State: sim.InstanceRunning})
	srv := httptest.NewServer(web.New(web.Config{Service: f, Addr: host}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/instances/i1/logs?follow=1&format=json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/x-ndjson" {
		t.Fatalf("%d %s", resp.StatusCode, ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var seqs []int64
	for sc.Scan() {
		var p sim.LogPage
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("a line is not a page: %v: %s", err, sc.Text())
		}
		for _, l := range p.Lines {
			seqs = append(seqs, l.Seq)
		}
	}
	if fmt.Sprint(seqs) != "[1 2]" {
		t.Fatalf("seqs %v, want [1 2]", seqs)
	}
}
