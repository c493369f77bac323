package sim

import (
	"cmp"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"
)

// FormatMs formats a duration (or a time from a migration's start) given
// in milliseconds for people: "0.8 ms", "412.3 ms", "9999.9 ms", then
// seconds, "34.210 s". The CLI and the dashboard both use it, so a
// duration reads the same in either, to a tenth of a millisecond below
// ten seconds (timeline events a fraction of a millisecond apart read
// apart) and to the millisecond above.
func FormatMs(ms float64) string {
	switch {
	case math.IsNaN(ms) || math.IsInf(ms, 0):
		return "—"
	case math.Abs(ms) < 9999.95: // what would round to 10000.0 ms reads 10.000 s
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.3f s", ms/1000)
	}
}

// AppliedReported reports whether a migration's target sent target-applied,
// so its result is there to show whole: every completed handover's did,
// and a handover that failed after it says so on its timeline.
func AppliedReported(m *Migration) bool {
	if m.Strategy != Handover {
		return false
	}
	r := m.Result
	if m.State == MigrationCompleted || len(r.Applied) > 0 || len(r.Failed) > 0 || r.SkewMs != nil {
		return true
	}
	for _, ev := range m.Events {
		if ev.Frame != nil && ev.Frame.Direction == "in" && ev.Frame.Type == "target-applied" {
			return true
		}
	}
	return false
}

// FormatResult is what the target reported in target-applied, whole:
// "applied counter; failed overlay (font missing); skewMs 1.5". Every
// tool prints it so, with "none" and "not reported" for what is absent.
func FormatResult(r MigrationResult) string {
	applied := "none"
	if len(r.Applied) > 0 {
		applied = strings.Join(r.Applied, ", ")
	}
	failed := "none"
	if len(r.Failed) > 0 {
		parts := make([]string, len(r.Failed))
		for i, f := range r.Failed {
			parts[i] = f.ID + " (" + cmp.Or(f.Reason, "no reason given") + ")"
		}
		failed = strings.Join(parts, ", ")
	}
	skew := "not reported"
	if r.SkewMs != nil {
		skew = strconv.FormatFloat(*r.SkewMs, 'f', -1, 64)
	}
	return "applied " + applied + "; failed " + failed + "; skewMs " + skew
}

// FormatJudgement is the judgement in one line, as every tool prints it:
// "tolerated (at fault: none): the target could not apply …".
func FormatJudgement(j Judgement) string {
	return fmt.Sprintf("%s (at fault: %s): %s", j.Grade, cmp.Or(j.AtFault, "none"), j.Why)
}

// FileKind names a file mode that is not a regular file's, for a message
// that refuses such a file: "a directory", "a named pipe", ...
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "a special file"
}
