package jobsocket_test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim/jobsocket"
)

// nodeJob is a job written against Node's built-in WebSocket: it says hello
// (unless told to send its frame first), sends one text frame of exactly
// the size asked for, and prints what it heard last: the close code and
// reason, after "ack" when it read hello-ack.
const nodeJob = `
const [url, token, size, first] = process.argv.slice(1);
const frame = (n) => { const head = '{"type":"state","payload":"', tail = '"}';
  return head + 'x'.repeat(n - head.length - tail.length) + tail; };
const ws = new WebSocket(url);
ws.onopen = () => ws.send(first === 'frame' ? frame(+size) : JSON.stringify({type: 'hello', token}));
ws.onmessage = (e) => { if (JSON.parse(e.data).type === 'hello-ack') { console.log('ack'); ws.send(frame(+size)); } };
ws.onclose = (e) => { console.log(e.code + ' ' + e.reason); process.exit(0); };
setTimeout(() => { console.log('no close'); process.exit(1); }, 20000);
`

// TestNodeJobGetsTheFrameCap runs a Node job against the listener: a
// frame of exactly 64 KiB is read, every larger one closes with 4413,
// before hello and after it.
func TestNodeJobGetsTheFrameCap(t *testing.T) {
	if testing.Short() {
		t.Skip("interop with Node's WebSocket client; run without -short")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the Node WebSocket check needs it")
	}
	l, ev := MustListener(t, jobsocket.Config{})
	for _, first := range []string{"hello", "frame"} {
		for _, size := range []int{protocol.MaxFrameBytes, protocol.MaxFrameBytes + 1, 70_000, 1 << 20} {
			t.Run(first+"/"+strconv.Itoa(size), func(t *testing.T) {
				role := "r" + strconv.Itoa(size) + first
				l.Register(jobsocket.Registration{JobID: "j", Role: role, Token: token})
				l.Expect("j", role, protocol.TypeState)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				url := "ws://127.0.0.1:" + strconv.Itoa(l.Port()) + protocol.Path("j", role)
				cmd := exec.CommandContext(ctx, node, "--experimental-websocket", "--no-warnings", "-e", nodeJob, url, token, strconv.Itoa(size), first)
				var out strings.Builder
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				if size <= protocol.MaxFrameBytes && first == "hello" {
					// Read whole: the listener reports it, at its size.
					for {
						e := ev.wait(t, jobsocket.Frame)
						if e.Role == role {
							if e.Size != size {
								t.Fatalf("frame of %d bytes read as %d", size, e.Size)
							}
							break
						}
					}
					l.Unregister("j", role) // the job waits for a close
				}
				if err := cmd.Wait(); err != nil {
					t.Fatalf("node job: %v\n%s", err, out.String())
				}
				got := strings.TrimSpace(out.String())
				switch {
				case size > protocol.MaxFrameBytes:
					want := "4413 frame over 65536 bytes"
					if first == "hello" {
						want = "ack\n" + want
					}
					if got != want {
						t.Fatalf("node job heard %q, want %q", got, want)
					}
				case first == "frame":
					// Within the cap but no hello: refused as a protocol error.
					if !strings.HasPrefix(got, "4400 ") {
						t.Fatalf("node job heard %q, want 4400 for a frame before hello", got)
					}
				default:
					if got != "ack\n1000 instance stopped" {
						t.Fatalf("node job heard %q after its 64 KiB frame was read", got)
					}
				}
			})
		}
	}
}
