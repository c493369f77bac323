package sim

import (
	"math"
	"testing"
)

func TestFormatMs(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0.0 ms"}, {0.84, "0.8 ms"}, {9.96, "10.0 ms"}, {412.34, "412.3 ms"}, {1234.56, "1234.6 ms"},
		{9999.9, "9999.9 ms"}, {9999.96, "10.000 s"}, {34210, "34.210 s"}, {123456.7, "123.457 s"},
		{-2.5, "-2.5 ms"}, {math.NaN(), "—"}, {math.Inf(1), "—"},
	} {
		if got := FormatMs(tc.in); got != tc.want {
			t.Errorf("FormatMs(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestFormatResult: target-applied is printed whole, what is absent named.
func TestFormatResult(t *testing.T) {
	skew := 1.25
	for _, tc := range []struct {
		in   MigrationResult
		want string
	}{
		{MigrationResult{}, "applied none; failed none; skewMs not reported"},
		{MigrationResult{Applied: []string{"counter", "audio"}, Failed: []FailedApply{{ID: "overlay", Reason: "font missing"}, {ID: "logo"}}, SkewMs: &skew},
			"applied counter, audio; failed overlay (font missing), logo (no reason given); skewMs 1.25"},
	} {
		if got := FormatResult(tc.in); got != tc.want {
			t.Errorf("FormatResult(%+v) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := FormatJudgement(Judgement{Grade: GradeTolerated, Why: "the target could not apply 1 participant: overlay (x)"}); got != "tolerated (at fault: none): the target could not apply 1 participant: overlay (x)" {
		t.Errorf("FormatJudgement = %q", got)
	}
}

// TestAppliedReported: a completed handover reported; a rollback did not;
// a failed handover did when its timeline has the frame.
func TestAppliedReported(t *testing.T) {
	failed := &Migration{Strategy: Handover, State: MigrationFailed}
	for _, tc := range []struct {
		m    *Migration
		want bool
	}{
		{&Migration{Strategy: Handover, State: MigrationCompleted}, true},
		{&Migration{Strategy: StopThenStart, State: MigrationCompleted}, false},
		{&Migration{Strategy: Handover, State: MigrationAborted}, false},
		{failed, false},
		{&Migration{Strategy: Handover, State: MigrationFailed, Events: []MigrationEvent{{Frame: &FrameInfo{Direction: "in", Type: "target-applied"}}}}, true},
	} {
		if got := AppliedReported(tc.m); got != tc.want {
			t.Errorf("AppliedReported(%s %s, %d events) = %v, want %v", tc.m.Strategy, tc.m.State, len(tc.m.Events), got, tc.want)
		}
	}
}
