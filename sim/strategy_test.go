package sim

import (
	"strings"
	"testing"
)

func TestCheckStrategy(t *testing.T) {
	tests := []struct {
		declared, requested Strategy
		ok                  bool
	}{
		{"", StopThenStart, true},
		{"", Overlap, false},
		{"", Handover, false},
		{Overlap, Overlap, true},
		{Overlap, StopThenStart, true},
		{Overlap, Handover, false},
		{Handover, Handover, true},
		{Handover, StopThenStart, true},
		{Handover, Overlap, false}, // overlap is not "safer" than handover
		{StopThenStart, Overlap, false},
	}
	for _, tt := range tests {
		err := CheckStrategy(tt.declared, tt.requested)
		if (err == nil) != tt.ok {
			t.Errorf("CheckStrategy(%q, %q) = %v, want ok=%v", tt.declared, tt.requested, err, tt.ok)
		}
		if err != nil {
			if ErrorCode(err) != EUnprocessable || !strings.Contains(err.Error(), string(DeclaredStrategy(tt.declared))) {
				t.Errorf("error %q (code %s) must be UNPROCESSABLE and name the declared strategy", err, ErrorCode(err))
			}
		}
	}
}

func TestParseStrategy(t *testing.T) {
	for _, s := range []string{"overlap", "stopThenStart", "handover"} {
		if _, err := ParseStrategy(s); err != nil {
			t.Errorf("ParseStrategy(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"", "live", "Handover", "stopthenstart"} {
		if _, err := ParseStrategy(s); err == nil {
			t.Errorf("ParseStrategy(%q) accepted", s)
		}
	}
}

func TestAllowedStrategies(t *testing.T) {
	got := AllowedStrategies(Handover)
	if len(got) != 2 || got[0] != StopThenStart || got[1] != Handover {
		t.Fatalf("AllowedStrategies(handover) = %v", got)
	}
	if got := AllowedStrategies(""); len(got) != 1 || got[0] != StopThenStart {
		t.Fatalf("AllowedStrategies(none) = %v", got)
	}
}

func TestInstanceTransitions(t *testing.T) {
	if !CanTransition(InstanceStarting, InstanceRunning) || CanTransition(InstanceStopped, InstanceRunning) {
		t.Fatal("transition table broken")
	}
}
