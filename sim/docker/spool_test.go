package docker

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// TestSpoolReadsAheadOfItsReader: the spool takes a stream faster than
// its reader reads it (the writer is never kept waiting below spoolMax),
// then hands every byte on in order with the time it arrived, and ends
// with the stream's own error.
func TestSpoolReadsAheadOfItsReader(t *testing.T) {
	pr, pw := io.Pipe()
	at := time.Unix(100, 0)
	sp := newSpool(pr, func() time.Time { return at })
	var sent bytes.Buffer
	for i := range 1000 {
		chunk := bytes.Repeat([]byte{byte(i)}, 1000)
		sent.Write(chunk)
		// With nobody reading the spool, this returns only if the spool
		// has read the previous chunk already.
		done := make(chan struct{})
		go func() { pw.Write(chunk); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("write %d waited for the spool's reader", i)
		}
	}
	broken := errors.New("connection reset")
	pw.CloseWithError(broken)
	got, err := io.ReadAll(sp)
	if !errors.Is(err, broken) {
		t.Errorf("end: %v, want %v", err, broken)
	}
	if !bytes.Equal(got, sent.Bytes()) {
		t.Errorf("read %d bytes, sent %d (or out of order)", len(got), sent.Len())
	}
	if !sp.at().Equal(at) {
		t.Errorf("at = %v", sp.at())
	}
}
