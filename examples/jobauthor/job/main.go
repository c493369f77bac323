// Command job is a product team's job: it counts, sends each number to the
// output normsim gives it, and hands over at an exact number using
// normsim's Go job client.
package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/normsim/normsim/jobclient"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out, _ := net.Dial("udp", os.Getenv("NORMSIM_OUTPUT_ADDR"))
	var mu sync.Mutex
	next, producing := time.Now().UnixMilli()/20, true
	emit := func(n int64) {
		if out != nil {
			b, _ := json.Marshal(map[string]any{"job": os.Getenv("NORMSIM_JOB"), "instance": os.Getenv("NORMSIM_INSTANCE"), "seq": n})
			out.Write(b)
		}
	}
	c := jobclient.Connect(ctx, jobclient.Handler{
		CutoverReady: func(ctx context.Context, id string, _ json.RawMessage) (json.RawMessage, error) {
			mu.Lock()
			defer mu.Unlock()
			producing = false
			return json.RawMessage(strconv.FormatInt(next-1, 10)), nil
		},
		CutoverApply: func(ctx context.Context, id string, last json.RawMessage) (jobclient.Applied, error) {
			n, err := strconv.ParseInt(string(last), 10, 64)
			if err != nil {
				return jobclient.Applied{}, err
			}
			mu.Lock()
			next, producing = n+1, true
			mu.Unlock()
			return jobclient.Applied{Applied: []string{"counter"}}, nil
		},
		Abort: func(string, string) { mu.Lock(); producing = true; mu.Unlock() },
	}, jobclient.Options{})
	defer c.Close()
	if c.Enabled() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c.WaitConnected(wctx)
		cancel()
		if c.Migration() != nil { // a handover target waits for cutover-apply
			mu.Lock()
			producing = false
			mu.Unlock()
		}
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			mu.Lock()
			if producing {
				emit(next)
				next++
			}
			mu.Unlock()
		}
	}
}
