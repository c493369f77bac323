//go:build !linux

package jobsocket

import "net"

// unreadBytes cannot ask this system's kernel: -1, it cannot say.
func unreadBytes(net.Conn) int { return -1 }

// pendingRead cannot ask this system: -1, it cannot say.
func pendingRead(net.Conn) int { return -1 }
