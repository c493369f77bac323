package docker

import (
	"strings"
	"testing"
)

// TestBuildHintOffersTheFastBuildFirst: a missing example image is built
// alone, in seconds, by normsim build-examples NAME; the script that builds
// every example comes second; an image of another kind is for docker.
func TestBuildHintOffersTheFastBuildFirst(t *testing.T) {
	got := buildHint([]string{"normsim/myjob:src-0123456789ab"})
	if !strings.HasPrefix(got, "from a normsim checkout, build it in seconds with: normsim build-examples myjob (") ||
		!strings.Contains(got, "scripts/build-examples builds every example") {
		t.Errorf("one example image: %q", got)
	}
	if got := buildHint([]string{"normsim/myjob:src-0123456789ab", "normsim/otherjob:src-ba9876543210"}); !strings.Contains(got, "build them in seconds with: normsim build-examples myjob otherjob") {
		t.Errorf("two example images: %q", got)
	}
	if got := buildHint([]string{"normsim/myjob:src-0123456789ab", "acme/encoder:1.2"}); strings.Contains(got, "build-examples") {
		t.Errorf("an image that is no example's: %q", got)
	}
}
