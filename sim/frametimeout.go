package sim

import (
	"time"

	"github.com/normsim/normsim/protocol"
)

// FrameTimeout is the timeout of the phase a frame type belongs to, and
// that timeout's name. A delay-frame fault may hold the frame, and a pause
// armed on it freeze its job, at most twice that (the fault plan refuses
// more, and conform holds a frame that long). abort can
// come in any phase, so the shortest phase bounds it.
func FrameTimeout(typ string, t Timeouts) (time.Duration, string) {
	switch typ {
	case protocol.TypeGetState, protocol.TypeState, protocol.TypeStateRefused:
		return t.State.D(), "state"
	case protocol.TypeHello, protocol.TypeHelloAck:
		return t.TargetStart.D(), "targetStart"
	case protocol.TypeInitialState, protocol.TypeTargetReady:
		return t.TargetReady.D(), "targetReady"
	case protocol.TypeCutoverReady, protocol.TypeSourceStoppedOutput:
		return t.Stop.D(), "stop"
	case protocol.TypeCutoverApply, protocol.TypeTargetApplied:
		return t.Apply.D(), "apply"
	}
	d, name := t.State.D(), "state"
	for _, f := range []struct {
		d    time.Duration
		name string
	}{{t.TargetReady.D(), "targetReady"}, {t.Stop.D(), "stop"}, {t.Apply.D(), "apply"}} {
		if f.d < d {
			d, name = f.d, f.name
		}
	}
	return d, name
}
