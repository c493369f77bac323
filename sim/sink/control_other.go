//go:build !linux

package sink

import (
	"net"
	"time"
)

// Elsewhere the kernel does not say what it dropped: the receiver counts
// its own read errors only.
func watchKernelDrops(*net.UDPConn) bool { return false }

// Nor does it stamp arrivals here: a datagram is dated when it is read.
func stampArrivals(*net.UDPConn) bool { return false }

const controlBuffer = 0

func control([]byte) (arrived time.Time, dropped uint32) { return time.Time{}, 0 }

// truncated cannot be told here: a longer datagram is read cut.
func truncated(int) bool { return false }
