//go:build !linux

package process

import (
	"io"
	"os"
)

// releaseRead empties a log file whose first off bytes have been read, so a
// chatty process cannot fill the disk. Lines written between the last read
// and the truncation are lost: without Linux's hole punching, a rare loss
// is the price of a bounded file.
// It returns the offset released up to: 0, the file starts again.
func releaseRead(f *os.File, off int64) int64 {
	if f.Truncate(0) == nil {
		_, _ = f.Seek(0, io.SeekStart)
	}
	return 0
}

// watchWrites has no inotify here: the tailer polls.
func watchWrites(string) (<-chan struct{}, func()) { return nil, func() {} }

// dataFrom knows no holes here: the data goes on from off.
func dataFrom(f *os.File, off int64) (next int64, end bool) { return off, false }
