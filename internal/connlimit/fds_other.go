//go:build !unix

package connlimit

// OpenFiles is a generous guess where the limit cannot be read.
func OpenFiles() int { return 16384 }
