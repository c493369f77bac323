package conform

import (
	"encoding/json"
	"time"

	"github.com/normsim/normsim/sim"
)

// fixtureT0 is when the fixture's run began.
var fixtureT0 = time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)

// hostile are texts a job could print that must reach a report as text:
// each would set window.__pwned if a page ran it.
const (
	hostileScript = `<script>window.__pwned="log"</script>`
	hostileAttr   = `"><img src=x onerror="window.__pwned='attr'">`
)

func fixtureAt(ms float64) time.Time {
	return fixtureT0.Add(time.Duration(ms * float64(time.Millisecond)))
}

func fixtureF64(f float64) *float64 { return &f }
func fixtureBool(b bool) *bool      { return &b }
func fixtureI64(i int64) *int64     { return &i }

// fixtureEvent is one timeline entry ms after start.
func fixtureEvent(start time.Time, seq int, ms float64, phase sim.Phase, side string, kind sim.TimelineKind, detail string, frame *sim.FrameInfo) sim.MigrationEvent {
	return sim.MigrationEvent{Seq: seq, At: start.Add(time.Duration(ms * float64(time.Millisecond))), Phase: phase, Side: side, Kind: kind, Detail: detail, Frame: frame}
}

func fixtureFrame(dir, typ string, payload string) *sim.FrameInfo {
	return &sim.FrameInfo{Direction: dir, Type: typ, Size: len(payload), Payload: json.RawMessage(payload)}
}

