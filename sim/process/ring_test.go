package process

import (
	"slices"
	"testing"
)

func TestLogRing(t *testing.T) {
	tests := []struct {
		name       string
		max        int
		appended   []string
		from       uint64
		wantLines  []string
		wantNext   uint64
		wantMissed uint64
	}{
		{"empty", 3, nil, 0, nil, 0, 0},
		{"under capacity", 3, []string{"a", "b"}, 0, []string{"a", "b"}, 2, 0},
		{"from cursor", 3, []string{"a", "b"}, 1, []string{"b"}, 2, 0},
		{"caught up", 3, []string{"a", "b"}, 2, nil, 2, 0},
		{"overwritten", 3, []string{"a", "b", "c", "d", "e"}, 0, []string{"c", "d", "e"}, 5, 2},
		{"overwritten from cursor", 3, []string{"a", "b", "c", "d", "e"}, 3, []string{"d", "e"}, 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newLogRing(tt.max)
			for _, l := range tt.appended {
				r.append(l)
			}
			lines, next, missed, _, closed := r.since(tt.from)
			if !slices.Equal(lines, tt.wantLines) || next != tt.wantNext || missed != tt.wantMissed || closed {
				t.Fatalf("since(%d) = %q, %d, %d, %v; want %q, %d, %d, false", tt.from, lines, next, missed, closed, tt.wantLines, tt.wantNext, tt.wantMissed)
			}
		})
	}
}

func TestLogRingWakeAndClose(t *testing.T) {
	r := newLogRing(2)
	if !r.empty() {
		t.Fatal("new ring not empty")
	}
	_, _, _, wake, _ := r.since(0)
	r.append("a", "b")
	select {
	case <-wake:
	default:
		t.Fatal("append did not wake")
	}
	_, _, _, wake, _ = r.since(2)
	r.close()
	select {
	case <-wake:
	default:
		t.Fatal("close did not wake")
	}
	r.append("c")
	lines, next, _, _, closed := r.since(0)
	if !closed || next != 2 || !slices.Equal(lines, []string{"a", "b"}) {
		t.Fatalf("after close: %q, %d, %v", lines, next, closed)
	}
	r.close() // twice is fine
}
