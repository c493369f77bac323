package media

import "testing"

// A GOP header speaks for the first picture after it, in the PES it came
// in or the next: a picture consumes it, and a new GOP header replaces it.
func TestAnMPEGGOPHeaderSpeaksForTheNextPictureAlone(t *testing.T) {
	gop := func(closed bool) []byte {
		b := []byte{mpegGOPStart, 0x00, 0x08, 0x00, 0x00} // time_code 00:00:00:00 (its marker bit set)
		if closed {
			b[4] |= 0x40
		}
		return b
	}
	picture := func(typ int) []byte { return []byte{mpegPictureStart, 0x00, byte(typ) << 3, 0xff, 0xf8} }
	slice := []byte{mpegSliceFirst, 0x12, 0x34}
	for _, c := range []struct {
		name     string
		units    [][]byte
		carried  mpegGOP
		open     bool    // the I-picture is outside a closed GOP
		leftOver mpegGOP // what the unit leaves for the next picture
	}{
		{"headers alone, closed", [][]byte{gop(true)}, mpegNoGOP, false, mpegClosedGOP},
		{"an I-picture after a closed GOP header of the PES before", [][]byte{picture(mpegPictureI), slice}, mpegClosedGOP, false, mpegNoGOP},
		{"an I-picture after an open GOP header of the PES before", [][]byte{picture(mpegPictureI), slice}, mpegOpenGOP, true, mpegNoGOP},
		{"an I-picture with no GOP header", [][]byte{picture(mpegPictureI), slice}, mpegNoGOP, true, mpegNoGOP},
		{"its own open GOP header over a closed one carried", [][]byte{gop(false), picture(mpegPictureI), slice}, mpegClosedGOP, true, mpegNoGOP},
		{"a second I-picture in the PES comes under no GOP header", [][]byte{gop(true), picture(mpegPictureB), slice, picture(mpegPictureI), slice}, mpegNoGOP, true, mpegNoGOP},
		{"a GOP header after the picture is the next's", [][]byte{picture(mpegPictureI), slice, gop(true)}, mpegNoGOP, true, mpegClosedGOP},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := inspectMPEGVideo(c.units, c.carried)
			if u.key && u.openIRAP != c.open {
				t.Errorf("openIRAP %v, want %v", u.openIRAP, c.open)
			}
			if u.gop != c.leftOver {
				t.Errorf("left %d for the next picture, want %d", u.gop, c.leftOver)
			}
		})
	}
	// A P-picture consumes the GOP header carried to it: the I-picture
	// after it, with none of its own, is outside a closed GOP.
	p := inspectMPEGVideo([][]byte{picture(2), slice}, mpegClosedGOP) // picture_coding_type 2: a P-picture
	if i := inspectMPEGVideo([][]byte{picture(mpegPictureI), slice}, p.gop); !i.key || !i.openIRAP {
		t.Errorf("the I-picture after a P-picture that took the closed GOP header: key %v, openIRAP %v", i.key, i.openIRAP)
	}
}
