package sink

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The media receiver against a bare UDP read of the same datagrams, side by
// side in one run (docs/benchmarks.md, "The media receiver"):
//
//	go test -run '^$' -bench BenchmarkMediaReceiver -benchtime 20000x ./sim/sink/
//
// Each variant receives b.N datagrams of 1,316 bytes (7 TS packets) sent
// back to back over loopback; ns/datagram includes the sender's share,
// the same in both. The 5 Mbit/s variants pace 475 datagrams a second
// for 2 s and report the process's CPU time as a share of one core and
// the datagrams that did not arrive.

const tsDatagram = 7 * 188

// bareReceiver reads datagrams and does nothing with them: the floor.
func bareReceiver(b *testing.B) (port int, received func() int, stop func()) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	pc.(*net.UDPConn).SetReadBuffer(4 << 20)
	count := make(chan int, 1)
	n := 0
	count <- 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			<-count
			n++
			count <- n
		}
	}()
	received = func() int { v := <-count; count <- v; return v }
	return pc.LocalAddr().(*net.UDPAddr).Port, received, func() { pc.Close(); <-done }
}

func sinkReceiver(b *testing.B) (port int, received func() int, stop func()) {
	m := NewMedia("127.0.0.1", nil)
	port, err := m.Open("job", 0)
	if err != nil {
		b.Fatal(err)
	}
	j := m.jobs["job"]
	received = func() int {
		// Counted under the job's lock, not copied out as Media does:
		// the harness must not cost what it measures.
		j.mu.Lock()
		defer j.mu.Unlock()
		return len(j.dgs) - j.head + int(j.trimmed.since(time.Time{}))
	}
	return port, received, m.CloseAll
}

type receiver func(b *testing.B) (int, func() int, func())

func BenchmarkMediaReceiver(b *testing.B) {
	for _, v := range []struct {
		name string
		recv receiver
	}{{"bare", bareReceiver}, {"sink", sinkReceiver}} {
		b.Run(v.name, func(b *testing.B) { burst(b, v.recv) })
	}
	for _, v := range []struct {
		name string
		recv receiver
	}{{"bare-5Mbps", bareReceiver}, {"sink-5Mbps", sinkReceiver}} {
		b.Run(v.name, func(b *testing.B) { paced(b, v.recv) })
	}
}

// burst sends b.N datagrams, 256 at a time, each batch waited for so the
// kernel's buffer never overflows.
func burst(b *testing.B, recv receiver) {
	port, received, stop := recv(b)
	defer stop()
	c, err := net.Dial("udp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	payload := make([]byte, tsDatagram)
	payload[0] = 0x47
	b.SetBytes(tsDatagram)
	b.ResetTimer()
	sent := 0
	for sent < b.N {
		for i := 0; i < 256 && sent < b.N; i++ {
			c.Write(payload)
			sent++
		}
		waitReceived(b, received, sent)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/datagram")
}

// paced sends 5 Mbit/s of TS for 2 s and reports the CPU it cost.
func paced(b *testing.B, recv receiver) {
	port, received, stop := recv(b)
	defer stop()
	c, err := net.Dial("udp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	payload := make([]byte, tsDatagram)
	const perSecond = 5_000_000 / 8 / tsDatagram // 475
	const d = 2 * time.Second
	// One paced run whatever b.N is: what it reports is the CPU share,
	// not ns/op.
	b.ResetTimer()
	{
		before := cpuTime()
		start := time.Now()
		sent := 0
		tick := time.NewTicker(time.Second / perSecond)
		for time.Since(start) < d {
			<-tick.C
			c.Write(payload)
			sent++
		}
		tick.Stop()
		time.Sleep(50 * time.Millisecond)
		got := received()
		used := cpuTime() - before
		b.ReportMetric(100*used.Seconds()/time.Since(start).Seconds(), "%core")
		b.ReportMetric(float64(sent-got), "lost")
	}
}

func waitReceived(b *testing.B, received func() int, n int) {
	deadline := time.Now().Add(5 * time.Second)
	for received() < n {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d datagrams arrived", received(), n)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
