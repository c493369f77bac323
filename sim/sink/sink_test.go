package sink

import (
	"net"
	"testing"
	"time"
)

func TestSinkAttributesPackets(t *testing.T) {
	s := New(nil, 0)
	if err := s.Open("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("udp", s.pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	poke, stop := s.Watch("j1")
	defer stop()
	for _, m := range []string{`{"job":"j1","instance":"a","seq":1}`, `garbage`, `{"job":"j1","instance":"b","seq":2}`, `{"job":"j2","instance":"c","seq":1}`} {
		c.Write([]byte(m))
	}
	deadline := time.After(5 * time.Second)
	for len(s.Packets("j1", time.Time{})) < 2 {
		select {
		case <-poke:
		case <-deadline:
			t.Fatalf("packets = %v", s.Packets("j1", time.Time{}))
		}
	}
	got := s.Packets("j1", time.Time{})
	if got[0].Instance != "a" || got[1].Instance != "b" || got[1].Seq != 2 {
		t.Fatalf("packets = %+v", got)
	}
}