// fixtureReport is a conformance run with a case of every grade, grouped
// out of ID order, with timelines whose frames carry payloads, log lines
// with markup in them, and a chaos run with one violation.
func fixtureReport() *Report {
	handover := func(id string, start time.Time, state sim.MigrationState, phase sim.Phase, reason string, evs ...sim.MigrationEvent) *sim.Migration {
		end := start.Add(600 * time.Millisecond)
		return &sim.Migration{
			ID: id, JobID: "counter", Strategy: sim.Handover, State: state, Reason: reason, Phase: phase,
			Source:    sim.MigrationEndpoint{Instance: "counter-1", Node: "a", Runtime: "process"},
			Target:    sim.MigrationEndpoint{Instance: "counter-2", Node: "b", Runtime: "process"},
			StartedAt: start, EndedAt: &end, Events: evs,
			Durations: sim.Durations{TotalMs: fixtureF64(600)},
		}
	}
	plainStart := fixtureAt(100)
	plain := handover("m-plain", plainStart, sim.MigrationCompleted, sim.PhaseStopSource, "",
		fixtureEvent(plainStart, 1, 0, sim.PhaseRequested, "manager", sim.TimelineRequested, "handover requested", nil),
		fixtureEvent(plainStart, 2, 1.5, sim.PhaseGetState, "source", "", "sent get-state", fixtureFrame("out", "get-state", `{"type":"get-state","migrationId":"m-plain"}`)),
		fixtureEvent(plainStart, 3, 12.4, sim.PhaseGetState, "source", "", "received state", fixtureFrame("in", "state",
			`{"type":"state","state":{"seq":1234,"note":"`+`<script>window.__pwned=\"payload\"</script>`+`","history":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30]}}`)),
		fixtureEvent(plainStart, 4, 20, sim.PhasePlaceTarget, "manager", sim.TimelineTargetCreated, "target placed on node b", nil),
		fixtureEvent(plainStart, 5, 310.5, sim.PhaseStartTarget, "target", sim.TimelineConnected, "hello accepted", fixtureFrame("in", "hello", `{"type":"hello","instanceId":"counter-2"}`)),
		fixtureEvent(plainStart, 6, 420, sim.PhaseTargetReady, "target", "", "received target-ready", fixtureFrame("in", "target-ready", `{"type":"target-ready"}`)),
		fixtureEvent(plainStart, 7, 451, sim.PhaseCutoverReady, "source", sim.TimelinePointOfNoReturn, "source stopped its output at seq 1290", fixtureFrame("in", "source-stopped-output", `{"type":"source-stopped-output","lastSeq":1290}`)),
		fixtureEvent(plainStart, 8, 470, sim.PhaseCutoverApply, "target", "", "received target-applied", fixtureFrame("in", "target-applied", `{"type":"target-applied","applied":["counter"]}`)),
		fixtureEvent(plainStart, 9, 520, sim.PhaseStopSource, "source", sim.TimelineSourceStopped, "source stopped", nil),
		fixtureEvent(plainStart, 10, 600, sim.PhaseStopSource, "manager", sim.TimelineEnded, "completed", nil),
	)
	plain.Result = sim.MigrationResult{Applied: []string{"counter"}, SkewMs: fixtureF64(0.4)}
	plain.Output = &sim.OutputReport{Verdict: "seamless", LastSource: fixtureI64(1290), FirstTarget: fixtureI64(1291), Detail: "1290 then 1291"}

	var chain []*sim.Migration
	for i, ms := range []float64{2000, 3000, 4000} {
		start := fixtureAt(ms)
		m := handover([]string{"m-chain-1", "m-chain-2", "m-chain-3"}[i], start, sim.MigrationCompleted, sim.PhaseStopSource, "",
			fixtureEvent(start, 1, 0, sim.PhaseRequested, "manager", sim.TimelineRequested, "handover requested", nil),
			fixtureEvent(start, 2, 2, sim.PhaseGetState, "source", "", "sent get-state", fixtureFrame("out", "get-state", `{"type":"get-state"}`)),
			fixtureEvent(start, 3, 500, sim.PhaseStopSource, "manager", sim.TimelineEnded, "completed", nil),
		)
		if i%2 == 1 {
			m.Source.Node, m.Target.Node = "b", "a"
		}
		m.Output = &sim.OutputReport{Verdict: "seamless"}
		chain = append(chain, m)
	}

	killStart := fixtureAt(6000)
	kill := handover("m-kill", killStart, sim.MigrationAborted, sim.PhaseGetState, "the source's socket closed before it sent its state",
		fixtureEvent(killStart, 1, 0, sim.PhaseRequested, "manager", sim.TimelineRequested, "handover requested", nil),
		fixtureEvent(killStart, 2, 1, sim.PhaseGetState, "source", "", "sent get-state", fixtureFrame("out", "get-state", `{"type":"get-state"}`)),
		fixtureEvent(killStart, 3, 1.2, sim.PhaseGetState, "source", "", "fault fired: kill source on get-state", nil),
		fixtureEvent(killStart, 4, 30, sim.PhaseGetState, "source", sim.TimelineSocketClosed, "socket closed: \x01EOF", nil),
		fixtureEvent(killStart, 5, 31, sim.PhaseGetState, "manager", sim.TimelineEnded, "aborted: the source's socket closed", nil),
	)
	kill.Faults = []sim.Fault{{Kind: "kill", Side: "source", On: "get-state"}}
	kill.Logs = &sim.MigrationLogs{From: killStart, Until: killStart.Add(time.Second), Tails: []sim.LogTail{
		{Side: "source", Instance: "counter-1", Lines: []sim.LogLine{{Instance: "counter-1", Service: "counter", Stream: "stderr", At: killStart.Add(time.Millisecond), Text: "panic: killed"}}},
	}}

	dropStart := fixtureAt(9000)
	drop := handover("m-drop", dropStart, sim.MigrationCompleted, sim.PhaseStopSource, "",
		fixtureEvent(dropStart, 1, 0, sim.PhaseRequested, "manager", sim.TimelineRequested, "handover requested", nil),
		fixtureEvent(dropStart, 2, 1, sim.PhaseGetState, "source", sim.TimelineSocketClosed, "fault fired: drop-socket source on get-state", nil),
		fixtureEvent(dropStart, 3, 800, sim.PhaseGetState, "source", sim.TimelineConnected, "hello accepted again", fixtureFrame("in", "hello", `{"type":"hello"}`)),
		fixtureEvent(dropStart, 4, 1500, sim.PhaseStopSource, "manager", sim.TimelineEnded, "completed", nil),
	)
	drop.Output = &sim.OutputReport{Verdict: "gap", Lost: 3, GapMs: fixtureF64(120), Detail: "3 packets lost at the seam"}

	corruptStart := fixtureAt(12000)
	corrupt := handover("m-corrupt", corruptStart, sim.MigrationFailed, sim.PhaseCutoverApply, "target-applied was not JSON",
		fixtureEvent(corruptStart, 1, 0, sim.PhaseRequested, "manager", sim.TimelineRequested, "handover requested", nil),
		fixtureEvent(corruptStart, 2, 470, sim.PhaseCutoverApply, "target", "", "received a corrupted target-applied", fixtureFrame("in", "target-applied", `"\u0000garbage"`)),
	)

	logs := func(start time.Time, lines ...string) []sim.LogLine {
		var out []sim.LogLine
		for i, text := range lines {
			stream := sim.StreamStdout
			if i == 1 {
				stream = sim.StreamStderr
			}
			out = append(out, sim.LogLine{Seq: int64(i + 1), Instance: "counter-1", Service: "counter", Stream: stream, At: start.Add(time.Duration(i) * 5 * time.Millisecond), Text: text})
		}
		return out
	}

	r := &Report{
		Version: "v0.9.0-test", Hostname: "ci-host", Template: "counter", Strategy: sim.Handover, Runtime: "process",
		Params:   map[string]string{"rate": "25", "note": `<b>bold</b> & "quoted"`},
		Parallel: 2, StartedAt: fixtureT0, DurationMs: 12345.6,
		// Out of ID order, as a parallel runner may finish them.
		Results: []*Result{
			{Case: Case{ID: "2.10", Group: "faults at get-state", Name: "drop the socket of the source on get-state", Strategy: sim.Handover, Step: "get-state",
				Moves: []Move{{Faults: []sim.Fault{{Kind: "drop-socket", Side: "source", On: "get-state"}}}}, Expect: "rolled back, or completed after a reconnect"},
				Grade: GradeTolerated, Rule: "contract 2.1: a job reconnects after a dropped socket", Why: "completed only after the source reconnected; the seam lost 3 packets",
				Observed:   Observed{States: []string{"completed"}, Seam: "gap", Fired: []string{"drop-socket source on get-state"}, Producing: fixtureBool(true), Running: []string{"b"}, Reconnects: 1, FollowUp: "completed, seamless"},
				Migrations: []*sim.Migration{drop}, Logs: logs(dropStart, "reconnecting", "socket closed"), StartedAt: dropStart, DurationMs: 1600},
			{Case: Case{ID: "1.1", Group: "handover", Name: "plain handover a→b", Strategy: sim.Handover, Moves: []Move{{}}, Expect: "completed, the output seamless"},
				Grade: GradePass, Rule: "contract 2: handover", Why: "completed, seamless",
				Observed:   Observed{States: []string{"completed"}, Seam: "seamless", PastPointOfNoReturn: true, Producing: fixtureBool(true), Running: []string{"b"}},
				Migrations: []*sim.Migration{plain}, Logs: logs(plainStart, "counter at 1290", "state sent"), StartedAt: plainStart.Add(-time.Millisecond), DurationMs: 700},
			{Case: Case{ID: "1.2", Group: "handover", Name: "chain a→b→a→b", Strategy: sim.Handover, Moves: []Move{{}, {}, {}}, Expect: "every move completed"},
				Grade: GradePass, Rule: "contract 2: handover", Why: "3 moves completed, seamless each time",
				Observed:   Observed{States: []string{"completed", "completed", "completed"}, Seam: "seamless", PastPointOfNoReturn: true, Running: []string{"a"}},
				Migrations: chain, StartedAt: fixtureAt(2000), DurationMs: 2500},
			{Case: Case{ID: "1.3", Group: "handover", Name: "refusal", Strategy: sim.Handover, Moves: []Move{{}}, Expect: "graded only when the job refuses"},
				Grade: GradeNotApplicable, Rule: "contract 2.2: refusal", Why: "the job never refuses",
				Observed: Observed{States: []string{"completed"}, Running: []string{"b"}}, StartedAt: fixtureAt(5000), DurationMs: 400},
			{Case: Case{ID: "2.1", Group: "faults at get-state", Name: "kill the source on get-state", Strategy: sim.Handover, Step: "get-state",
				Moves: []Move{{Faults: []sim.Fault{{Kind: "kill", Side: "source", On: "get-state"}}}}, Expect: "rolled back: the target removed"},
				Grade: GradeFail, Rule: "contract 2.4: rollback before the point of no return", Why: "the target was left running " + hostileScript,
				Observed:   Observed{States: []string{"aborted in get-state"}, Fired: []string{"kill source on get-state"}, Producing: fixtureBool(false), Running: []string{"b"}},
				Migrations: []*sim.Migration{kill}, Logs: logs(killStart, "counter at 88", hostileScript, hostileAttr, "last words"), LogsOmitted: 37,
				StartedAt: killStart, DurationMs: 1200},
			{Case: Case{ID: "2.9", Group: "faults at get-state", Name: "the worker aborts on get-state", Strategy: sim.Handover, Step: "get-state",
				Moves: []Move{{Faults: []sim.Fault{{Kind: "worker-abort", On: "get-state"}}}}, Expect: "rolled back"},
				Grade: GradeError, Why: "the template did not launch: exec: \"counter\": executable file not found",
				StartedAt: fixtureAt(8000), DurationMs: 50},
			{Case: Case{ID: "7.1", Group: "faults at target-applied", Name: `target-applied "corrupted" & <b>worse</b>`, Strategy: sim.Handover, Step: "target-applied",
				Moves: []Move{{Faults: []sim.Fault{{Kind: "corrupt-frame", Frame: "target-applied", Delay: sim.Duration(1500 * time.Millisecond)}}}}, Expect: "failed, reported, nothing rolled back"},
				Grade: GradeFail, Rule: "contract 2.6: failure after the point of no return", Why: "the target crashed\nand nothing reported it",
				Observed:   Observed{States: []string{"failed in cutover-apply"}, PastPointOfNoReturn: true, Fired: []string{"corrupt-frame target-applied"}},
				Migrations: []*sim.Migration{corrupt}, StartedAt: corruptStart, DurationMs: 800},
		},
		Chaos: &ChaosReport{
			Seed: 42, Runs: 3, Only: -1,
			Trials: []*Trial{
				{Run: 0, Schedule: Schedule{Moves: []Move{{}, {Faults: []sim.Fault{{Kind: "pause", Side: "target", On: "initial-state", Delay: sim.Duration(500 * time.Millisecond)}}}}},
					Observed: Observed{States: []string{"completed", "completed"}, Seam: "seamless"}, DurationMs: 900},
				{Run: 1, Schedule: Schedule{Moves: []Move{{Faults: []sim.Fault{{Kind: "kill", Side: "target", On: "target-ready"}, {Kind: "drop-frame", Frame: "get-state"}}}}},
					Broken: []string{"source producing after rollback"}, Observed: Observed{States: []string{"aborted in target-ready"}, Producing: fixtureBool(false)},
					Migrations: []*sim.Migration{kill}, DurationMs: 1100},
				{Run: 2, Schedule: Schedule{Moves: []Move{{}}}, Observed: Observed{States: []string{"completed"}, Seam: "seamless"}, DurationMs: 500},
			},
			Violations: []*Violation{{
				Run: 1, Invariant: "source producing after rollback", Detail: "the source sent nothing for 2s after the rollback " + hostileScript,
				Schedule:  Schedule{Moves: []Move{{Faults: []sim.Fault{{Kind: "kill", Side: "target", On: "target-ready"}, {Kind: "drop-frame", Frame: "get-state"}}}}},
				Minimised: Schedule{Moves: []Move{{Faults: []sim.Fault{{Kind: "kill", Side: "target", On: "target-ready"}}}}},
				Replay:    "normsim conform templates/counter --chaos 3 --seed 42 --run 1",
			}},
		},
	}
	r.Count()
	return r
}
