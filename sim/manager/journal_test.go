package manager

import (
	"context"
	"log/slog"
	"slices"
	"testing"
)

// TestJournalWritesTheLastSnapshotInTheFirstPlace: of several writes of
// one record in a burst only the last is made, where the first was, so a
// migration's row still precedes its events (their foreign key needs it);
// writes without a key all happen, in order, and a flush is told after.
func TestJournalWritesTheLastSnapshotInTheFirstPlace(t *testing.T) {
	var got []string
	w := func(key, what string) journalOp {
		return journalOp{key: key, write: func(context.Context) { got = append(got, what) }}
	}
	flushed := make(chan struct{})
	j := &journal{log: slog.New(slog.DiscardHandler)}
	j.write([]journalOp{
		w("migration m1", "m1 v1"),
		w("", "m1 event 1"),
		w("instance i1", "i1 v1"),
		w("migration m1", "m1 v2"),
		w("", "m1 event 2"),
		{flushed: flushed},
		w("instance i1", "i1 deleted"),
		w("migration m1", "m1 v3"),
		w("instance i2", "i2 v1"),
	})
	want := []string{"m1 v3", "m1 event 1", "i1 deleted", "m1 event 2", "i2 v1"}
	if !slices.Equal(got, want) {
		t.Fatalf("written %q\nwant    %q", got, want)
	}
	select {
	case <-flushed:
	default:
		t.Fatal("the flush in the batch was not told")
	}
}
