package sink

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/normsim/normsim/sim"
)

var _ sim.MediaReceiver = (*Media)(nil)

// waitFor polls the job's window until it holds n datagrams.
func waitFor(t *testing.T, m *Media, job string, n int) sim.MediaWindow {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		w := m.Media(job, time.Time{})
		if len(w.Datagrams) >= n || time.Now().After(deadline) {
			return w
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func send(t *testing.T, port int, payloads ...string) string {
	t.Helper()
	c, err := net.Dial("udp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, p := range payloads {
		if _, err := c.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	return c.LocalAddr().String()
}

// TestMediaKeepsEachJobsDatagramsAndTheirSenders: a job's port is its
// own and stays the same for every instance; each sender address is
// first heard once, and the bytes arrive as sent.
func TestMediaKeepsEachJobsDatagramsAndTheirSenders(t *testing.T) {
	m := NewMedia("127.0.0.1", nil)
	defer m.CloseAll()
	port, err := m.Open("job-a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := m.Open("job-a", 0); again != port {
		t.Fatalf("a second Open gave port %d, want the job's %d", again, port)
	}
	other, _ := m.Open("job-b", 0)
	if other == port {
		t.Fatal("two jobs share a port")
	}
	src := send(t, port, "s1", "s2")
	waitFor(t, m, "job-a", 2)
	mid := time.Now()
	tgt := send(t, port, "t1")
	w := waitFor(t, m, "job-a", 3)
	if len(w.Datagrams) != 3 || string(w.Datagrams[2].Data) != "t1" || w.Datagrams[2].From != tgt || w.Datagrams[0].From != src {
		t.Fatalf("window: %+v", w.Datagrams)
	}
	if !w.FirstHeard[src].Before(w.FirstHeard[tgt]) || len(w.FirstHeard) != 2 {
		t.Fatalf("first heard: %v", w.FirstHeard)
	}
	if got := m.Media("job-a", mid).Datagrams; len(got) != 1 {
		t.Fatalf("since the middle: %d datagrams, want 1", len(got))
	}
	if got := m.Media("job-b", time.Time{}).Datagrams; len(got) != 0 {
		t.Fatalf("job-b got job-a's datagrams: %d", len(got))
	}
	// Closed, the port can be opened again for the job (a restart that
	// adopts it).
	m.Close("job-a")
	if p, err := m.Open("job-a", port); err != nil || p != port {
		t.Fatalf("reopen on %d: %d, %v", port, p, err)
	}
}

// TestMediaCountsWhatItLetsGoOfEarly: past MaxBytes the oldest datagrams
// go, and a window that reaches back over them says how many.
func TestMediaCountsWhatItLetsGoOfEarly(t *testing.T) {
	m := NewMedia("127.0.0.1", nil)
	m.MaxBytes = 10 * 100
	defer m.CloseAll()
	port, _ := m.Open("job", 0)
	var ps []string
	for range 15 {
		ps = append(ps, string(make([]byte, 100)))
	}
	send(t, port, ps...)
	deadline := time.Now().Add(5 * time.Second)
	var w sim.MediaWindow
	for time.Now().Before(deadline) {
		if w = m.Media("job", time.Time{}); len(w.Datagrams)+int(w.Trimmed) == 15 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(w.Datagrams) != 10 || w.Trimmed != 5 {
		t.Fatalf("kept %d, trimmed %d; want 10 and 5", len(w.Datagrams), w.Trimmed)
	}
}

// TestMediaLetsGoOfOldDatagramsUncounted: what is older than Keep is
// history, not a loss.
func TestMediaLetsGoOfOldDatagramsUncounted(t *testing.T) {
	now := time.Unix(1000, 0)
	j := &mediaJob{firstHeard: map[string]time.Time{}}
	for i := range 5 {
		at := now.Add(time.Duration(i) * time.Second)
		j.add(sim.MediaDatagram{At: at, From: "a", Data: []byte("x")}, at.Add(-2*time.Second), 1<<20)
	}
	if kept := len(j.dgs) - j.head; kept != 3 || len(j.trimmed) != 0 {
		t.Fatalf("kept %d, trimmed %d; want 3 and 0", kept, len(j.trimmed))
	}
}

// TestMediaCountsWhatTheKernelDropped: datagrams the kernel drops because
// the receiver fell behind (its socket buffer full) are counted in the
// window, so that every datagram sent is either kept or counted lost.
func TestMediaCountsWhatTheKernelDropped(t *testing.T) {
	m := NewMedia("127.0.0.1", nil)
	m.ReadBuffer = 16 << 10 // the kernel doubles it; still a few datagrams
	defer m.CloseAll()
	port, err := m.Open("job-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	j := m.jobs["job-1"]
	m.mu.Unlock()
	const sent = 400
	payload := string(make([]byte, 1316))
	payloads := make([]string, sent)
	for i := range payloads {
		payloads[i] = payload
	}
	j.mu.Lock() // the receiver stalls on its next datagram: the buffer fills
	send(t, port, payloads...)
	j.mu.Unlock()
	probes := int64(0)
	deadline := time.Now().Add(5 * time.Second)
	for {
		send(t, port, payload) // the kernel says what it dropped with the next datagram read
		probes++
		time.Sleep(20 * time.Millisecond)
		w := m.Media("job-1", time.Time{})
		kept := int64(len(w.Datagrams))
		// Every datagram sent is kept or counted lost.
		if kept+w.Lost == sent+probes && w.Lost > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kept %d and counted %d lost of %d sent (and %d probes after the stall)", kept, w.Lost, sent, probes)
		}
	}
}

// TestMediaCountsADatagramTooLongToRead: a datagram longer than the
// receiver reads is counted as lost, not kept cut.
func TestMediaCountsADatagramTooLongToRead(t *testing.T) {
	m := NewMedia("127.0.0.1", nil)
	defer m.CloseAll()
	port, err := m.Open("job-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	send(t, port, string(make([]byte, 20000)), string(make([]byte, 1316)))
	w := waitFor(t, m, "job-1", 1)
	if len(w.Datagrams) != 1 || len(w.Datagrams[0].Data) != 1316 || w.Lost != 1 {
		t.Fatalf("kept %d datagrams, lost %d; want the 1,316-byte one kept and the 20,000-byte one counted lost", len(w.Datagrams), w.Lost)
	}
}
