//go:build !unix

package jobsocket

// openFileLimit is a generous guess where the limit cannot be read.
func openFileLimit() int { return 16384 }
