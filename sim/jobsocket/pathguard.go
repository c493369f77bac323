package jobsocket

import (
	"bytes"
	"errors"
	"net"
	"net/url"
	"syscall"
)

// A job's upgrade request whose path holds a percent sign that starts no
// escape ("/instances/j/%A") never reaches the listener as such: Go's
// HTTP server answers it 400 before any handler runs. The reference
// worker upgrades it and closes with 4401 (a segment that does not
// percent-decode is no path at all), and so does normsim: pathGuard
// escapes such a percent sign as %25 in the request line, so the path
// reaches the listener, names no instance, and is closed with 4401.

// maxRequestLine bounds how much of a connection pathGuard reads looking
// for the end of its request line; a longer line is passed on untouched
// (net/http refuses it).
const maxRequestLine = 8 << 10

// pathGuard is a listener whose connections have their request line
// guarded (guardedConn).
type pathGuard struct{ net.Listener }

func (g pathGuard) Accept() (net.Conn, error) {
	c, err := g.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &guardedConn{Conn: c}, nil
}

// guardedConn reads its request line first, mends its path, and hands it
// on before the rest; from then on it reads through.
type guardedConn struct {
	net.Conn
	checked bool
	ahead   []byte // read and mended, not yet handed on
	err     error  // what ended the request line's read, after ahead
}

func (c *guardedConn) Read(p []byte) (int, error) {
	if !c.checked {
		c.checked = true
		c.readRequestLine()
	}
	if len(c.ahead) > 0 {
		n := copy(p, c.ahead)
		c.ahead = c.ahead[n:]
		if len(c.ahead) == 0 {
			c.ahead = nil // a socket lives long: keep no buffer for it
		}
		return n, nil
	}
	if c.err != nil {
		err := c.err
		c.err = nil
		return 0, err
	}
	return c.Conn.Read(p)
}

// SyscallConn is the TCP connection's, so unreadBytes can ask the kernel
// what waits on it.
func (c *guardedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// readRequestLine reads until the end of the first line (or the bound,
// or an error: net/http's read deadline applies) and mends it.
func (c *guardedConn) readRequestLine() {
	buf := make([]byte, 0, 512)
	for !bytes.Contains(buf, []byte("\n")) && len(buf) < maxRequestLine {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := c.Conn.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			c.err = err
			break
		}
	}
	c.ahead = mendRequestLine(buf)
}

// mendRequestLine escapes, in the path of a request line ("GET /path
// HTTP/1.1\r\n…"), each percent sign not followed by two hex digits. The
// query and everything after the line are left as they are.
func mendRequestLine(b []byte) []byte {
	end := bytes.IndexByte(b, '\n')
	if end < 0 {
		return b
	}
	start := bytes.IndexByte(b[:end], ' ')
	if start < 0 {
		return b
	}
	stop := bytes.IndexAny(b[start+1:end], " ?")
	if stop < 0 {
		return b
	}
	path := b[start+1 : start+1+stop]
	if bytes.IndexByte(path, '%') < 0 {
		return b // every job's path: nothing to look at
	}
	if _, err := url.PathUnescape(string(path)); err == nil {
		return b // what net/http parses: nothing to mend
	}
	var out []byte
	out = append(out, b[:start+1]...)
	for i, c := range path {
		if c == '%' && !escapeAt(path, i) {
			out = append(out, "%25"...)
			continue
		}
		out = append(out, c)
	}
	return append(out, b[start+1+stop:]...)
}

// escapeAt says whether path holds a whole percent escape at i.
func escapeAt(path []byte, i int) bool {
	return i+2 < len(path) && isHex(path[i+1]) && isHex(path[i+2])
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
