package apiclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/sim"
)

// TestAFollowResumesWhereItWasCut (attack round 10c, 2): normsim may close
// a log follow to make room for other clients, or when its reader fell
// behind. `normsim logs -f` resumes after the last line it printed:
// every line once, none twice, and the follow ends with the instance.
func TestAFollowResumesWhereItWasCut(t *testing.T) {
	page := func(w http.ResponseWriter, seqs ...int64) {
		var p sim.LogPage
		for _, n := range seqs {
			p.Lines = append(p.Lines, sim.LogLine{Seq: n, Service: "app", Text: "line " + string(rune('a'+n-10))})
		}
		b, _ := json.Marshal(p)
		w.Write(append(b, '\n'))
		w.(http.Flusher).Flush()
	}
	var asked queryLog
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := asked.add(r)
		w.Header().Set("Content-Type", "application/x-ndjson")
		switch n {
		case 1:
			page(w, 10, 11)
			panic(http.ErrAbortHandler) // cut, as an evicted stream is
		case 2:
			page(w, 12)
			panic(http.ErrAbortHandler)
		default:
			page(w, 13) // the instance ends: the stream ends whole
		}
	}))
	defer srv.Close()
	var out bytes.Buffer
	c := apiclient.New(srv.URL, nil)
	if err := c.Logs(context.Background(), "i1", apiclient.LogOptions{Follow: true, Tail: 5}, &out); err != nil {
		t.Fatal(err)
	}
	if want := "app | line a\napp | line b\napp | line c\napp | line d\n"; out.String() != want {
		t.Fatalf("printed\n%s\nwant\n%s", out.String(), want)
	}
	if queries := asked.all(); len(queries) != 3 || !strings.Contains(queries[0], "tail=5") || !strings.Contains(queries[1], "after=11") || strings.Contains(queries[1], "tail") || !strings.Contains(queries[2], "after=12") {
		t.Fatalf("queries %q: want the tail first, then after the last line printed", queries)
	}
}

// TestAFollowCutOverAndOverGivesUp: a follow that is cut every time it
// reconnects says so, instead of trying for ever.
func TestAFollowCutOverAndOverGivesUp(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	err := apiclient.New(srv.URL, nil).Logs(context.Background(), "i1", apiclient.LogOptions{Follow: true, Tail: -1}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "was cut 10 times in a row") {
		t.Fatalf("%v, want the follow to give up saying why", err)
	}
}

// TestAFollowThatMovesOnIsNeverGivenUp: the give-up counts cuts in a row;
// a stream that brought lines before it was cut starts the count again,
// so a follow cut now and then over a long run goes on.
func TestAFollowThatMovesOnIsNeverGivenUp(t *testing.T) {
	const cuts = 15 // more than the give-up's ten
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		seq := int64(n)
		mu.Unlock()
		b, _ := json.Marshal(sim.LogPage{Lines: []sim.LogLine{{Seq: seq, Service: "app", Text: "x"}}})
		w.Write(append(b, '\n'))
		w.(http.Flusher).Flush()
		if seq <= cuts {
			panic(http.ErrAbortHandler)
		}
	}))
	defer srv.Close()
	var out bytes.Buffer
	if err := apiclient.New(srv.URL, nil).Logs(context.Background(), "i1", apiclient.LogOptions{Follow: true, Tail: -1}, &out); err != nil {
		t.Fatalf("%v after %d lines", err, strings.Count(out.String(), "\n"))
	}
	if got := strings.Count(out.String(), "app | x\n"); got != cuts+1 {
		t.Fatalf("printed %d lines, want %d", got, cuts+1)
	}
}
