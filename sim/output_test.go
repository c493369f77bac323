package sim

import (
	"testing"
	"time"
)

func pk(inst string, seq int64, ms int) Packet {
	return Packet{At: time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond), Instance: inst, Seq: seq}
}

func TestAnalyzeSeam(t *testing.T) {
	tests := []struct {
		name    string
		pkts    []Packet
		verdict string
		lost    int64
		dup     int64
	}{
		{"seamless", []Packet{pk("s", 1, 0), pk("s", 2, 10), pk("t", 3, 20), pk("t", 4, 30)}, VerdictSeamless, 0, 0},
		{"gap", []Packet{pk("s", 1, 0), pk("s", 2, 10), pk("t", 6, 60)}, VerdictGap, 3, 0},
		{"overlap", []Packet{pk("s", 1, 0), pk("t", 2, 5), pk("s", 2, 10), pk("s", 3, 20)}, VerdictOverlap, 0, 1},
		{"duplicate", []Packet{pk("s", 1, 0), pk("s", 2, 10), pk("t", 2, 20)}, VerdictDuplicate, 0, 1},
		{"no target", []Packet{pk("s", 1, 0)}, VerdictNoOutput, 0, 0},
		{"other instances ignored", []Packet{pk("x", 9, 0), pk("s", 1, 1), pk("t", 2, 2)}, VerdictSeamless, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := AnalyzeSeam("s", "t", tt.pkts)
			if r.Verdict != tt.verdict || r.Lost != tt.lost || r.Duplicated != tt.dup {
				t.Fatalf("got %+v (%s), want verdict %s lost %d dup %d", r, r.Detail, tt.verdict, tt.lost, tt.dup)
			}
		})
	}
}
