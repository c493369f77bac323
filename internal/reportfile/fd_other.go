//go:build !unix

package reportfile

import "errors"

// writeFD is never reached here: only Linux's /proc names descriptors.
func writeFD(fd int, data []byte) error {
	return errors.New("writing to a descriptor is not supported on this system")
}
