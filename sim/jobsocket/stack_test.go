package jobsocket_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/jobplay"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim/jobsocket"
)

// TestParkedSocketsKeepSmallStacks: a socket's goroutine spends its life
// parked in a read, and the collector halves a stack only when less than a
// quarter of it is in use. The manager's work runs on that goroutine and
// grows its stack past 8 KiB (here: a deep OnEvent); once the socket waits
// for its next frame, the collections after must bring it back to 8 KiB.
// With a frame's structs in the read loop's own frame, a parked socket
// used just over 4 KiB and kept 16 KiB: at 10,000 jobs, 80 MiB more.
func TestParkedSocketsKeepSmallStacks(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector doubles every stack's guard: stack sizes are measured without it")
	}
	const jobs = 300
	l := jobsocket.New(jobsocket.Config{Node: "a", OnEvent: func(ev jobsocket.Event) {
		if ev.Kind == jobsocket.Connected {
			growStack(24) // about 12 KiB, as the manager's handling of a frame can
		}
	}})
	if err := l.Open("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range jobs {
		l.Register(jobsocket.Registration{JobID: "j", Role: fmt.Sprint("r", i), Token: token})
	}
	before := settledStacks()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range jobs {
		j, err := jobplay.Connect(ctx, fmt.Sprintf("ws://127.0.0.1:%d%s", l.Port(), protocol.Path("j", fmt.Sprint("r", i))), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		if err := j.Hello(ctx, token); err != nil {
			t.Fatal(err)
		}
	}
	// hello-ack is written before the Connected event: wait for every
	// socket's goroutine to be past it, parked in its read.
	time.Sleep(200 * time.Millisecond)
	per := (settledStacks() - before) / jobs
	t.Logf("%d parked sockets: %d bytes of stack each", jobs, per)
	if per > 10<<10 {
		t.Errorf("a parked socket holds %d bytes of stack, want at most 8 KiB (and a little for the test's own goroutines)", per)
	}
}

// growStack uses about n*512 bytes of stack.
//
//go:noinline
func growStack(n int) byte {
	var pad [512]byte
	pad[n%len(pad)] = byte(n)
	if n == 0 {
		return pad[0]
	}
	return pad[n%len(pad)] + growStack(n-1)
}

// settledStacks runs the collector until the stacks stop shrinking (each
// collection halves a stack at most once) and returns their bytes.
func settledStacks() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
	last := int64(-1)
	for range 8 {
		runtime.GC()
		metrics.Read(s)
		now := int64(s[0].Value.Uint64())
		if now == last {
			break
		}
		last = now
	}
	return last
}
