package template

import (
	"fmt"
	"strings"
	"testing"

	"github.com/containerd/platforms"

	"github.com/normsim/normsim/sim"
)

// A platform: that is no platform validated, and the Docker runtime then
// called it a missing image (IMAGE_MISSING), sending the operator to
// build an image that was there all along. It is a validate problem
// naming the service, the value and what a platform looks like, and so
// is a launch whose values make it one; a platform written as compose
// takes it (an OS or an architecture alone, os/arch/variant) is valid.
func TestUnparseablePlatformIsAComposeProblem(t *testing.T) {
	res := validateOne(t, "badplatform", tpl(`
services:
  app:
    image: busybox
    platform: linux-amd64
`, ""))
	if res.Valid || len(res.Problems) != 1 || res.Problems[0].Code != sim.EComposeInvalid {
		t.Fatalf("validate: %+v, want one COMPOSE_INVALID problem", res)
	}
	for _, want := range []string{`services.app.platform: "linux-amd64" is not a platform`, "linux/amd64", "remove platform"} {
		if !strings.Contains(res.Problems[0].Message, want) {
			t.Errorf("problem %q lacks %q", res.Problems[0].Message, want)
		}
	}

	for _, ok := range []string{"linux/amd64", "linux/arm64/v8", "linux/arm/v7", "arm64", "linux"} {
		if res := validateOne(t, "okplatform", tpl("services:\n  app:\n    image: busybox\n    platform: "+ok+"\n", "")); !res.Valid {
			t.Errorf("platform %s: %+v", ok, res.Problems)
		}
	}

	l := MustLoad(t, tpl(`
services:
  app:
    image: busybox
    platform: ${PLATFORM}
`, `parameters:
  - name: PLATFORM
    purpose: the image's platform
    default: linux/amd64
`))
	_, err := l.Launch(input(map[string]string{"PLATFORM": "amd64/linux/x/y"}))
	wantErr(t, err, sim.EComposeInvalid, `services.app.platform: "amd64/linux/x/y" is not a platform`)
	if _, err := l.Launch(input(nil)); err != nil {
		t.Errorf("the default platform: %v", err)
	}
}

// What docker.CheckPlatform says (app/withdocker sets it in normsim;
// this package's tests do not link Docker), which these tests judge with.
func init() {
	CheckPlatform = func(service, platform string) error {
		if _, err := platforms.Parse(platform); err != nil {
			return fmt.Errorf("services.%s.platform: %q is not a platform (%v); write os/arch or os/arch/variant, such as linux/amd64, or remove platform", service, platform, err)
		}
		return nil
	}
}
