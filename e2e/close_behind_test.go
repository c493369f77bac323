package e2e_test

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// rawSource is a job spoken to byte by byte, so two frames can leave in
// one TCP write, as a job that closes right behind its last frame sends
// them.
type rawSource struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func dialRawSource(t *testing.T, env map[string]string) *rawSource {
	t.Helper()
	u, err := url.Parse(env[protocol.EnvURL])
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", u.RequestURI(), u.Host)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	j := &rawSource{t: t, conn: conn, br: br}
	j.write(j.text(`{"type":"hello","token":` + quote(env[protocol.EnvToken]) + `}`))
	j.expect(protocol.TypeHelloAck)
	return j
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// frame is a client frame: masked with the key 0, so the payload goes as
// it is.
func frame(op byte, payload []byte) []byte {
	h := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		h = append(h, 0x80|byte(n))
	default:
		h = binary.BigEndian.AppendUint16(append(h, 0x80|126), uint16(n))
	}
	return append(append(h, 0, 0, 0, 0), payload...)
}

func (j *rawSource) text(s string) []byte { return frame(0x1, []byte(s)) }

func (j *rawSource) write(b []byte) {
	j.t.Helper()
	if _, err := j.conn.Write(b); err != nil {
		j.t.Fatal(err)
	}
}

// expect reads the listener's frames until one of type typ.
func (j *rawSource) expect(typ string) {
	j.t.Helper()
	for {
		var h [2]byte
		if _, err := io.ReadFull(j.br, h[:]); err != nil {
			j.t.Fatalf("waiting for %s: %v", typ, err)
		}
		n := int(h[1] & 0x7f)
		if n == 126 {
			var b [2]byte
			io.ReadFull(j.br, b[:])
			n = int(binary.BigEndian.Uint16(b[:]))
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(j.br, p); err != nil {
			j.t.Fatalf("waiting for %s: %v", typ, err)
		}
		var f protocol.WorkerFrame
		if h[0]&0x0f == 0x1 && json.Unmarshal(p, &f) == nil && f.Type == typ {
			return
		}
	}
}

// Issue 34 round 13, A-F1: a source that sends its close in the same TCP
// write as its source-stopped-output, with a target that answers
// target-applied at once, closed before the target applied. The migration
// passed in 2-4 runs of 30, the source's end told as normsim's "instance
// stopped": the library was still answering the close when the source was
// stopped. It fails every run now, the source at fault.
func TestASourceThatClosesBehindItsStopFailsEveryRun(t *testing.T) {
	runs := 20
	if testing.Short() {
		runs = 3
	}
	s := startSim(t, normsimtest.Options{})
	for i := range runs {
		in := s.Launch(t, sim.LaunchRequest{Template: "counter", Node: "a", Runtime: sim.RuntimeExternal})
		sj := dialRawSource(t, in.Env["counter"])
		s.WaitConnected(t, in.ID)
		m, err := s.Migrate(in.ID, sim.MigrateRequest{Strategy: string(sim.Handover)})
		if err != nil {
			t.Fatal(err)
		}
		sj.expect(protocol.TypeGetState)
		sj.write(sj.text(`{"type":"state","migrationId":` + quote(m.ID) + `,"payload":{"next":41}}`))
		_, env := targetEnv(t, s, m.ID)
		tj := testjob.Dial(t, env)
		tj.Expect(protocol.TypeInitialState)
		tj.Send(protocol.JobFrame{Type: protocol.TypeTargetReady})
		sj.expect(protocol.TypeCutoverReady)
		stopped := sj.text(`{"type":"source-stopped-output","migrationId":` + quote(m.ID) + `,"payload":{"last":40}}`)
		sj.write(append(stopped, frame(0x8, append([]byte{0x03, 0xe8}, "done"...))...))
		tj.Expect(protocol.TypeCutoverApply)
		tj.Send(protocol.JobFrame{Type: protocol.TypeTargetApplied})
		done := s.WaitMigration(t, m.ID, 30*time.Second)
		if done.State != sim.MigrationFailed || !strings.Contains(done.Reason, "the source closed its socket with 1000") ||
			done.Broken == nil || done.Broken.Side != "source" {
			t.Fatalf("run %d of %d: %s (%s), broken %+v; want failed, the source closed its socket with 1000, the source at fault\n%s",
				i+1, runs, done.State, done.Reason, done.Broken, normsimtest.Timeline(done))
		}
		tj.Conn().CloseNow()
	}
}
