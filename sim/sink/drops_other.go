//go:build !linux

package sink

import "net"

// Elsewhere the kernel does not say what it dropped: the receiver counts
// its own read errors only.
func watchKernelDrops(*net.UDPConn) bool { return false }

func kernelDropped([]byte) uint32 { return 0 }

// truncated cannot be told here: a longer datagram is read cut.
func truncated(int) bool { return false }
