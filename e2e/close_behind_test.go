package e2e_test

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/internal/testjob"
	"github.com/normsim/normsim/normsimtest"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// rawSource is a job spoken to frame by frame (testjob.Raw), so two
// frames can leave in one TCP write, as a job that closes right behind its
// last frame sends them.
type rawSource struct{ *testjob.Raw }

// dialRawSource connects as the service whose launch env is env and says
// hello.
func dialRawSource(t *testing.T, env map[string]string) *rawSource {
	t.Helper()
	u, err := url.Parse(env[protocol.EnvURL])
	if err != nil {
		t.Fatal(err)
	}
	j := &rawSource{testjob.DialRaw(t, u.Host, u.RequestURI(), 60*time.Second)}
	j.Write(testjob.Text(`{"type":"hello","token":` + quote(env[protocol.EnvToken]) + `}`))
	j.expect(protocol.TypeHelloAck)
	return j
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// expect reads the worker's frames until one of type typ.
func (j *rawSource) expect(typ string) {
	for {
		op, p := j.ReadFrame()
		var f protocol.WorkerFrame
		if op == testjob.OpText && json.Unmarshal(p, &f) == nil && f.Type == typ {
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
//
// Round 14, A2: with 200 pings between the two, the source still passed
// in 1-2 runs of 15-30. Past catchUp's wait, the library's close
// handshake read the rest, and its pong to the first ping, refused once
// our close was sent, ended the handshake before the job's close was
// read. Pings after our close now go unanswered, and a stop that found the
// job still sending reports a close of the job's that came first.
func TestASourceThatClosesBehindItsStopFailsEveryRun(t *testing.T) {
	var pings []byte
	for i := range 200 {
		pings = append(pings, testjob.Frame(testjob.OpPing, []byte{byte(i)})...)
	}
	for _, c := range []struct {
		name    string
		between []byte
	}{
		{"its close right behind", nil},
		{"200 pings, then its close", pings},
	} {
		t.Run(c.name, func(t *testing.T) { closesBehindItsStop(t, c.between) })
	}
}

func closesBehindItsStop(t *testing.T, between []byte) {
	runs := 20
	if testing.Short() {
		runs = 3
	}
	s := startSim(t, normsimtest.Options{})
	for i := range runs {
		m, sj, tj := toCutoverReady(t, s, sim.Timeouts{})
		sj.Write(slices.Concat(stoppedOutput(m), between, testjob.Frame(testjob.OpClose, append([]byte{0x03, 0xe8}, "done"...))))
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
